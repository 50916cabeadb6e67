"""Editing a ledger around reclaim, as an attacker who can write the database would: a raw connection to it, and
the append-only triggers of a SQLite ledger put back after the edit (to hide it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ledger_reads import QmarkSql

from ledger.db import connect
from ledger.store.sqlite import _V7, _V8_TRIGGERS, _V12, SqliteConnection, _statements


def is_pg(ledger: Path | str) -> bool:
    """Whether `ledger` names a PostgreSQL database."""
    return str(ledger).startswith("postgresql://")


def raw(ledger: Path | str) -> Any:
    """A connection that runs any SQL on the ledger: PostgreSQL through the ledger's own connection (`?` marks,
    autocommit), SQLite through sqlite3's connect, none of ledger.db's checks (an edited file must still open)."""
    if is_pg(ledger):
        return QmarkSql(connect(ledger))
    return sqlite3.connect(ledger, isolation_level=None, factory=SqliteConnection)


def restore_guards(conn: sqlite3.Connection) -> None:
    """Recreate every append-only trigger of the events, evidence, fenced writes and deliveries that is missing."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    creates = [s for script in (_V7, _V8_TRIGGERS, _V12) for s in _statements(script)
               if s.upper().startswith("CREATE TRIGGER")]
    creates.append("CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
                   "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;")
    for stmt in creates:
        if stmt.split()[2] not in present:
            conn.execute(stmt)
