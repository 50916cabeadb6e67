"""The named read queries behind the overview's "how the system copes" figures (ledger.coping).

A hold begins with an event that moves a job into `held` from another state (a hold kind); it ends with an event
that moves the job out of `held` (an ending kind), written by reclaim itself (actor `reclaim`: the remote's own
evidence) or by a person. The window's reads are each kind's window of events_kind_at (kind, at), and for each
ending one probe of events_job_kind for the hold it ended; the totals are read from the kept event_tallies. The
statements are each backend's own (`ledger/store/sql/BACKEND/coping.sql`, run by name). Only reads; none opens or
ends a transaction (the caller reads inside one, for one consistent snapshot).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ledger.event_table import DECISION_KINDS, HOLD_KINDS
from ledger.store import Connection

_HOLD_KINDS_JSON = json.dumps(HOLD_KINDS)
_ENDING_KINDS_JSON = json.dumps(DECISION_KINDS)


@dataclass(frozen=True)
class Ending:
    """One hold ended: when, whether reclaim itself ended it, and when that hold began (None: the ledger has none)."""

    at: float
    by_reclaim: bool
    held_at: float | None


def begun_per_hour(conn: Connection, since: float, until: float) -> dict[int, int]:
    """Holds begun at `since` <= time < `until`, per hour counted from `since` (hour 0 first; hours with none are
    absent)."""
    rows = conn.run("coping.begun", (since, _HOLD_KINDS_JSON, since, until)).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


def ended(conn: Connection, since: float, until: float) -> list[Ending]:
    """Every hold ended at `since` <= time < `until`, oldest first, with who ended it and when it began."""
    rows = conn.run("coping.ended", (_HOLD_KINDS_JSON, _ENDING_KINDS_JSON, since, until)).fetchall()
    return [Ending(float(r[0]), int(r[1]) == 1, None if r[2] is None else float(r[2])) for r in rows]


def ended_total(conn: Connection) -> tuple[int, int]:
    """(by reclaim, by a person): every hold ended so far, from the kept tallies (a few rows, not the events)."""
    by = {int(r[0]): int(r[1]) for r in conn.run("coping.ended_total").fetchall()}
    return by.get(1, 0), by.get(0, 0)
