"""Reads of a ledger that only tests need (the product never calls them): a fresh connection (what another process
would read), a digest of every row, to prove a refused command changed nothing, and the picks table as rows."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger.db import connect
from ledger.model import JobKey
from ledger.store import Connection


@contextmanager
def fresh(ledger: Path) -> Iterator[Connection]:
    """A new connection to the ledger (a path or a URL), closed after the block: what another process would read."""
    c = connect(ledger)
    try:
        yield c
    finally:
        c.close()


FINGERPRINT_TABLES = (
    "jobs", "events", "quota_usage", "fenced_writes", "outbox", "job_counts", "event_tallies", "evidence", "evidence_handled",
    "webhook_deliveries", "remote_pauses",
)
"""Every ledger table but the worker heartbeats: they say which processes ran, and a pass that stops on an
error still records that it ran and why it stopped."""


def job_fingerprint(conn: sqlite3.Connection) -> str:
    """A digest of every row in FINGERPRINT_TABLES: compared before and after a refused command."""
    h = hashlib.sha256()
    for table in FINGERPRINT_TABLES:
        for text in sorted(repr(tuple(row)) for row in conn.execute(f"SELECT * FROM {table}")):
            h.update(text.encode())
    return h.hexdigest()


def held_picks(conn: sqlite3.Connection, owner: str | None = None) -> list[tuple[JobKey, str, float]]:
    """The picks in the ledger (of `owner` only, when given): (job key, worker, picked_until), by key."""
    where, args = ("WHERE worker = ? ", (owner,)) if owner is not None else ("", ())
    rows = QmarkSql(conn).execute(
        f"SELECT job_id, operation, worker, picked_until FROM picks {where}ORDER BY job_id, operation", args
    ).fetchall()
    return [(JobKey(r[0], r[1]), str(r[2]), float(r[3])) for r in rows]


class QmarkSql:
    """A ledger connection that takes the tests' own hand-written SQL with `?` placeholders on either backend (a
    tampering edit, a read no store operation makes). Only for tests: the product's statements are each backend's
    own (ledger.store.queries). Every other attribute is the connection's."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run `sql`, its `?` written as the backend's placeholder (and a literal % doubled where it must be)."""
        if getattr(self.conn, "PARAM", "?") != "?" and "?" in sql:
            sql = sql.replace("%", "%%").replace("?", self.conn.PARAM)
        return self.conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)
