"""Opening a ledger and writing to it, whichever backend it lives on.

A path is a SQLite file (`ledger.store.sqlite`); a `postgresql://` URL is a PostgreSQL database
(`ledger.store.postgres`). Both give the connection interface the rules are written against (see
`ledger.store`); this module only chooses. The SQLite names other modules and tests use (the schema's
migrations, the busy timeout, the application id) are re-exported from the SQLite backend.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import cast

from ledger import store
from ledger.store import sqlite as sqlite_store
from ledger.store.sqlite import (
    _V8_TRIGGERS as _V8_TRIGGERS,
)
from ledger.store.sqlite import (
    APPLICATION_ID as APPLICATION_ID,
)
from ledger.store.sqlite import (
    BUSY_TIMEOUT_MS as BUSY_TIMEOUT_MS,
)
from ledger.store.sqlite import (
    MIGRATIONS as MIGRATIONS,
)
from ledger.store.sqlite import (
    SCHEMA_VERSION as SCHEMA_VERSION,
)
from ledger.store.sqlite import (
    _chain_existing as _chain_existing,
)
from ledger.store.sqlite import (
    _statements as _statements,
)
from ledger.store.sqlite import (
    ledger_error as ledger_error,
)
from ledger.store.sqlite import (
    ledger_path as ledger_path,
)


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
    backends. SQLite: BEGIN IMMEDIATE behind the writers' queue. PostgreSQL: READ COMMITTED under an
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
