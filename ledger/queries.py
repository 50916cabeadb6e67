"""Read-only questions the CLI and console ask: counts per console group, quota history by day.

The reads themselves (pages of jobs, a job by its key, events by cursor, counts, the typed filter's SQL) are named
store operations (`ledger.store.jobs`, `ledger.store.events`, `ledger.store.quota`), each served by an index; none
loads a whole table. This module keeps what is made of them; the store's reads stand here under their former names
too (`as` imports) for callers not yet moved to the store's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from ledger.config import Config
from ledger.model import FILTER_KEYS as FILTER_KEYS
from ledger.model import GROUPS
from ledger.model import JobFilter as JobFilter
from ledger.store import Connection
from ledger.store import quota as quota_store
from ledger.store.events import events_after as events_after
from ledger.store.events import job_events as job_events
from ledger.store.events import last_event_id as last_event_id
from ledger.store.events import latest_events as latest_events
from ledger.store.jobs import fenced_write_count as fenced_write_count
from ledger.store.jobs import fenced_writes_for as fenced_writes_for
from ledger.store.jobs import filter_clause as filter_clause
from ledger.store.jobs import find_job as find_job
from ledger.store.jobs import held_by_operation as held_by_operation
from ledger.store.jobs import held_jobs as held_jobs
from ledger.store.jobs import list_jobs as list_jobs
from ledger.store.jobs import operation_counts as operation_counts
from ledger.store.jobs import operations_of as operations_of
from ledger.store.jobs import state_counts as state_counts


def group_counts(conn: Connection) -> dict[str, int]:
    """Jobs per console group (held, reserving, submitted, done, consumed, failed, resolved)."""
    counts = state_counts(conn)
    return {g: sum(counts[s] for s in states) for g, states in GROUPS.items()}


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
        used = quota_store.usage(conn, name, span[0], span[-1])
        out[name] = [QuotaDay(name, d, used.get(d, 0), op.daily_quota) for d in span]
    return out


def quota_today(conn: Connection, config: Config, now: float) -> list[QuotaDay]:
    """Today's use per declared operation."""
    return [days[-1] for days in quota_history(conn, config, now, days=1).values()]
