"""Read-only questions the CLI and console ask: counts, pages of jobs, events by cursor, quota history.

Every query here is served by an index; none loads a whole table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ledger.config import Config
from ledger.errors import BadInput
from ledger.model import GROUPS, STATES, Event, Job, JobKey
from ledger.stages import check_stage, stage_clause
from ledger.store import Connection


def state_counts(conn: Connection) -> dict[str, int]:
    """Jobs per state (every state present, zero when empty), from the trigger-kept counter table."""
    counts = dict.fromkeys(STATES, 0)
    for state, n in conn.execute("SELECT state, n FROM state_counts"):
        if state in counts:
            counts[state] = int(n)
    return counts


def group_counts(conn: Connection) -> dict[str, int]:
    """Jobs per console group (held, reserving, submitted, done, consumed, failed, resolved)."""
    counts = state_counts(conn)
    return {g: sum(counts[s] for s in states) for g, states in GROUPS.items()}


FILTER_KEYS = {
    "owner": "the owner, exactly (owner:me is you)",
    "op": "the operation (* is a wildcard)",
    "target": "the target (* is a wildcard)",
    "reason": "words in why it is held or its last error",
    "stage": "who it waits for: needs-finding, awaiting-approval, awaiting-my-approval, assigned",
    "text": "a word that itself holds a colon (text:a:b)",
}
"""The keys a typed filter knows, and what each matches; words without a key match id, operation, target and
why the job is held (or its last error)."""
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(.*)", re.DOTALL)


@dataclass(frozen=True)
class JobFilter:
    """A typed filter: free words on job id / operation / target / held reason / last error, plus owner:, op:,
    target:, reason:, stage: terms."""

    text: str = ""
    owner: str | None = None
    operation: str | None = None
    target: str | None = None
    reason: str | None = None
    stage: str | None = None
    me: str | None = field(default=None, compare=False)
    """The operator (stage:awaiting-my-approval leaves out the jobs they queried or wrote a finding for)."""
    four_eyes: bool = field(default=True, compare=False)

    @classmethod
    def parse(cls, query: str, me: str | None = None, *, four_eyes: bool = True) -> JobFilter:
        """Parse "owner:me op:article.* reason:timeout bucket" into a filter (`*` is a wildcard in op: and
        target:; `me` is the operator). A key it does not know, or a stage it does not know, is refused (BadInput
        naming it and the keys)."""
        words: list[str] = []
        terms: dict[str, str] = {}
        for tok in query.split():
            m = _KEY.fullmatch(tok)
            if m is None:
                words.append(tok)
                continue
            key, value = m.group(1), m.group(2)
            if key not in FILTER_KEYS:
                raise BadInput(
                    f"filter key {_clip(key) + ':'!r}: unknown; the keys are "
                    f"{', '.join(k + ':' for k in FILTER_KEYS)} (words without a key match id, operation, target "
                    "and why it is held; text:a:b for a word with a colon)"
                )
            if key == "text":
                words.append(value)
            else:
                terms[key] = value
        owner = terms.get("owner")
        if owner == "me" and me:
            owner = me
        stage = check_stage(terms["stage"]) if "stage" in terms else None
        return cls(text=" ".join(w for w in words if w), owner=owner, operation=terms.get("op"),
                   target=terms.get("target"), reason=terms.get("reason"), stage=stage, me=me, four_eyes=four_eyes)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        more, more_params = stage_clause(flt.stage, table or "jobs", flt.me, flt.four_eyes)
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
    """One page of a group's jobs, by age; filtered by `flt`. Never reads more than `limit` rows out."""
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
    """Held jobs, oldest hold first."""
    rows = conn.execute("SELECT * FROM jobs WHERE state = 'held' ORDER BY held_at, created_at, job_id, operation "
                        "LIMIT ?", (limit,))
    return [Job.from_row(r) for r in rows]


