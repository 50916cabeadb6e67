"""Damage to the ledger file itself: recognising SQLite's corruption errors, and a bounded page check.

SQLite reports a damaged page only when a statement reads it, as `sqlite3.DatabaseError` ("database disk
image is malformed"), not as the OperationalError a lock or a full disk gives. Every command that meets
one says the same thing (exit 7): the file is corrupt, restore it from a backup, `reclaim verify` says
more. Commands that read only a few pages (status, events, the console) first run SQLite's quick check
for a bounded time, so a corrupt file does not look healthy to them; `reclaim verify` checks every page.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ledger.errors import LedgerCorrupt

_SQLITE_CORRUPT = 11  # SQLite's primary result code for a damaged page or schema


def is_corruption(e: BaseException) -> bool:
    """True when a sqlite3 error says the file's pages or schema are damaged."""
    if not isinstance(e, sqlite3.DatabaseError):
        return False
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_CORRUPT:
        return True
    text = str(e)
    return "malformed" in text or "corrupt" in text


def corrupt_error(path: str | Path, what: object) -> LedgerCorrupt:
    """The one-line refusal for a corrupt ledger, carrying SQLite's own words."""
    return LedgerCorrupt(
        f"ledger {path}: the ledger file is corrupt ({what}); restore it from a backup; 'reclaim verify' says more",
        damage=str(what),
    )


def _file_of(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2])


def check_pages(conn: sqlite3.Connection, budget_seconds: float) -> bool:
    """Run SQLite's quick check of every page for at most `budget_seconds`.

    Returns True when every page was checked and none is damaged, False when the time ran out first
    (a large ledger; `reclaim verify` checks it all). Raises LedgerCorrupt naming the first damage found.
    """
    path = _file_of(conn)
    deadline = time.monotonic() + budget_seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.OperationalError as e:
        if "interrupted" in str(e):
            return False
        raise
    except sqlite3.DatabaseError as e:
        if is_corruption(e):
            raise corrupt_error(path, e) from None
        raise
    finally:
        conn.set_progress_handler(None, 0)
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    if problems:
        raise corrupt_error(path, problems[0][:200])
    return True
