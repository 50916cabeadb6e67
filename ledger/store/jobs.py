"""The SQL that reads a job by its remote handle, or its state by its key (ledger.receiver, ledger.candidates,
ledger.triage, ledger.remote_health).

The same SQL on both backends. Only reads; each raises the ledger's own errors only (LedgerUnavailable,
LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

from ledger.model import Job, JobKey
from ledger.store import Connection


def handle_owner(conn: Connection, handle: str) -> JobKey | None:
    """The key of the job the remote handle `handle` is attached to; None when no job has it."""
    row = conn.execute("SELECT job_id, operation FROM jobs WHERE handle = ? LIMIT 1", (handle,)).fetchone()
    return JobKey(row[0], row[1]) if row else None


def job_with_handle(conn: Connection, handle: str) -> Job | None:
    """The job the remote handle `handle` is attached to, every field; None when no job has it."""
    row = conn.execute("SELECT * FROM jobs WHERE handle = ? LIMIT 1", (handle,)).fetchone()
    return Job.from_row(row) if row is not None else None


def state_of(conn: Connection, key: JobKey) -> str | None:
    """The job's state; None when the ledger has no such job."""
    row = conn.execute(
        "SELECT state FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
    ).fetchone()
    return str(row[0]) if row is not None else None


def state_and_epoch(conn: Connection, key: JobKey) -> tuple[str, int] | None:
    """The job's state and epoch; None when the ledger has no such job."""
    row = conn.execute(
        "SELECT state, epoch FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
    ).fetchone()
    return (str(row[0]), int(row[1])) if row is not None else None
