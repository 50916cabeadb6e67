"""The SQL that reads the daily quota counters (ledger.queries): the table `quota_usage`, one row per operation and
day with a reservation.

The same SQL on both backends, served by the table's primary key (operation, day). Only reads; raises the ledger's
own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt). The counters are written by the reservation itself.
"""

from __future__ import annotations

from ledger.store import Connection


def usage(conn: Connection, operation: str, first_day: str, last_day: str) -> dict[str, int]:
    """How many reservations `operation` used on each day from `first_day` to `last_day` (YYYY-MM-DD, both
    included), by day; a day with none is absent."""
    rows = conn.execute(
        "SELECT day, used FROM quota_usage WHERE operation = ? AND day >= ? AND day <= ?",
        (operation, first_day, last_day),
    ).fetchall()
    return {str(day): int(used) for day, used in rows}
