"""The SQL behind the ledger's own policy (ledger.policy): its newest `policy_set` event, and who owns the ledger.

The statements are each backend's own (`ledger/store/sql/BACKEND/policy.sql`, run by name).
"""

from __future__ import annotations

import os
from typing import Any

from ledger import store
from ledger.store import Connection

POLICY_JOB = ("(ledger)", "(policy)")
"""The (job_id, operation) policy events are recorded under: no job row, a sequence of its own."""


def latest(conn: Connection) -> Any | None:
    """The newest `policy_set` event's (id, detail, hash, mac), or None when the ledger has no policy yet."""
    return conn.run("policy.latest", POLICY_JOB).fetchone()


def owner(conn: Connection, path: str) -> tuple[str, bool]:
    """(who owns the ledger, whether this process is that owner or a superuser): on SQLite the file's OS
    account (root counts as the owner), on PostgreSQL the role that owns the events table (a superuser counts)."""
    if store.is_pg(conn):
        row = conn.run("policy.owner").fetchone()
        if row is None:
            return "(unknown)", False
        return str(row[0]), bool(row[1])
    import pwd

    uid = os.stat(path).st_uid
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"uid {uid}"
    return name, os.geteuid() in (0, uid)
