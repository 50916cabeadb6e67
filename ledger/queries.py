"""Read-only questions the CLI and console ask: counts per console group, quota history by day.

The reads themselves (pages of jobs, a job by its key, events by cursor, counts, the typed filter's SQL) are named
store operations (`ledger.store.jobs`, `ledger.store.events`, `ledger.store.quota`), each served by an index; none
loads a whole table. This module keeps what is made of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from ledger.config import Config
from ledger.model import GROUPS
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.store import quota as quota_store


def group_counts(conn: Connection) -> dict[str, int]:
    """Jobs per console group (held, reserving, submitted, done, consumed, failed, resolved)."""
    counts = jobs_store.state_counts(conn)
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
