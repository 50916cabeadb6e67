"""The named read queries behind `reclaim remotes` (ledger.remote_answers): when each remote last answered.

The statements are each backend's own (`ledger/store/sql/BACKEND/remotes.sql`, run by name: evidence's JSON detail
is read the backend's way). Only reads.
"""

from __future__ import annotations

from ledger.store import Connection


def last_verified_webhooks(conn: Connection) -> dict[str, float]:
    """Per remote, when its newest verified webhook delivery that became evidence was received."""
    rows = conn.run("remotes.last_verified_webhooks").fetchall()
    return {str(r[0]): float(r[1]) for r in rows}


def last_evidence(conn: Connection) -> dict[str, tuple[float, str]]:
    """Per operation, when the remote last said something about one of its jobs (a query's answer, a webhook, a
    fenced outcome) and which source it was."""
    rows = conn.run("remotes.last_evidence").fetchall()
    return {str(r[0]): (float(r[1]), str(r[2])) for r in rows}
