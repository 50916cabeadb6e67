"""The SQL behind the named reads of the append-only `events` table (ledger.candidates, ledger.evidence,
ledger.queries, ledger.follow, ledger.export, ledger.audit, the console): a job's history, the events after a
cursor, the newest, the chain's head.

The same SQL on both backends; each job's reads are served by `events_job_kind (job_id, operation, kind, id)` or
the per-job sequence, the cursor reads by the primary key. Only reads; each raises the ledger's own errors only
(LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import json
from typing import Any

from ledger.model import Event, JobKey
from ledger.store import Connection


def last_send_started(conn: Connection, key: JobKey) -> float | None:
    """When the job's newest `send_started` event was written; None when it never started a send."""
    row = conn.execute(
        "SELECT MAX(at) FROM events WHERE job_id = ? AND operation = ? AND kind = 'send_started'",
        (key.job_id, key.operation),
    ).fetchone()
    return float(row[0]) if row is not None and row[0] is not None else None


def of_kind(conn: Connection, key: JobKey, kind: str) -> list[tuple[str, float, dict[str, Any]]]:
    """(actor, at, detail) of each of the job's events of `kind`, oldest first; [] when none."""
    rows = conn.execute(
        "SELECT actor, at, detail FROM events WHERE job_id = ? AND operation = ? AND kind = ? ORDER BY id",
        (key.job_id, key.operation, kind),
    ).fetchall()
    return [(str(actor), float(at), json.loads(detail)) for actor, at, detail in rows]


def duplicate_count(conn: Connection) -> int:
    """How many second remote interactions for one idem key were detected (`duplicate_send` events), 0 when none."""
    return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'duplicate_send'").fetchone()[0])


def hash_of(conn: Connection, event_id: int) -> str | None:
    """The audit-chain hash of the event `event_id`; None when there is no such event."""
    row = conn.execute("SELECT hash FROM events WHERE id = ?", (event_id,)).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else None


def job_events(conn: Connection, key: JobKey) -> list[Event]:
    """A job's whole history, in its order (by its sequence number); [] when it has none."""
    rows = conn.execute(
        "SELECT * FROM events WHERE job_id = ? AND operation = ? ORDER BY seq", (key.job_id, key.operation)
    )
    return [Event.from_row(r) for r in rows]


def events_after(conn: Connection, after_id: int, limit: int = 200) -> list[Event]:
    """At most `limit` events with id > `after_id`, oldest first: the follow cursor."""
    rows = conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
    return [Event.from_row(r) for r in rows]


def latest_events(conn: Connection, limit: int = 20) -> list[Event]:
    """The `limit` newest events, newest first."""
    rows = conn.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,))
    return [Event.from_row(r) for r in rows]


def last_event_id(conn: Connection) -> int:
    """The id of the newest event, or 0 on an empty ledger."""
    row = conn.execute("SELECT MAX(id) FROM events").fetchone()
    return int(row[0] or 0)


def head(conn: Connection) -> tuple[int, str | None]:
    """(number of events, the newest event's hash; None on an empty ledger): the audit chain's anchor to keep outside
    the ledger. Read both inside one snapshot (`read_snapshot`) for the two to agree while others write."""
    row = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
    count = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return int(count), (row[1] if row else None)
