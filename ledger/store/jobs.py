"""The SQL of the jobs table: a new job's row and a step's update (ledger.transitions' `apply()`, the only writer),
the stale writes the epoch check refused; and the reads: one job by its key or its remote handle, the first held job
on a target, pages of a group (a typed filter translated to SQL), the held ones, counts per state and operation, every
job's state, epoch and attempt (ledger.queries, ledger.reservation, ledger.leases, ledger.replay, ledger.receiver,
ledger.candidates, ledger.triage, ledger.remote_health, ledger.export, the console).

The fixed statements are each backend's own (`ledger/store/sql/BACKEND/jobs.sql`, run by name); the ones whose
shape follows their input (a new row's columns, a step's changes, a page's filter) are composed here from what the
connection declares (`PARAM`, `LIKE`). Each read but `projections` is served by an index (the primary key,
`jobs_state_held`, `jobs_held_target`, the state indexes, the handle index), none else loads the whole table. Each
raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from ledger import seal, store
from ledger.model import GROUPS, SORTS, STATES, Job, JobFilter, JobKey, detail_json
from ledger.store import Connection, stages


# -- writes: apply()'s, inside its transaction ------------------------------------------------------------------------
def insert(conn: Connection, columns: Mapping[str, Any]) -> bool:
    """Insert a new job with `columns` (column name -> stored value, JSON columns already encoded) over the table's
    defaults, inside the caller's write transaction. Returns False, writing nothing, when the job exists."""
    return conn.execute(_insert_sql(tuple(columns), conn.PARAM), list(columns.values())).rowcount == 1


@functools.lru_cache(maxsize=64)
def _insert_sql(columns: tuple[str, ...], param: str) -> str:
    """The INSERT of a new job setting `columns`, doing nothing when the job exists."""
    return (
        f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join(param for _ in columns)}) "
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
    p = conn.PARAM
    sets = [f"state = {p}", f"updated_at = {p}"]
    params: list[Any] = [state, now]
    for column, value in changes.items():
        sets.append(f"{column} = {p}")
        params.append(value)
    if bump_epoch:
        sets.append("epoch = epoch + 1")
    if bump_attempt:
        sets.append("attempt = attempt + 1")
    where = f"job_id = {p} AND operation = {p} AND state = {p}"
    params += [key.job_id, key.operation, expected_state]
    if expected_epoch is not None:
        where += f" AND epoch = {p}"
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
    prev = conn.run("jobs.last_fenced_write_hash").fetchone()
    values = [at, key.job_id, key.operation, actor, event, epoch, detail_json(detail)]
    digest = seal.side_hash(prev[0] if prev else None, values)
    return int(conn.run("jobs.insert_fenced_write", (*values, prev[0] if prev else None, digest)).fetchone()[0])


# -- reads ------------------------------------------------------------------------------------------------------------
def idem_key_of(conn: Connection, key: JobKey) -> str | None:
    """The job's idempotency key; None when the ledger has no such job."""
    row = conn.run("jobs.idem_key_of", (key.job_id, key.operation)).fetchone()
    return str(row[0]) if row is not None else None


def held_on_target(conn: Connection, target: str) -> JobKey | None:
    """The first held job on `target` (oldest hold, then key): the one a new reservation there is blocked by; None
    when no job on it is held."""
    row = conn.run("jobs.held_on_target", (target,)).fetchone()
    return JobKey(row[0], row[1]) if row is not None else None


def projections(conn: Connection) -> dict[JobKey, tuple[str, int, int]]:
    """Every job's (state, epoch, attempt), by key (the whole table: for replay's check)."""
    return {
        JobKey(r[0], r[1]): (str(r[2]), int(r[3]), int(r[4]))
        for r in conn.run("jobs.projections")
    }


def handle_owner(conn: Connection, handle: str) -> JobKey | None:
    """The key of the job the remote handle `handle` is attached to; None when no job has it."""
    row = conn.run("jobs.handle_owner", (handle,)).fetchone()
    return JobKey(row[0], row[1]) if row else None


def job_with_handle(conn: Connection, handle: str) -> Job | None:
    """The job the remote handle `handle` is attached to, every field; None when no job has it."""
    row = conn.run("jobs.job_with_handle", (handle,)).fetchone()
    return Job.from_row(row) if row is not None else None


def state_of(conn: Connection, key: JobKey) -> str | None:
    """The job's state; None when the ledger has no such job."""
    row = conn.run("jobs.state_of", (key.job_id, key.operation)).fetchone()
    return str(row[0]) if row is not None else None


def state_and_epoch(conn: Connection, key: JobKey) -> tuple[str, int] | None:
    """The job's state and epoch; None when the ledger has no such job."""
    row = conn.run("jobs.state_and_epoch", (key.job_id, key.operation)).fetchone()
    return (str(row[0]), int(row[1])) if row is not None else None