def find_job(conn: Connection, key: JobKey) -> Job | None:
    """The job, or None."""
    row = conn.execute("SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)).fetchone()
    return Job.from_row(row) if row else None


def operations_of(conn: Connection, job_id: str) -> list[str]:
    """The operations a job id exists under (a primary-key prefix lookup)."""
    return [r[0] for r in conn.execute("SELECT operation FROM jobs WHERE job_id = ? ORDER BY operation", (job_id,))]


def job_events(conn: Connection, key: JobKey) -> list[Event]:
    """A job's whole history, in order."""
    rows = conn.execute(
        "SELECT * FROM events WHERE job_id = ? AND operation = ? ORDER BY seq", (key.job_id, key.operation)
    )
    return [Event.from_row(r) for r in rows]


def events_after(conn: Connection, after_id: int, limit: int = 200) -> list[Event]:
    """Events with id > after_id, oldest first: the follow cursor."""
    rows = conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
    return [Event.from_row(r) for r in rows]


def latest_events(conn: Connection, limit: int = 20) -> list[Event]:
    """The newest events, newest first."""
    rows = conn.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,))
    return [Event.from_row(r) for r in rows]


def last_event_id(conn: Connection) -> int:
    """The id of the newest event, or 0."""
    row = conn.execute("SELECT MAX(id) FROM events").fetchone()
    return int(row[0] or 0)


def fenced_write_count(conn: Connection) -> int:
    """How many stale writes were refused by the epoch check."""
    return int(conn.execute("SELECT COUNT(*) FROM fenced_writes").fetchone()[0])


def fenced_writes_for(conn: Connection, key: JobKey) -> list[dict[str, Any]]:
    """What stale workers tried to write to this job (kept as clues for a person)."""
    rows = conn.execute(
        "SELECT * FROM fenced_writes WHERE job_id = ? AND operation = ? ORDER BY id", (key.job_id, key.operation)
    )
    return [{**dict(r), "detail": json.loads(r["detail"])} for r in rows]


@dataclass(frozen=True)
class QuotaDay:
    """One operation's use on one day."""

    operation: str
    day: str
    used: int
    limit: int

    @property
    def remaining(self) -> int:
        """How many more may be reserved that day."""
        return max(self.limit - self.used, 0)


def _days_back(today: str, days: int) -> list[str]:
    d = datetime.strptime(today, "%Y-%m-%d")
    return [(d - timedelta(days=i)).strftime("%Y-%m-%d") for i in range(days - 1, -1, -1)]


def quota_history(conn: Connection, config: Config, now: float, days: int = 14) -> dict[str, list[QuotaDay]]:
    """Per declared operation, its use for each of the last `days` days (oldest first, today last)."""
    today = datetime.fromtimestamp(now, ZoneInfo(config.timezone)).strftime("%Y-%m-%d")
    span = _days_back(today, days)
    out: dict[str, list[QuotaDay]] = {}
    for name, op in sorted(config.operations.items()):
        rows = dict(
            conn.execute(
                "SELECT day, used FROM quota_usage WHERE operation = ? AND day >= ? AND day <= ?",
                (name, span[0], span[-1]),
            ).fetchall()
        )
        out[name] = [QuotaDay(name, d, int(rows.get(d, 0)), op.daily_quota) for d in span]
    return out


def quota_today(conn: Connection, config: Config, now: float) -> list[QuotaDay]:
    """Today's use per declared operation."""
    return [days[-1] for days in quota_history(conn, config, now, days=1).values()]


def held_by_operation(conn: Connection) -> dict[str, int]:
    """Held jobs per operation."""
    return dict(conn.execute("SELECT operation, COUNT(*) FROM jobs WHERE state = 'held' GROUP BY operation").fetchall())


def operation_counts(conn: Connection) -> dict[str, dict[str, int]]:
    """Jobs per operation and state."""
    out: dict[str, dict[str, int]] = {}
    for op, state, n in conn.execute("SELECT operation, state, COUNT(*) FROM jobs GROUP BY operation, state"):
        out.setdefault(op, {})[state] = n
    return out
