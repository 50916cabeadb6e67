"""What the lists of jobs read: the overview's oldest held jobs and today's quotas, one page of a console group
(filtered by the typed filter, never the whole group), and each operation's quota history with its held count; each
held or failed job with its stage. Only reads, each an index lookup or a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.clock import clock_time
from ledger.config import Config
from ledger.coping import Coping, read_coping
from ledger.errors import BadInput
from ledger.model import GROUPS, Job, JobFilter, JobKey
from ledger.queries import QuotaDay, quota_history, quota_today
from ledger.stages import Stage, job_stage
from ledger.store import Connection
from ledger.store.jobs import held_by_operation, held_jobs, list_jobs, operations_of


@dataclass(frozen=True)
class OverviewData:
    """The overview's paged reads: the oldest held jobs, today's quota per operation, and how the system copes
    (holds begun and ended per hour over the last hours; None when not read)."""

    held: list[Job]
    quotas: list[QuotaDay]
    stages: dict[JobKey, Stage] = field(default_factory=dict)
    coping: Coping | None = None


def stages_of(conn: Connection, jobs: list[Job], tz: str) -> dict[JobKey, Stage]:
    """The stage of each held or failed job among `jobs` (due times absolute, in `tz`)."""
    out: dict[JobKey, Stage] = {}
    for job in jobs:
        stage = job_stage(conn, job, clock_time(job.due_at, tz, with_date=True) if job.due_at is not None else "")
        if stage is not None:
            out[job.key] = stage
    return out


def read_overview(conn: Connection, config: Config, now: float, held_limit: int = 50) -> OverviewData:
    """Held jobs (oldest hold first) with their stages, today's quotas, and how the system copes over the last
    `ledger.coping.HOURS` hours (`ledger.coping.read_coping`, index-backed)."""
    held = held_jobs(conn, limit=held_limit)
    return OverviewData(held, quota_today(conn, config, now), stages_of(conn, held, config.timezone),
                        read_coping(conn, now))


@dataclass(frozen=True)
class JobPage:
    """One page of a group's jobs, and whether there is a next one."""

    group: str
    jobs: list[Job]
    offset: int
    has_more: bool
    oldest_first: bool
    """Ascending by `sort` (for age: the oldest first)."""
    filter_text: str
    sort: str = "age"
    """The key the page is ordered by (`ledger.model.SORTS`)."""
    error: str | None = None
    """Why the filter was refused (an unknown key): the page is then empty."""
    stages: dict[JobKey, Stage] = field(default_factory=dict)
    """The stage of each held or failed job on the page."""


def read_page(
    conn: Connection, group: str, *, offset: int, oldest_first: bool, filter_text: str, me: str,
    page_size: int, now: float, four_eyes: bool = True, tz: str = "UTC", sort: str = "age",
) -> JobPage:
    """Read one page (plus one row to know if another page follows), with the stage of its held and failed jobs;
    never the whole group (a span in the filter counts back from `now`); ordered by `sort` (`ledger.model.SORTS`), ascending when `oldest_first`. A filter that cannot be parsed reads nothing: the page is empty and says why."""
    try:
        flt = JobFilter.parse(filter_text, me=me, now=now, four_eyes=four_eyes) if filter_text.strip() else None
    except BadInput as e:
        return JobPage(group, [], offset, False, oldest_first, filter_text, sort, error=str(e))
    rows = list_jobs(conn, group, limit=page_size + 1, offset=offset, oldest_first=oldest_first, flt=flt, sort=sort)
    page = rows[:page_size]
    return JobPage(group, page, offset, len(rows) > page_size, oldest_first, filter_text, sort,
                   stages=stages_of(conn, page, tz))


def match_counts(
    conn: Connection, filter_text: str, *, me: str, now: float, four_eyes: bool = True, cap: int = 100,
) -> dict[str, int]:
    """How many jobs of each console group (`ledger.model.GROUPS`, in its order) the typed filter matches, each
    counted up to `cap` + 1 (more reads as cap + 1: "over cap"); only the groups with a match. A filter that cannot
    be parsed, or an empty one, matches nothing here ({})."""
    try:
        flt = JobFilter.parse(filter_text, me=me, now=now, four_eyes=four_eyes) if filter_text.strip() else None
    except BadInput:
        return {}
    if flt is None:
        return {}
    counts = {group: len(list_jobs(conn, group, limit=cap + 1, flt=flt)) for group in GROUPS}
    return {group: n for group, n in counts.items() if n}


@dataclass(frozen=True)
class QuotaData:
    """Per operation: the last days of use (oldest first) and how many jobs are held."""

    history: dict[str, list[QuotaDay]]
    held: dict[str, int]


def read_quotas(conn: Connection, config: Config, now: float, days: int = 14) -> QuotaData:
    """Quota history and held counts per operation."""
    return QuotaData(quota_history(conn, config, now, days=days), held_by_operation(conn))


def key_of(conn: Connection, job_id: str, operation: str | None = None) -> JobKey:
    """The key of the job `job_id`: under `operation` when given (not looked up), else the one operation the id
    exists under. Raises BadInput when the id is not in the ledger, or exists under several operations."""
    if operation:
        return JobKey(job_id, operation)
    ops = operations_of(conn, job_id)
    if len(ops) == 1:
        return JobKey(job_id, ops[0])
    if not ops:
        raise BadInput(f"job {job_id!r}: not in the ledger (check the id, or pass --operation)")
    raise BadInput(f"job {job_id!r}: exists for several operations ({', '.join(ops)}); pass --operation")
