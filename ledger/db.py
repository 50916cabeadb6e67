"""Opening a ledger and writing to it, whichever backend it lives on.

A path is a SQLite file (`ledger.store.sqlite`); a `postgresql://` URL is a PostgreSQL database
(`ledger.store.postgres`). Both give the connection interface the rules are written against (see
`ledger.store`); this module only chooses. `ledger_error` and `ledger_path` are the SQLite backend's,
re-exported for the modules that use them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import cast

from ledger import store
from ledger.store import sqlite as sqlite_store
from ledger.store.sqlite import ledger_error as ledger_error
from ledger.store.sqlite import ledger_path as ledger_path


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
    else:
        created = sqlite_store.create_ledger(path)
    journal.reserve_space(path)
    return created


def connect(
    path: str | Path,
    *,
    readonly: bool = False,
    synchronous: str = "FULL",
    check_same_thread: bool = True,
) -> sqlite3.Connection:
    """Open an existing ledger (migrated forward unless read-only), in autocommit mode, rows readable by
    index and by name. Raises LedgerUnusable with one line when it is missing, not a ledger or too new;
    nothing is created or written then. `synchronous` and `check_same_thread` apply to SQLite only."""
    if store.is_url(path):
        from ledger.store import postgres

        return cast(sqlite3.Connection, postgres.connect(str(path), readonly=readonly))
    return sqlite_store.connect(path, readonly=readonly, synchronous=synchronous, check_same_thread=check_same_thread)


def write_tx(
    conn: sqlite3.Connection, *, wait: float | None = None, lock: str | None = None, rows_only: bool = False
) -> AbstractContextManager[sqlite3.Connection]:
    """Run the block in one write transaction; commit on success, roll back on any error.

    A lock held past the busy timeout (or `wait` seconds, when given) raises LedgerLocked (exit 8) on both
    backends. SQLite: BEGIN IMMEDIATE, tried in short steps. PostgreSQL: READ COMMITTED under an
    advisory lock, the audit chain's, or with `lock` (an operation name) that operation's only, or with
    `rows_only` (a block that appends no event and locks its rows itself, e.g. `FOR UPDATE SKIP LOCKED`) none.
    """
    if store.is_pg(conn):
        from ledger.store.postgres import CHAIN_LOCK, operation_lock

        return cast(
            AbstractContextManager[sqlite3.Connection],
            conn.write(None if rows_only else CHAIN_LOCK if lock is None else operation_lock(lock), wait),
        )
    return sqlite_store.write_tx(conn, wait=wait)  # the backend's own context, not wrapped in another


Connection = sqlite3.Connection
"""A ledger connection, as `connect` returns it (on PostgreSQL a connection giving the same interface)."""


@contextmanager
def database_errors(ledger: str | Path) -> Iterator[None]:
    """Run the block; a database error met in it is raised as the ledger's own, named after `ledger`:
    LedgerLocked (exit 8), LedgerCorrupt or LedgerUnusable (exit 7). Other errors pass through as they are."""
    try:
        yield
    except sqlite3.Error as e:
        raise ledger_error(e, ledger) from None


def close_quietly(conn: sqlite3.Connection) -> None:
    """Close `conn`; a database error while closing is ignored (the connection is given up either way)."""
    try:
        conn.close()
    except sqlite3.Error:
        pass
