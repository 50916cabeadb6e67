"""The SQL behind the ledger's own policy (ledger.policy): its `policy_set` events, and who owns the ledger (which each backend answers its own way, `Connection.ledger_owner`).

The statements are each backend's own (`ledger/store/sql/BACKEND/policy.sql`, run by name).
"""

from __future__ import annotations

from typing import Any

from ledger.store import Connection

POLICY_JOB = ("(ledger)", "(policy)")
"""The (job_id, operation) policy events are recorded under: no job row, a sequence of its own."""


def owner(conn: Connection) -> tuple[str, bool]:
    """(who owns the ledger, whether this process is that owner or a superuser): on SQLite the file's OS
    account (root counts as the owner), on PostgreSQL the role that owns the events table (a superuser counts)."""
    return conn.ledger_owner()


def every(conn: Connection) -> list[Any]:
    """Every `policy_set` event's (id, detail, hash, proof), oldest first ([] when the ledger has no policy)."""
    return conn.run("policy.every", POLICY_JOB).fetchall()
