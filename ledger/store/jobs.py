"""The SQL of the jobs table: a new job's row and a step's update (ledger.transitions' `apply()`, the only writer),
the stale writes the epoch check refused; and the reads: one job by its key or its remote handle, the first held job
on a target, pages of a group (a typed filter translated to SQL), the held ones, counts per state and operation, every
job's state, epoch and attempt (ledger.queries, ledger.reservation, ledger.leases, ledger.replay, ledger.receiver,
ledger.candidates, ledger.triage, ledger.remote_health, ledger.export, the console).

The same SQL on both backends; each read but `projections` is served by an index (the primary key,
`jobs_state_held`, `jobs_held_target`, the state indexes, the handle index), none else loads the whole table. Each
raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from ledger import seal, store
from ledger.model import GROUPS, STATES, Job, JobFilter, JobKey, detail_json
from ledger.store import Connection, stages

HELD_ON_TARGET = (
    "SELECT job_id, operation FROM jobs WHERE target = ? AND state = 'held' ORDER BY held_at, job_id, operation LIMIT 1"
)
"""The first held job on a target, the one a new reservation there is blocked by (index jobs_held_target)."""


# -- writes: apply()'s, inside its transaction ------------------------------------------------------------------------
def insert(conn: Connection, columns: Mapping[str, Any]) -> bool:
    """Insert a new job with `columns` (column name -> stored value, JSON columns already encoded) over the table's
    defaults, inside the caller's write transaction. Returns False, writing nothing, when the job exists."""
    return conn.execute(_insert_sql(tuple(columns)), list(columns.values())).rowcount == 1


@functools.lru_cache(maxsize=64)
def _insert_sql(columns: tuple[str, ...]) -> str:
    """The INSERT of a new job setting `columns`, doing nothing when the job exists."""
    return (
        f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
        "ON CONFLICT (job_id, operation) DO NOTHING"
    )


def update(
    conn: Connection,
    key: JobKey,
    *,
    state: str,
    now: float,
    changes: Mapping[str, Any],
    bump_epoch: bool,
    bump_attempt: bool,
    expected_state: str,
    expected_epoch: int | None,
) -> Job | None:
    """Move the job from `expected_state` (and `expected_epoch`, when given) to `state` at `now`, setting `changes`
    (column name -> stored value, JSON columns already encoded) and bumping the epoch and attempt as told, inside the
    caller's write transaction; one statement. Returns the job as the update left it, or None (nothing written) when
    no such job is in that state and epoch."""
    sets = ["state = ?", "updated_at = ?"]
    params: list[Any] = [state, now]
    for column, value in changes.items():
        sets.append(f"{column} = ?")
        params.append(value)
    if bump_epoch:
        sets.append("epoch = epoch + 1")
    if bump_attempt:
        sets.append("attempt = attempt + 1")
    where = "job_id = ? AND operation = ? AND state = ?"
    params += [key.job_id, key.operation, expected_state]
    if expected_epoch is not None:
        where += " AND epoch = ?"
        params.append(expected_epoch)
    row = conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE {where} RETURNING *", params).fetchone()
    return Job.from_row(row) if row is not None else None


def record_fenced_write(
    conn: Connection, key: JobKey, *, at: float, actor: str, event: str, epoch: int | None, detail: dict[str, Any]
) -> int:
    """Append a write the epoch check refused (what `actor` tried to say with `event` at stale `epoch`) to the chain
    of fenced writes, inside the caller's write transaction; return its id. On PostgreSQL the chain's lock is taken
    first (one chain, extended by one transaction at a time)."""
    store.lock_chain(conn)
    prev = conn.execute("SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1").fetchone()
    values = [at, key.job_id, key.operation, actor, event, epoch, detail_json(detail)]
    digest = seal.side_hash(prev[0] if prev else None, values)
    return int(conn.execute(
        "INSERT INTO fenced_writes (at, job_id, operation, actor, event, epoch, detail, prev_hash, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (*values, prev[0] if prev else None, digest),
    ).fetchone()[0])


# -- reads ------------------------------------------------------------------------------------------------------------
def idem_key_of(conn: Connection, key: JobKey) -> str | None:
    """The job's idempotency key; None when the ledger has no such job."""
    row = conn.execute(
        "SELECT idem_key FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
    ).fetchone()
    return str(row[0]) if row is not None else None


def held_on_target(conn: Connection, target: str) -> JobKey | None:
    """The first held job on `target` (oldest hold, then key): the one a new reservation there is blocked by; None
    when no job on it is held."""
    row = conn.execute(HELD_ON_TARGET, (target,)).fetchone()
    return JobKey(row[0], row[1]) if row is not None else None


def projections(conn: Connection) -> dict[JobKey, tuple[str, int, int]]:
    """Every job's (state, epoch, attempt), by key (the whole table: for replay's check)."""
    return {
        JobKey(r[0], r[1]): (str(r[2]), int(r[3]), int(r[4]))
        for r in conn.execute("SELECT job_id, operation, state, epoch, attempt FROM jobs")
    }


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


def find_by_idem_key(conn: Connection, idem_key: str) -> Job | None:
    """The job holding `idem_key` (one at most: the key is unique), or None."""
    row = conn.execute("SELECT * FROM jobs WHERE idem_key = ? LIMIT 1", (idem_key,)).fetchone()
    return Job.from_row(row) if row is not None else None


def submitted_with_handle(conn: Connection, after: tuple[float, str, str], limit: int) -> list[Job]:
    """Submitted jobs with a handle (the ones a poll can ask about), after the keyset `after` (created_at, job_id,
    operation), oldest first, at most `limit`: one page of a pass's polls."""
    rows = conn.execute(
        "SELECT * FROM jobs WHERE state = 'submitted' AND handle IS NOT NULL "
        "AND (created_at, job_id, operation) > (?, ?, ?) ORDER BY created_at, job_id, operation LIMIT ?",
        (*after, limit),
    ).fetchall()
    return [Job.from_row(r) for r in rows]


def count_submitted(conn: Connection) -> int:
    """How many jobs are submitted (a pass's polls to come, for its progress)."""
    return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'submitted'").fetchone()[0])


def done_jobs(conn: Connection) -> list[Job]:
    """Every job in state done (its result waits to be delivered), oldest update first."""
    rows = conn.execute("SELECT * FROM jobs WHERE state = 'done' ORDER BY updated_at, job_id, operation").fetchall()
    return [Job.from_row(r) for r in rows]


def stale_sends(conn: Connection, *, started_before: float, lease_before: float) -> list[JobKey]:
    """Reserving jobs whose send started at or before `started_before` and whose lease (if any) ended at or before
    `lease_before`: sends whose outcome nobody recorded, oldest first."""
    rows = conn.execute(
        "SELECT job_id, operation FROM jobs WHERE state = 'reserving' AND send_started_at IS NOT NULL "
        "AND send_started_at <= ? AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, job_id, operation",
        (started_before, lease_before),
    ).fetchall()
    return [JobKey(r[0], r[1]) for r in rows]


def count_due(conn: Connection, now: float) -> int:
    """How many reserving jobs no send has started and whose next try is due at `now` (a pass's sends to come)."""
    return int(conn.execute(
        "SELECT COUNT(*) FROM jobs WHERE state = 'reserving' AND send_started_at IS NULL "
        "AND (next_try_at IS NULL OR next_try_at <= ?)", (now,),
    ).fetchone()[0])

