"""The SQL behind a few named reads of the append-only `events` table (ledger.candidates, ledger.evidence).

The same SQL on both backends; each job's reads are served by `events_job_kind (job_id, operation, kind, id)`.
Only reads; each raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import json
from typing import Any

from ledger.model import JobKey
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
