"""The one table of what each event does: where it may start, where it leads, and what it changes.

Every event kind the ledger writes has one `EventKind` here: the states it may start from (None: there is no job
yet), the state it leads to, and its effects on the job's row (epoch + 1, attempt + 1, the lease taken or
cleared, the handle set or cleared, the held reason set or cleared, other columns cleared) and the columns its
writer must give. `transitions.apply()` writes the row from it, `replay` and `verify` fold the events through
it, and the action table, the metrics and the hold report read their lists of states and kinds from it.

Plain data over `ledger.model` only: the store may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ledger.model import STATES

SetOrClear = Literal["set", "clear"]


@dataclass(frozen=True)
class EventKind:
    """What one kind of event does to a job.

    `starts` are the states it may start from, in the order a person reads them (None: it creates the job, or,
    for an event beside no job, there is none); `leads_to` the state it leads to (None: the job stays where it
    was). `requires` are the job columns its writer must give (not None), `may_set` those it may give; every
    other column the event changes is derived from its effects, and a writer may give no other.
    """

    name: str
    starts: tuple[str | None, ...]
    leads_to: str | None = None
    bumps_epoch: bool = False
    """epoch + 1: whatever was in flight for the old epoch is fenced."""
    bumps_attempt: bool = False
    """attempt + 1: a new attempt, the same idem key."""
    lease: Literal["take", "clear"] | None = None
    """take: `lease_owner` is the actor, `lease_until` is required; clear: both NULL."""
    handle: SetOrClear | None = None
    """set: `handle` is required; clear: NULL."""
    held_reason: SetOrClear | None = None
    """set: `held_reason` is required and `held_at` is the event's time; clear: `held_reason` NULL."""
    requires: frozenset[str] = frozenset()
    may_set: frozenset[str] = frozenset()
    clears: frozenset[str] = frozenset()
    """Other columns the event sets to NULL."""
    by_worker: bool = False
    """Written by a worker: it must name the epoch it holds (a stale one is fenced)."""
    send_outcome: bool = False
    """How a send ended: the kinds a worker (or a journal replay) records a send's outcome as."""
    writes_row: bool = True
    """False: a fact recorded beside the job (its row unchanged), appended without `apply()`."""

    def to_state(self, state: str | None) -> str | None:
        """The state this event leads to from `state` (which it must be allowed to start from)."""
        return self.leads_to if self.leads_to is not None else state

    @property
    def required(self) -> frozenset[str]:
        """Every column the writer must give: `requires` and those its lease, handle and held reason need."""
        need = set(self.requires)
        if self.lease == "take":
            need.add("lease_until")
        if self.handle == "set":
            need.add("handle")
        if self.held_reason == "set":
            need.add("held_reason")
        return frozenset(need)

    @property
    def settable(self) -> frozenset[str]:
        """Every column the writer may give."""
        return self.required | self.may_set


_ANY: tuple[str | None, ...] = STATES
_OUT_OF_RESERVING = frozenset({"send_started_at"})

