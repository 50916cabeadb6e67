"""What opening a ledger checks: what is cheap and certain, never a walk of the whole file.

Every command that reads a ledger for a person (`status`, `events`, `show`, the console, the browser seat) checks,
before it answers: the backend's header and schema (`ledger.store.check_header`: on SQLite the file's header says
SQLite, its page size and length hold, the schema reads back), and the newest event read back whole and hashed as
the chain says (the last page the events were written to, and proof that nothing rewrote the head). Damage anywhere
else is met by the read that touches it (LedgerCorrupt, exit 7) and found by `reclaim verify`, the full check,
which records when it last passed (`status` and `metrics` say when)."""

from __future__ import annotations

from ledger import store
from ledger.chain import event_hash
from ledger.errors import LedgerCorrupt
from ledger.store import Connection
from ledger.store import verify as verify_store


def check(conn: Connection) -> None:
    """Check the header and schema, and that the newest event matches its hash. Raises LedgerCorrupt naming what
    is wrong, and the ledger's other errors when it cannot be read."""
    store.check_header(conn)
    link = verify_store.newest_link(conn)
    if link is None or link.hash is None:
        return
    want = event_hash(link.prev_hash, link.at, link.job_id, link.operation, link.seq, link.actor, link.kind,
                      link.from_state, link.to_state, link.epoch, link.detail, link.seal)
    if want != link.hash:
        what = f"the newest event ({link.id}) does not match its hash: damaged, or rewritten around reclaim"
        raise LedgerCorrupt(f"ledger {store.shown_ledger(conn.ledger_name)}: the ledger file is corrupt ({what}); "
                            "restore it from a backup; 'reclaim verify' says more", damage=what)
