"""The hold-resolution report: for a window, per operation and per remote, how holds came about and ended.

For the holds that began in the window: their cause (a family of the held reason), how each ended by the
window's end (resolved by the remote's own evidence — a reconcile by the worker, actor `reclaim` —, reconciled,
released, rejected or remediated by a person, or still open) and the time to that decision (p50 / p90 / max);
the releases authorised in the window and what the next attempt came to; the remote queries made in the window
and what they could answer; the quota used per day. Read from the ledger in one snapshot (`ledger.store.report`);
nothing is written and no remote is called.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from ledger import store
from ledger.clock import day_of, iso
from ledger.config import Config
from ledger.errors import BadInput
from ledger.store import Connection
from ledger.store import report as q
from ledger.store.metrics import SYSTEM_ACTOR

MAX_DAYS = 366
"""The longest window a report covers (its per-day series has a row per day)."""
ENDINGS = ("evidence", "reconciled", "released", "rejected", "remediated", "open")
"""How a hold ended by the window's end: on the remote's evidence (the worker), by a person's decision, or not yet."""
_ENDING_OF = {"reconcile": "reconciled", "release": "released", "reject": "rejected", "remediate": "remediated"}
RELEASE_OUTCOMES = ("accepted", "failed", "held again", "not sent yet")
"""What a release's next attempt came to by the window's end."""
_RELEASE_OUTCOME_OF = {"submitted": "accepted", "failed": "failed", "held": "held again"}
_HOLD_CAUSE = {
    "orphan_held": "worker died mid-send",
    "handle_unknown": "remote does not know the handle",
    "remote_needs_person": "remote answer needs a person",
    "decision_unverified": "decision not signed by its author",
}
UNDECLARED = "(undeclared)"
"""The remote of an operation the config no longer declares."""


def hold_cause(held_kind: str, cause: str | None) -> str:
    """The family of a hold's reason: what happened, without the job's particulars (low cardinality)."""
    if held_kind == "send_unknown":
        return f"send outcome unknown: {cause or 'error'}"
    return _HOLD_CAUSE.get(held_kind, held_kind)


def ending(h: q.HoldRow, until: float) -> str:
    """How hold `h` had ended by `until` (one of ENDINGS)."""
    if h.decision is None or h.decided_at is None or h.decided_at >= until:
        return "open"
    if h.decision == "reconcile" and h.decided_by == SYSTEM_ACTOR:
        return "evidence"
    return _ENDING_OF.get(h.decision, h.decision)


def query_answer(remote_state: str, asked: bool) -> str:
    """What a recorded remote query could answer: 'answered: <state>', 'not found', 'could not be asked', 'error'."""
    if remote_state in ("completed", "running", "failed", "needs_person"):
        return f"answered: {remote_state}"
    if remote_state == "not_found":
        return "not found"
    return "error" if asked else "could not be asked"


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank `p` percentile (0 < p <= 1) of `values` (None when empty): the smallest value with at
    least p of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p * len(ordered)) - 1, 0)]


@dataclass(frozen=True)
class Spread:
    """Times to decision in seconds: how many, p50, p90, max (None when none was decided)."""

    count: int
    p50: float | None
    p90: float | None
    max: float | None

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        """The spread of `values`."""
        return cls(len(values), percentile(values, 0.5), percentile(values, 0.9), max(values) if values else None)


@dataclass
class Figures:
    """The report's figures for one operation, one remote, or everything (`scope` 'operation' / 'remote' / 'all')."""

    scope: str
    name: str
    holds: int = 0
    causes: Counter[str] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)
    decision_seconds: list[float] = field(default_factory=list)
    releases: int = 0
    release_outcomes: Counter[str] = field(default_factory=Counter)
    queries: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    quota_used: dict[str, int] = field(default_factory=dict)
    """Reservations counted per day (operations only; days with none included as 0)."""
    quota_limit: int | None = None

    @property
    def time_to_decision(self) -> Spread:
        """p50 / p90 / max seconds from a hold to its decision, over the holds decided by the window's end."""
        return Spread.of(self.decision_seconds)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every count, the endings with zeros, the time to decision's spread."""
        t = self.time_to_decision
        out: dict[str, Any] = {
            "scope": self.scope, "name": self.name, "holds": self.holds, "causes": dict(sorted(self.causes.items())),
            "endings": {e: self.endings.get(e, 0) for e in ENDINGS},
            "time_to_decision_seconds": {"decided": t.count, "p50": t.p50, "p90": t.p90, "max": t.max},
            "releases": self.releases,
            "release_outcomes": {o: self.release_outcomes.get(o, 0) for o in RELEASE_OUTCOMES},
            "queries": self.queries, "answers": dict(sorted(self.answers.items())),
        }
        if self.scope == "operation":
            out["quota"] = {"limit": self.quota_limit, "used_per_day": dict(self.quota_used)}
        return out

    def add(self, other: Figures) -> None:
        """Add `other`'s holds, releases and queries to these (quota is per operation, not added)."""
        self.holds += other.holds
        self.causes.update(other.causes)
        self.endings.update(other.endings)
        self.decision_seconds += other.decision_seconds
        self.releases += other.releases
        self.release_outcomes.update(other.release_outcomes)
        self.queries += other.queries
        self.answers.update(other.answers)


@dataclass(frozen=True)
class Day:
    """One calendar day of the window (the config's time zone): holds begun and holds decided that day."""

    day: str
    held: int
    decided: int