KINDS: dict[str, EventKind] = {k.name: k for k in (
    EventKind("reserve", (None,), "reserving", requires=frozenset({"idem_key", "payload", "quota_day"}),
              may_set=frozenset({"target"})),
    # A worker's send: claimed, then its outcome.
    EventKind("send_started", ("reserving",), bumps_epoch=True, lease="take", by_worker=True,
              requires=frozenset({"send_started_at", "tries"})),
    EventKind("stale_claimed", ("reserving",), bumps_epoch=True, lease="take", by_worker=True),
    EventKind("accepted", ("reserving",), "submitted", lease="clear", handle="set", clears=frozenset({"last_error"}),
              by_worker=True, send_outcome=True),
    EventKind("not_delivered", ("reserving",), lease="clear", clears=_OUT_OF_RESERVING,
              requires=frozenset({"next_try_at"}), may_set=frozenset({"last_error"}), by_worker=True,
              send_outcome=True),
    EventKind("send_abandoned", ("reserving",), lease="clear", clears=_OUT_OF_RESERVING, by_worker=True,
              send_outcome=True),
    EventKind("remote_refused", ("reserving",), lease="clear", clears=_OUT_OF_RESERVING,
              may_set=frozenset({"last_error"}), by_worker=True, send_outcome=True),
    EventKind("remote_paused", ("reserving",), lease="clear", clears=_OUT_OF_RESERVING,
              may_set=frozenset({"last_error"}), by_worker=True, send_outcome=True),
    EventKind("invalid", ("reserving",), "failed", lease="clear", may_set=frozenset({"last_error"}), by_worker=True,
              send_outcome=True),
    EventKind("send_unknown", ("reserving",), "held", lease="clear", held_reason="set",
              may_set=frozenset({"last_error"}), by_worker=True, send_outcome=True),
    # An attempt whose reservation or release does not verify against its writer's registered key (ledger.authors).
    EventKind("decision_unverified", ("reserving",), "held", held_reason="set"),
    # The recovery pass, on a send whose worker is gone.
    EventKind("orphan_found", ("reserving",), "submitted", lease="clear", handle="set", by_worker=True),
    EventKind("orphan_held", ("reserving",), "held", lease="clear", held_reason="set", by_worker=True),
    # A poll of a submitted job, and the delivery of its result.
    EventKind("completed", ("submitted",), "done", may_set=frozenset({"result", "result_at"}), by_worker=True),
    EventKind("remote_failed", ("submitted",), "failed", may_set=frozenset({"last_error", "result", "result_at"}),
              by_worker=True),
    EventKind("handle_unknown", ("submitted",), "held", held_reason="set", by_worker=True),
    EventKind("remote_needs_person", ("submitted",), "held", held_reason="set", by_worker=True),
    EventKind("delivered", ("done",), "consumed", by_worker=True),
    # A person's decisions (and the worker's reconcile on the remote's own record): each fences what was in flight.
    EventKind("reconcile", ("held",), "submitted", bumps_epoch=True, handle="set", held_reason="clear"),
    EventKind("release", ("held", "failed"), "reserving", bumps_epoch=True, bumps_attempt=True, lease="clear",
              handle="clear", held_reason="clear", clears=frozenset({"send_started_at", "next_try_at", "last_error"})),
    EventKind("reject", ("held",), "rejected", bumps_epoch=True),
    EventKind("remediate", ("held",), "remediated", bumps_epoch=True),
    # Triage facts: the job stays where it is.
    EventKind("finding", ("held", "failed")),
    EventKind("assign", ("held", "failed"), requires=frozenset({"owner", "due_at"})),
    EventKind("candidate_dismissed", ("held",)),
    EventKind("remote_query", _ANY),
    # Facts about the remote and its evidence, on a job in any state.
    EventKind("remote_resumed", _ANY),
    EventKind("evidence", _ANY),
    EventKind("duplicate_send", _ANY),
    # Facts recorded beside the job, its row unchanged.
    EventKind("blocked_new_job", ("held",), writes_row=False),
    EventKind("notification_confirmed", _ANY, writes_row=False),
    EventKind("notification_resent_other_route", _ANY, writes_row=False),
    EventKind("policy_set", (None,), writes_row=False),
)}
"""Every event kind, by name."""


def kind(name: str) -> EventKind | None:
    """The event kind called `name`, or None for a kind the ledger does not write."""
    return KINDS.get(name)


def starts_of(name: str) -> tuple[str, ...] | None:
    """The job states event `name` may start from, in the table's order; None when it may start from any.
    Raises KeyError for a kind the table does not hold."""
    starts = KINDS[name].starts
    return None if set(starts) >= set(STATES) else tuple(s for s in starts if s is not None)


TRANSITIONS: dict[tuple[str | None, str], str] = {
    (state, k.name): to
    for k in KINDS.values() if k.writes_row
    for state in k.starts
    if (to := k.to_state(state)) is not None
}
"""(from state, event) -> to state, for every event `apply()` writes."""

WORKER_EVENTS = frozenset(k.name for k in KINDS.values() if k.by_worker)
"""Events a worker writes: they must name the epoch they hold."""

OUTCOME_KINDS = tuple(k.name for k in KINDS.values() if k.send_outcome)
"""The events a send's outcome is recorded as: the ones a journal replay writes."""

HOLD_KINDS = tuple(k.name for k in KINDS.values()
                   if k.leads_to == "held" and any(s not in (None, "held") for s in k.starts))
"""The events that hold a job (move it into `held` from another state)."""

DECISION_KINDS = tuple(k.name for k in KINDS.values() if "held" in k.starts and k.leads_to not in (None, "held"))
"""The events that end a hold (move a job out of `held`)."""

TERMINAL_STATES = tuple(s for s in STATES if not any(
    s in k.starts and k.to_state(s) != s for k in KINDS.values()))
"""The states no event leads out of."""
