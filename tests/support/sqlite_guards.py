"""The append-only triggers of a SQLite ledger, put back after a test edited around them (as an attacker who dropped
them to edit the events would, to hide it)."""

from __future__ import annotations

import sqlite3

from ledger.store.sqlite import _V7, _V8_TRIGGERS, _V12, _statements


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