@dataclass(frozen=True)
class Report:
    """The report for [since, until): totals, per operation, per remote, and per day."""

    since: float
    until: float
    timezone: str
    total: Figures
    operations: list[Figures]
    remotes: list[Figures]
    days: list[Day]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO text and epoch seconds)."""
        return {
            "since": iso(self.since), "until": iso(self.until), "since_epoch": self.since, "until_epoch": self.until,
            "timezone": self.timezone, "total": self.total.to_dict(),
            "operations": [f.to_dict() for f in self.operations], "remotes": [f.to_dict() for f in self.remotes],
            "days": [{"day": d.day, "held": d.held, "decided": d.decided} for d in self.days],
        }

    def csv_rows(self) -> Iterator[dict[str, Any]]:
        """The report as flat rows (scope, name, figure, key, value) for a spreadsheet: one figure per row."""
        for f in [self.total, *self.operations, *self.remotes]:
            d = f.to_dict()
            base = {"scope": f.scope, "name": f.name}
            yield {**base, "figure": "holds", "key": "", "value": f.holds}
            for group in ("causes", "endings", "time_to_decision_seconds", "release_outcomes", "answers"):
                for k, v in d[group].items():
                    yield {**base, "figure": group, "key": k, "value": "" if v is None else v}
            yield {**base, "figure": "releases", "key": "", "value": f.releases}
            yield {**base, "figure": "queries", "key": "", "value": f.queries}
            if f.scope == "operation":
                yield {**base, "figure": "quota_limit", "key": "", "value": f.quota_limit}
                for day, used in f.quota_used.items():
                    yield {**base, "figure": "quota_used", "key": day, "value": used}
        for d_ in self.days:
            yield {"scope": "day", "name": d_.day, "figure": "held", "key": "", "value": d_.held}
            yield {"scope": "day", "name": d_.day, "figure": "decided", "key": "", "value": d_.decided}


CSV_COLUMNS = ("scope", "name", "figure", "key", "value")


def check_window(since: float, until: float, max_days: int = MAX_DAYS) -> None:
    """Raise BadInput unless `since` is before `until` and the window is at most `max_days` days."""
    if since >= until:
        raise BadInput(f"--since {iso(since)} is not before --until {iso(until)}; give an earlier --since")
    if until - since > max_days * 86_400:
        raise BadInput(f"--since {iso(since)} .. --until {iso(until)}: a report covers at most {max_days} days; "
                       "narrow the window (or write the whole history with --to FILE)")


def _days(since: float, until: float, tz: str) -> list[str]:
    first = date.fromisoformat(day_of(since, tz))
    last = date.fromisoformat(day_of(math.nextafter(until, -math.inf), tz))
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def build(conn: Connection, config: Config, since: float, until: float) -> Report:
    """The report for `since` <= time < `until`, read from `conn` in one read snapshot (BadInput for a window
    `check_window` refuses). Holds are those begun in the window; each counts as decided only when its decision
    came before `until`."""
    check_window(since, until)
    with store.read_snapshot(conn):
        holds = q.holds(conn, since, until)
        releases = q.releases(conn, since, until)
        queries = q.queries(conn, since, until)
        days = _days(since, until, config.timezone)
        quota = q.quota_days(conn, days[0], days[-1])
    return assemble(config, since, until, days, holds, releases, queries, quota)


def remote_of(config: Config, operation: str) -> str:
    """The remote an operation is sent to (UNDECLARED when the config does not declare the operation)."""
    oc = config.operations.get(operation)
    return oc.remote if oc is not None else UNDECLARED


def assemble(
    config: Config, since: float, until: float, days: list[str], holds: Iterable[q.HoldRow],
    releases: Iterable[q.ReleaseRow], queries: Iterable[tuple[str, str, bool, int]],
    quota: Iterable[tuple[str, str, int]],
) -> Report:
    """The report from the rows read (no ledger access)."""
    ops: dict[str, Figures] = {op: Figures("operation", op) for op in config.operations}

    def of(op: str) -> Figures:
        return ops.setdefault(op, Figures("operation", op))

    held_on: Counter[str] = Counter()
    decided_on: Counter[str] = Counter()
    tz = config.timezone
    for h in holds:
        f = of(h.operation)
        f.holds += 1
        f.causes[hold_cause(h.held_kind, h.cause)] += 1
        end = ending(h, until)
        f.endings[end] += 1
        held_on[day_of(h.held_at, tz)] += 1
        if end != "open" and h.decided_at is not None:
            f.decision_seconds.append(max(h.decided_at - h.held_at, 0.0))
            decided_on[day_of(h.decided_at, tz)] += 1
    for r in releases:
        f = of(r.operation)
        f.releases += 1
        done = r.next_state is not None and r.next_at is not None and r.next_at < until
        f.release_outcomes[_RELEASE_OUTCOME_OF.get(r.next_state or "", r.next_state or "") if done else
                           "not sent yet"] += 1
    for op, state, asked, n in queries:
        f = of(op)
        f.queries += n
        f.answers[query_answer(state, asked)] += n
    used: dict[tuple[str, str], int] = {(op, day): n for op, day, n in quota}
    for op, f in ops.items():
        f.quota_used = {day: used.get((op, day), 0) for day in days}
        oc = config.operations.get(op)
        f.quota_limit = oc.daily_quota if oc is not None else None
    remotes: dict[str, Figures] = {name: Figures("remote", name) for name in config.remotes}
    total = Figures("all", "all")
    for op in sorted(ops):
        name = remote_of(config, op)
        remotes.setdefault(name, Figures("remote", name)).add(ops[op])
        total.add(ops[op])
    return Report(
        since=since, until=until, timezone=tz, total=total,
        operations=[ops[k] for k in sorted(ops)], remotes=[remotes[k] for k in sorted(remotes)],
        days=[Day(d, held_on.get(d, 0), decided_on.get(d, 0)) for d in days],
    )
