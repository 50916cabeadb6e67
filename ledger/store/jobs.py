"""The SQL that reads jobs: one by its key or its remote handle, pages of a group (a typed filter translated to SQL),
the held ones, counts per state and operation, and the stale writes the epoch check refused (ledger.queries,
ledger.receiver, ledger.candidates, ledger.triage, ledger.remote_health, ledger.export, the console).

The same SQL on both backends; each read is served by an index (the primary key, `jobs_state_held`, the state
indexes, the handle index), none loads the whole table. Only reads; each raises the ledger's own errors only
(LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import json
from typing import Any

from ledger.model import GROUPS, STATES, Job, JobFilter, JobKey
from ledger.store import Connection, stages


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


def find_job(conn: Connection, key: JobKey) -> Job | None:
    """The job, every field; None when the ledger has no such job."""
    row = conn.execute("SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)).fetchone()
    return Job.from_row(row) if row else None


def operations_of(conn: Connection, job_id: str) -> list[str]:
    """The operations a job id exists under, sorted ([] when none; a primary-key prefix lookup)."""
    return [r[0] for r in conn.execute("SELECT operation FROM jobs WHERE job_id = ? ORDER BY operation", (job_id,))]


# -- the typed filter, as SQL ------------------------------------------------------------------------------------------
def _like(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def filter_clause(flt: JobFilter, table: str = "") -> tuple[list[str], list[Any]]:
    """The SQL conditions (to be ANDed) and their parameters that select the jobs `flt` matches; column names
    are prefixed with `table` + '.' when given (for a subquery). The one translation of the typed filter."""
    col = (lambda c: f"{table}.{c}") if table else (lambda c: c)
    where: list[str] = []
    params: list[Any] = []
    if flt.text:
        where.append("(" + " OR ".join(f"{col(c)} LIKE ? ESCAPE '\\'" for c in
                                       ("job_id", "operation", "target", "held_reason", "last_error")) + ")")
        params += [f"%{_like(flt.text)}%"] * 5
    if flt.reason:
        where.append(f"({col('held_reason')} LIKE ? ESCAPE '\\' OR {col('last_error')} LIKE ? ESCAPE '\\')")
        pat = f"%{_like(flt.reason)}%"
        params += [pat, pat]
    if flt.owner:
        where.append(f"{col('owner')} = ?")
        params.append(flt.owner)
    if flt.operation:
        where.append(f"{col('operation')} LIKE ? ESCAPE '\\'")
        params.append(_like(flt.operation))
    if flt.target:
        where.append(f"{col('target')} LIKE ? ESCAPE '\\'")
        params.append(_like(flt.target))
    if flt.stage:
        more, more_params = stages.stage_clause(flt.stage, table or "jobs", flt.me, flt.four_eyes)
        where += more
        params += more_params
    return where, params


def list_jobs(
    conn: Connection,
    group: str,
    *,
    limit: int = 100,
    offset: int = 0,
    oldest_first: bool = True,
    flt: JobFilter | None = None,
) -> list[Job]:
    """One page of a console group's jobs (`ledger.model.GROUPS`), by age (creation, then key: one order on both
    backends, so a page never repeats or skips one); filtered by `flt`. Never reads more than `limit` rows out.
    Raises KeyError for a group that is not one."""
    states = GROUPS[group]
    where = [f"state IN ({','.join('?' * len(states))})"]
    params: list[Any] = list(states)
    if flt is not None:
        more, more_params = filter_clause(flt)
        where += more
        params += more_params
    order = "ASC" if oldest_first else "DESC"
    # Jobs created at one instant keep one order on both backends (PostgreSQL has no rowid: its order among
    # equals moves when a row changes state), so a page never repeats or skips one.
    sql = (f"SELECT * FROM jobs WHERE {' AND '.join(where)} "
           f"ORDER BY created_at {order}, job_id {order}, operation {order} LIMIT ? OFFSET ?")
    return [Job.from_row(r) for r in conn.execute(sql, (*params, limit, offset))]


def held_jobs(conn: Connection, limit: int = 50) -> list[Job]:
    """At most `limit` held jobs, oldest hold first (then creation, then key)."""
    rows = conn.execute("SELECT * FROM jobs WHERE state = 'held' ORDER BY held_at, created_at, job_id, operation "
                        "LIMIT ?", (limit,))
    return [Job.from_row(r) for r in rows]


# -- counts -----------------------------------------------------------------------------------------------------------
def state_counts(conn: Connection) -> dict[str, int]:
    """Jobs per state (every state present, zero when empty), from the trigger-kept counter table."""
    counts = dict.fromkeys(STATES, 0)
    for state, n in conn.execute("SELECT state, n FROM state_counts"):
        if state in counts:
            counts[state] = int(n)
    return counts


def held_by_operation(conn: Connection) -> dict[str, int]:
    """Held jobs per operation (only operations with one)."""
    return dict(conn.execute("SELECT operation, COUNT(*) FROM jobs WHERE state = 'held' GROUP BY operation").fetchall())


def operation_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """Jobs per operation and state (only the pairs with a job)."""
    out: dict[str, dict[str, int]] = {}
    for op, state, n in conn.execute("SELECT operation, state, COUNT(*) FROM jobs GROUP BY operation, state"):
        out.setdefault(op, {})[state] = n
    return out


# -- stale writes the epoch check refused (fenced_writes) -------------------------------------------------------------
def fenced_write_count(conn: Connection) -> int:
    """How many stale writes were refused by the epoch check (0 when none)."""
    return int(conn.execute("SELECT COUNT(*) FROM fenced_writes").fetchone()[0])


def fenced_writes_for(conn: Connection, key: JobKey) -> list[dict[str, Any]]:
    """What stale workers tried to write to this job (kept as clues for a person), oldest first: each a dict of the
    stored columns with `detail` parsed; [] when none."""
    rows = conn.execute(
        "SELECT * FROM fenced_writes WHERE job_id = ? AND operation = ? ORDER BY id", (key.job_id, key.operation)
    )
    return [{**dict(r), "detail": json.loads(r["detail"])} for r in rows]
