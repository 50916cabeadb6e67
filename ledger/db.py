"""Opening a ledger and writing to it, whichever backend it lives on.

A path is a SQLite file (`ledger.store.sqlite`); a `postgresql://` URL is a PostgreSQL database
(`ledger.store.postgres`). Both give the connection interface the rules are written against (see
`ledger.store`); this module only chooses. Every database error leaves as the ledger's own (`ledger.errors`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import cast

from ledger import store
from ledger.errors import LedgerError
from ledger.store import Connection as Connection
from ledger.store import sqlite as sqlite_store


def create_ledger(path: str | Path) -> bool:
    """Create a ledger at `path` (a file, or a `postgresql://` database) or migrate one forward; return True
    when a new ledger was made. Refuses with one line (LedgerUnusable), writing nothing, when the place is
    unusable or holds something that is not a reclaim ledger of this version or older. The outcome journal is
    allocated too, wherever it lives (beside the file, or on this host for PostgreSQL), also for a ledger
    that already existed or was migrated; when it cannot be (a full disk), `reclaim status` says so."""
    from ledger import journal

    if store.is_url(path):
        from ledger.store import postgres

        created = postgres.create(str(path))
        conn = postgres.connect(str(path))
        try:
            journal.reserve_space(journal.of(cast(Connection, conn)))
        finally:
            conn.close()
        return created
    created = sqlite_store.create_ledger(path, companions=_journal_of)
    journal.reserve_space(path)
    return created


def _journal_of(ledger: Path) -> list[Path]:
    """Allocate a new ledger file's outcome journal beside it; [the journal] when this call made it."""
    from ledger import journal

    return [journal.journal_path(ledger)] if journal.allocate(ledger) else []


def connect(
    path: str | Path,
    *,
    readonly: bool = False,
    synchronous: str = "FULL",
    check_same_thread: bool = True,
) -> Connection:
    """Open an existing ledger (migrated forward unless read-only), in autocommit mode, rows readable by
    index and by name. Raises LedgerUnusable with one line when it is missing, not a ledger or too new;
    nothing is created or written then. `synchronous` and `check_same_thread` apply to SQLite only."""
    if store.is_url(path):
        from ledger.store import postgres

        return cast(Connection, postgres.connect(str(path), readonly=readonly))
    return sqlite_store.connect(path, readonly=readonly, synchronous=synchronous, check_same_thread=check_same_thread)


def write_tx(
    conn: Connection, *, wait: float | None = None, lock: str | None = None, rows_only: bool = False
) -> AbstractContextManager[Connection]:
    """Run the block in one write transaction; commit on success, roll back on any error.

    A lock held past the busy timeout (or `wait` seconds, when given) raises LedgerLocked (exit 8) on both
    backends. SQLite: BEGIN IMMEDIATE, tried in short steps. PostgreSQL: READ COMMITTED under an
    advisory lock, the audit chain's, or with `lock` (an operation name) that operation's only, or with
    `rows_only` (a block that appends no event and locks its rows itself, e.g. `FOR UPDATE SKIP LOCKED`) none.
    """
    return conn.write_tx(wait=wait, lock=lock, rows_only=rows_only)


def close_quietly(conn: Connection) -> None:
    """Close `conn`; a database error while closing is ignored (the connection is given up either way)."""
    try:
        conn.close()
    except LedgerError:
        pass
