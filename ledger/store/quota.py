"""The SQL of the daily quota counters (ledger.reservation, ledger.triage, ledger.queries): the table `quota_usage`,
one row per operation and day with a reservation.

Each backend's SQL is its own (`ledger/store/sql/BACKEND/quota.sql`, run by name), served by the table's primary key
(operation, day). Raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

from ledger.store import Connection


def usage(conn: Connection, operation: str, first_day: str, last_day: str) -> dict[str, int]:
    """How many reservations `operation` used on each day from `first_day` to `last_day` (YYYY-MM-DD, both
    included), by day; a day with none is absent."""
    rows = conn.run("quota.usage", (operation, first_day, last_day)).fetchall()
    return {str(day): int(used) for day, used in rows}


def used(conn: Connection, operation: str, day: str) -> int:
    """How many reservations were counted against `operation`'s quota on `day` (YYYY-MM-DD); 0 when none."""
    row = conn.run("quota.used", (operation, day)).fetchone()
    return int(row[0]) if row else 0


def count(conn: Connection, operation: str, day: str) -> None:
    """Count one reservation of `operation` against `day`'s quota, inside the caller's write transaction."""
    conn.run("quota.count", (operation, day))