def find_job(conn: Connection, key: JobKey) -> Job | None:
    """The job, every field; None when the ledger has no such job."""
    row = conn.run("jobs.find_job", (key.job_id, key.operation)).fetchone()
    return Job.from_row(row) if row else None


def operations_of(conn: Connection, job_id: str) -> list[str]:
    """The operations a job id exists under, sorted ([] when none; a primary-key prefix lookup)."""
    return [r[0] for r in conn.run("jobs.operations_of", (job_id,))]


# -- the typed filter, as SQL ------------------------------------------------------------------------------------------
def _like(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def filter_clause(conn: Connection, flt: JobFilter, table: str = "") -> tuple[list[str], list[Any]]:
    """The SQL conditions (to be ANDed) in `conn`'s backend's SQL, and their parameters, that select the jobs `flt`
    matches; column names are prefixed with `table` + '.' when given (for a subquery). The one translation of the
    typed filter."""
    col = (lambda c: f"{table}.{c}") if table else (lambda c: c)
    p, like = conn.PARAM, conn.LIKE
    where: list[str] = []
    params: list[Any] = []
    if flt.text:
        where.append("(" + " OR ".join(f"{col(c)} {like} {p} ESCAPE '\\'" for c in
                                       ("job_id", "operation", "target", "held_reason", "last_error")) + ")")
        params += [f"%{_like(flt.text)}%"] * 5
    if flt.reason:
        where.append(f"({col('held_reason')} {like} {p} ESCAPE '\\' OR {col('last_error')} {like} {p} ESCAPE '\\')")
        pat = f"%{_like(flt.reason)}%"
        params += [pat, pat]
    if flt.owner:
        where.append(f"{col('owner')} = {p}")
        params.append(flt.owner)
    if flt.operation:
        where.append(f"{col('operation')} {like} {p} ESCAPE '\\'")
        params.append(_like(flt.operation))
    if flt.target:
        where.append(f"{col('target')} {like} {p} ESCAPE '\\'")
        params.append(_like(flt.target))
    if flt.held_since is not None:
        where.append(f"{col('held_at')} >= {p}")
        params.append(flt.held_since)
    if flt.held_until is not None:
        where.append(f"{col('held_at')} < {p}")
        params.append(flt.held_until)
    if flt.stage:
        more, more_params = stages.stage_clause(conn, flt.stage, table or "jobs", flt.me, flt.four_eyes)
        where += more
        params += more_params
    return where, params


def _sort_key(sort: str, text_order: str) -> list[str]:
    """The ORDER BY terms (without direction) of the sort key `sort` (`ledger.model.SORTS`), every text compared by
    its bytes (`text_order`) and a missing value as the empty text, so both backends give one order."""
    if sort not in SORTS:
        raise KeyError(sort)
    column = {
        "age": "created_at",
        "job": f"job_id{text_order}",
        "operation": f"operation{text_order}",
        "state": f"state{text_order}",
        "target": f"COALESCE(target, ''){text_order}",
        "owner": f"COALESCE(owner, ''){text_order}",
        "attempt": "attempt",
        "reason": f"COALESCE(NULLIF(held_reason, ''), NULLIF(last_error, ''), NULLIF(handle, ''), ''){text_order}",
    }[sort]
    return [column]


def list_jobs(
    conn: Connection,
    group: str,
    *,
    limit: int = 100,
    offset: int = 0,
    oldest_first: bool = True,
    flt: JobFilter | None = None,
    sort: str = "age",
) -> list[Job]:
    """One page of a console group's jobs (`ledger.model.GROUPS`), ordered by `sort` (`ledger.model.SORTS`),
    ascending when `oldest_first` (for age: the oldest first; for a text, by its bytes), else descending; ties are
    broken by creation then key in the same direction, one total order on both backends, so paging by offset never
    repeats or skips a job. Filtered by `flt`. Never reads more than `limit` rows out. Only the age order of a small
    group is served by an index (`jobs_state_created`); another key sorts the group's matching rows (a full sort on a
    big group). Raises KeyError for a group or a sort that is not one."""
    states = GROUPS[group]
    terms = [*_sort_key(sort, conn.TEXT_ORDER), "created_at", f"job_id{conn.TEXT_ORDER}",
             f"operation{conn.TEXT_ORDER}"]
    terms = list(dict.fromkeys(terms))  # age's and the id's own term is not repeated as a tie-breaker
    p = conn.PARAM
    where = [f"state IN ({','.join([p] * len(states))})"]
    params: list[Any] = list(states)
    if flt is not None:
        more, more_params = filter_clause(conn, flt)
        where += more
        params += more_params
    order = "ASC" if oldest_first else "DESC"
    # Jobs created at one instant keep one order on both backends (PostgreSQL has no rowid: its order among
    # equals moves when a row changes state), so a page never repeats or skips one.
    sql = (f"SELECT * FROM jobs WHERE {' AND '.join(where)} "
           f"ORDER BY {', '.join(f'{term} {order}' for term in terms)} LIMIT {p} OFFSET {p}")
    return [Job.from_row(r) for r in conn.execute(sql, (*params, limit, offset))]


def jobs_matching_id(conn: Connection, text: str, limit: int) -> list[Job]:
    """At most `limit` jobs of any state whose id begins with `text` (as typed, byte by byte: a range of the primary
    key on SQLite), then, for the room left, those whose id holds `text` elsewhere, ignoring ASCII case (a scan that
    stops at `limit` matches); each kind by id then operation, texts by their bytes. [] for an empty `text`."""
    if not text or limit <= 0:
        return []
    p, c = conn.PARAM, conn.TEXT_ORDER
    order = f"ORDER BY job_id{c}, operation{c} LIMIT {p}"
    prefix = f"job_id{c} >= {p} AND job_id{c} < {p}"
    rows = conn.execute(f"SELECT * FROM jobs WHERE {prefix} {order}", (text, text + "\U0010ffff", limit)).fetchall()
    found = [Job.from_row(r) for r in rows]
    if len(found) < limit:
        more = conn.execute(
            f"SELECT * FROM jobs WHERE job_id {conn.LIKE} {p} ESCAPE '\\' AND NOT ({prefix}) {order}",
            (f"%{_like(text)}%", text, text + "\U0010ffff", limit - len(found))).fetchall()
        found += [Job.from_row(r) for r in more]
    return found


def held_jobs(conn: Connection, limit: int = 50) -> list[Job]:
    """At most `limit` held jobs, oldest hold first (then creation, then key)."""
    rows = conn.run("jobs.held_jobs", (limit,))
    return [Job.from_row(r) for r in rows]


# -- counts -----------------------------------------------------------------------------------------------------------
def state_counts(conn: Connection) -> dict[str, int]:
    """Jobs per state (every state present, zero when empty), from the trigger-kept counter table."""
    counts = dict.fromkeys(STATES, 0)
    for state, n in conn.run("jobs.state_counts"):
        if state in counts:
            counts[state] = int(n)
    return counts


def held_by_operation(conn: Connection) -> dict[str, int]:
    """Held jobs per operation (only operations with one)."""
    return dict(conn.run("jobs.held_by_operation").fetchall())


def operation_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """Jobs per operation and state (only the pairs with a job)."""
    out: dict[str, dict[str, int]] = {}
    for op, state, n in conn.run("jobs.operation_counts"):
        out.setdefault(op, {})[state] = n
    return out


# -- stale writes the epoch check refused (fenced_writes) -------------------------------------------------------------
def fenced_write_count(conn: Connection) -> int:
    """How many stale writes were refused by the epoch check (0 when none)."""
    return int(conn.run("jobs.fenced_write_count").fetchone()[0])


def fenced_writes_for(conn: Connection, key: JobKey) -> list[dict[str, Any]]:
    """What stale workers tried to write to this job (kept as clues for a person), oldest first: each a dict of the
    stored columns with `detail` parsed; [] when none."""
    rows = conn.run("jobs.fenced_writes_for", (key.job_id, key.operation))
    return [{**dict(r), "detail": json.loads(r["detail"])} for r in rows]


def find_by_idem_key(conn: Connection, idem_key: str) -> Job | None:
    """The job holding `idem_key` (one at most: the key is unique), or None."""
    row = conn.run("jobs.find_by_idem_key", (idem_key,)).fetchone()
    return Job.from_row(row) if row is not None else None


def submitted_with_handle(conn: Connection, after: tuple[float, str, str], limit: int) -> list[Job]:
    """Submitted jobs with a handle (the ones a poll can ask about), after the keyset `after` (created_at, job_id,
    operation), oldest first, at most `limit`: one page of a pass's polls."""
    rows = conn.run("jobs.submitted_with_handle", (*after, limit)).fetchall()
    return [Job.from_row(r) for r in rows]


def count_submitted(conn: Connection) -> int:
    """How many jobs are submitted (a pass's polls to come, for its progress)."""
    return int(conn.run("jobs.count_submitted").fetchone()[0])


def done_jobs(conn: Connection) -> list[Job]:
    """Every job in state done (its result waits to be delivered), oldest update first."""
    rows = conn.run("jobs.done_jobs").fetchall()
    return [Job.from_row(r) for r in rows]


def stale_sends(conn: Connection, *, started_before: float, lease_before: float) -> list[JobKey]:
    """Reserving jobs whose send started at or before `started_before` and whose lease (if any) ended at or before
    `lease_before`: sends whose outcome nobody recorded, oldest first."""
    rows = conn.run("jobs.stale_sends", (started_before, lease_before)).fetchall()
    return [JobKey(r[0], r[1]) for r in rows]


def count_due(conn: Connection, now: float) -> int:
    """How many reserving jobs no send has started and whose next try is due at `now` (a pass's sends to come)."""
    return int(conn.run("jobs.count_due", (now,)).fetchone()[0])

