"""How the system copes, for the overview: over the last hours, holds begun and holds ended per hour, ended by
reclaim itself (the remote's own evidence) or by a person, and the time from a hold to the event that ended it; and
every hold ended so far (the overview's "resolved" tile).

Read in one snapshot from the ledger (`ledger.store.coping`): the window's events by index, the totals from the kept
tallies; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger import store
from ledger.errors import BadInput
from ledger.report import Spread
from ledger.store import Connection
from ledger.store import coping as q

HOURS = 24
"""The overview's window: the last 24 hours, an hour per sparkline step."""
MAX_HOURS = 24 * 14
"""The longest window read (its series has an entry per hour)."""


@dataclass(frozen=True)
class Coping:
    """Holds begun and ended per hour over [since, until) (oldest hour first), the time to decision of the holds
    ended in it, and every hold ended so far (by reclaim, by a person)."""

    since: float
    until: float
    begun: list[int]
    by_reclaim: list[int]
    by_person: list[int]
    time_to_decision: Spread
    resolved_by_reclaim: int
    resolved_by_person: int

    @property
    def ended(self) -> list[int]:
        """Holds ended per hour, by reclaim and by a person together."""
        return [a + b for a, b in zip(self.by_reclaim, self.by_person, strict=True)]

    @property
    def resolved(self) -> int:
        """Every hold ended so far."""
        return self.resolved_by_reclaim + self.resolved_by_person


def read_coping(conn: Connection, now: float, hours: int = HOURS) -> Coping:
    """The figures for the `hours` hours before `now` (hour-long steps ending at `now`), read from `conn` in one
    read snapshot. Raises BadInput unless 1 <= hours <= MAX_HOURS; the store's errors as `store.read_snapshot`."""
    if not 1 <= hours <= MAX_HOURS:
        raise BadInput(f"hours {hours}: expected 1 to {MAX_HOURS}")
    since = now - hours * 3600.0
    with store.read_snapshot(conn):
        begun_at = q.begun_per_hour(conn, since, now)
        endings = q.ended(conn, since, now)
        by_reclaim_total, by_person_total = q.ended_total(conn)
    begun = [0] * hours
    for hour, n in begun_at.items():
        begun[min(max(hour, 0), hours - 1)] += n
    by_reclaim, by_person = [0] * hours, [0] * hours
    seconds: list[float] = []
    for e in endings:
        hour = min(max(int((e.at - since) // 3600), 0), hours - 1)
        (by_reclaim if e.by_reclaim else by_person)[hour] += 1
        if e.held_at is not None:
            seconds.append(max(e.at - e.held_at, 0.0))
    return Coping(since, now, begun, by_reclaim, by_person, Spread.of(seconds), by_reclaim_total, by_person_total)
