"""The named read queries behind `reclaim metrics` (ledger.metrics): one function per figure family.

Every figure is computed from the ledger's own tables and events, so any process on any host that reads the
same ledger reports the same numbers. The statements are each backend's own (`ledger/store/sql/BACKEND/metrics.sql`,
run by name: an event's JSON detail is read the backend's way); the ones whose shape follows a list (the states a job
may leave, a histogram's bounds) are composed here from what the connection declares (`PARAM`). Each function only
reads; none opens or ends a transaction (the caller reads them all inside one, for one consistent snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger.event_table import DECISION_KINDS
from ledger.event_table import OUTCOME_KINDS as OUTCOME_KINDS  # the kinds a send's outcome is recorded as
from ledger.event_table import TERMINAL_STATES as TERMINAL_STATES  # the states no event leads out of
from ledger.store import Connection

RESOLUTION_KINDS = DECISION_KINDS
"""The events that end a hold (from state `held`), from the event table (ledger.event_table)."""

SYSTEM_ACTOR = "reclaim"
"""The actor of a decision the worker took on the remote's own evidence (never a person's account)."""


@dataclass(frozen=True)
class HeldFigures:
    """One operation's held jobs at `now`: how many, the oldest's hold time, how many are past their due time."""

    operation: str
    held: int
    oldest_held_at: float | None
    past_due: int


def held_figures(conn: Connection, now: float) -> list[HeldFigures]:
    """Per operation with held jobs: the count, the earliest `held_at`, and those whose `due_at` is before `now`."""
    rows = conn.run("metrics.held_figures", (now,)).fetchall()
    return [HeldFigures(r[0], int(r[1]), float(r[2]) if r[2] is not None else None, int(r[3] or 0)) for r in rows]


@dataclass(frozen=True)
class EventTally:
    """Events of one kind on one operation, from one kind of actor, state and to one state.

    `system` is True when the reclaim worker wrote it on the remote's evidence (actor `reclaim`); `journaled`
    counts those recorded from the outcome journal; `cancelled` the duplicate sends whose cancel was asked.
    """

    operation: str
    kind: str
    from_state: str | None
    to_state: str | None
    system: bool
    count: int
    journaled: int
    cancelled: int


def event_tallies(conn: Connection) -> list[EventTally]:
    """Every event counted per operation, kind, states and whether the system actor wrote it, with how many were
    recorded from the outcome journal and how many duplicate sends asked for a cancel: the tallies the events'
    trigger keeps in each appending transaction (a few rows however many events; `verify` recounts them)."""
    return [EventTally(r[0], r[1], r[2] or None, r[3] or None, bool(r[4]), int(r[5]), int(r[6]), int(r[7]))
            for r in conn.run("metrics.event_tallies")]


def fenced_writes(conn: Connection) -> list[tuple[str, str, int]]:
    """(operation, the event the stale write tried, count) of writes refused for a stale epoch."""
    rows = conn.run("metrics.fenced_writes").fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


def outbox_states(conn: Connection) -> list[tuple[str, str, int]]:
    """(channel, state, notifications) for every pair that has rows."""
    rows = conn.run("metrics.outbox_states").fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram: `buckets[i]` observations at most `bounds[i]`; `count` and `total` over all."""

    labels: tuple[str, ...]
    bounds: tuple[float, ...]
    buckets: tuple[int, ...]
    count: int
    total: float


def _histogram(
    conn: Connection, value: str, source: str, group: Sequence[str], bounds: Sequence[float],
    params: Sequence[object] = (),
) -> list[Histogram]:
    """One histogram per `group` value of the expression `value` over `source` (FROM ... WHERE ...: SQL both
    backends take, its parameters `params` written `conn.PARAM`)."""
    cols = ", ".join(group)
    per_bucket = ", ".join(f"SUM(CASE WHEN {value} <= {conn.PARAM} THEN 1 ELSE 0 END)" for _ in bounds)
    sql = f"SELECT {cols}, COUNT(*), COALESCE(SUM({value}), 0), {per_bucket} FROM {source} GROUP BY {cols}"
    out: list[Histogram] = []
    for r in conn.execute(sql, (*params, *bounds)).fetchall():
        n = len(group)
        out.append(Histogram(
            labels=tuple(str(v) for v in r[:n]), bounds=tuple(bounds), buckets=tuple(int(v or 0) for v in r[n + 2:]),
            count=int(r[n]), total=float(r[n + 1]),
        ))
    return out


def notification_delays(conn: Connection, bounds: Sequence[float]) -> list[Histogram]:
    """Per (channel, kind): seconds from the state change a notification reports (its outbox row is written in
    the same transaction) to its delivery, for the notifications delivered (`sent`)."""
    return _histogram(conn, "(updated_at - created_at)", "outbox WHERE state = 'sent'", ("channel", "kind"), bounds)


def evidence_to_resolution(conn: Connection, bounds: Sequence[float]) -> list[Histogram]:
    """Per operation: seconds from a piece of evidence arriving to the hold it resolved (reconciled on it)."""
    return _histogram(
        conn, "(h.at - e.at)",
        "evidence e JOIN evidence_handled h ON h.evidence_id = e.id WHERE h.outcome = 'reconciled'",
        ("COALESCE(e.operation, '')",), bounds,
    )


def webhook_deliveries(conn: Connection) -> list[tuple[str, bool, int]]:
    """(type, recorded as evidence, deliveries) of verified webhook deliveries; a delivery with no evidence is
    of a type reclaim ignores."""
    rows = conn.run("metrics.webhook_deliveries").fetchall()
    return [(r[0], bool(r[1]), int(r[2])) for r in rows]
