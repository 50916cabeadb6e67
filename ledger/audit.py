"""The audit chain, and `verify`: is this ledger what its own history says it is?

Every event carries the hash of the event before it and its own: sha256 over the previous hash and the
event's canonical form, written in the same transaction as the event. Triggers refuse UPDATE, DELETE and
REPLACE on events and any event that does not chain to the last one; `verify` checks what triggers
cannot (someone who dropped them, or edited the file): it recomputes the chain, rebuilds every job's
state, epoch and attempt from the events and compares them with the `jobs` table, and runs SQLite's
integrity check. The head hash (the newest event's) is shown by `status` and sent with notifications,
so a copy outside the ledger anchors it.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ledger import jsontext, replay

# Built once, not per event; the body is a flat list of scalars, which cannot hold itself.
_CHAIN_BODY = jsontext.encoder(sort_keys=False, separators=(",", ":"), check_circular=False)


def event_hash(
    prev_hash: str | None, at: float, job_id: str, operation: str, seq: int, actor: str, kind: str,
    from_state: str | None, to_state: str | None, epoch: int | None, detail: str,
) -> str:
    """The hash an event must carry: sha256 of the previous hash and the event's canonical JSON."""
    body = _CHAIN_BODY(
        [prev_hash, repr(float(at)), job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail]
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def head(conn: sqlite3.Connection) -> tuple[int, str | None]:
    """(number of events, the newest event's hash) — the anchor to keep outside the ledger."""
    row = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
    count = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return int(count), (row[1] if row else None)


@dataclass
class Verdict:
    """What `verify` found: ok, or the first break of each kind, and the counts it read."""

    events: int = 0
    jobs: int = 0
    head_hash: str | None = None
    chain_break: str | None = None
    job_mismatch: str | None = None
    integrity: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the chain holds, the jobs equal their replay, and SQLite finds no damage."""
        return self.chain_break is None and self.job_mismatch is None and not self.integrity

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"ok": self.ok, **self.__dict__}


def verify(conn: sqlite3.Connection) -> Verdict:
    """Check the chain, the jobs against the replay of the events, and SQLite's integrity (one snapshot).

    Never raises for a damaged file: what SQLite cannot read is reported in `integrity`, and the checks
    that can still run do.
    """
    v = Verdict()
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        try:
            v.integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]
        except sqlite3.DatabaseError as e:
            v.integrity = [f"SQLite's integrity check could not run: {e}"]
        try:
            _check_chain(conn, v)
        except (sqlite3.DatabaseError, ValueError, TypeError) as e:
            v.integrity.append(f"the events cannot be read: {e}")
        try:
            v.jobs = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
            bad = replay.mismatches(conn)
        except (sqlite3.DatabaseError, ValueError, TypeError) as e:
            v.integrity.append(f"the jobs cannot be read: {e}")
            bad = []
        if bad:
            m = bad[0]
            v.job_mismatch = (f"job {m.key.job_id} / {m.key.operation}: the table says {m.from_table} but its events "
                              f"say {m.from_events} (a write bypassed the state machine)")
    finally:
        if own:
            _end_read(conn)
    return v


def _end_read(conn: sqlite3.Connection) -> None:
    """End verify's read transaction; on a damaged file COMMIT itself may fail, then roll back."""
    try:
        conn.execute("COMMIT")
    except sqlite3.DatabaseError:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.DatabaseError):
                conn.execute("ROLLBACK")


def _check_chain(conn: sqlite3.Connection, v: Verdict) -> None:
    """Recompute the hash chain in id order; record the first break and the head hash in `v`."""
    prev: str | None = None
    for row in conn.execute(
        "SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, prev_hash, hash "
        "FROM events ORDER BY id"
    ):
        v.events += 1
        if v.chain_break is not None:
            continue
        if row[11] != prev:
            v.chain_break = (f"event {row[0]} ({row[2]} / {row[3]} seq {row[4]}): its previous hash does not "
                             "match the event before it (an event was removed or inserted)")
            continue
        want = event_hash(prev, *row[1:11])
        if row[12] != want:
            v.chain_break = (f"event {row[0]} ({row[2]} / {row[3]} seq {row[4]}, {row[6]}): its content does not "
                             "match its hash (the event was rewritten)")
        prev = row[12]
    v.head_hash = prev
