"""The jobs table is a projection of the events: replaying them gives every job's state, epoch, attempt.

Every change to a job goes through `transitions.apply()`, which writes the event in the same
transaction; so reading the events in order, through the event table (ledger.event_table), rebuilds what the
`jobs` table must hold. A difference means a write bypassed the state machine (or the table was edited by
hand); an event whose step the table does not allow was written or rewritten outside it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from ledger import event_table, store
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store


@dataclass(frozen=True)
class Projection:
    """What the events say a job is: its state, epoch and attempt."""

    state: str
    epoch: int
    attempt: int


@dataclass(frozen=True)
class Mismatch:
    """A job whose row disagrees with its events (or has only one of the two)."""

    key: JobKey
    from_events: Projection | None
    from_table: Projection | None


@dataclass(frozen=True)
class BadStep:
    """An event whose step the event table (ledger.event_table) does not allow, from the state its job's earlier
    events left it in."""

    event_id: int
    key: JobKey
    seq: int
    kind: str
    from_state: str | None
    """The state the job's earlier events left it in (None: no job yet)."""
    why: str

    def text(self) -> str:
        """One line naming the event, its job, the state it started from and its kind, and what is wrong."""
        start = self.from_state or "no job"
        return (f"event {self.event_id} ({self.key.job_id} / {self.key.operation} seq {self.seq}): {self.kind} from "
                f"{start} {self.why} (the event was written or rewritten outside the state machine)")


def step(cur: Projection | None, kind: str, from_state: str | None, to_state: str | None,
          epoch: int | None) -> tuple[Projection | None, str | None]:
    """One event folded through the event table onto what the job's earlier events said: what the job is after
    it, and what is wrong with the step (None: the table allows it).

    The state and epoch are the event's own (what it says it left); the attempt is the table's. An event for a
    job that no `reserve` created, or of a kind that records no job, leaves it None."""
    spec = event_table.kind(kind)
    start = cur.state if cur is not None else None
    why: str | None = None
    if spec is None:
        why = "is not an event the ledger writes"
    elif start not in spec.starts:
        why = "is not allowed by the event table"
    elif from_state is not None and from_state != start:
        why = f"is recorded as starting from {from_state}"
    elif to_state != (want := spec.to_state(start)):
        why = f"leads to {want or 'no job'}, but the event says {to_state or 'no job'}"
    elif cur is not None and epoch is not None and epoch != cur.epoch + spec.bumps_epoch:
        why = f"leaves epoch {cur.epoch + spec.bumps_epoch}, but the event says {epoch}"
    if cur is None:
        creates = spec is not None and None in spec.starts and spec.leads_to is not None
        return (Projection(state=to_state or "", epoch=epoch or 0, attempt=1) if creates else None), why
    return Projection(
        state=to_state if to_state is not None else cur.state,
        epoch=epoch if epoch is not None else cur.epoch,
        attempt=cur.attempt + (spec is not None and spec.bumps_attempt),
    ), why


def rebuild(conn: Connection, bad: list[BadStep] | None = None) -> dict[JobKey, Projection]:
    """Replay every event, in order, through the event table into each job's state, epoch and attempt.

    The state is the last event's `to_state`; the epoch the last event's epoch; the attempt counts the
    events the table says bump it. Each event whose step the table does not allow is added to `bad`, in job
    and sequence order. Events that record a fact without a job row (the ledger's policy) change nothing.
    """
    out: dict[JobKey, Projection] = {}
    for event_id, key, seq, kind, from_state, to_state, epoch in events_store.steps(conn):
        cur = out.get(key)
        folded, why = step(cur, kind, from_state, to_state, epoch)
        if why is not None and bad is not None:
            bad.append(BadStep(event_id, key, seq, kind, cur.state if cur is not None else None, why))
        if folded is not None:
            out[key] = folded
    return out


def rebuild_job(conn: Connection, key: JobKey) -> Projection | None:
    """What one job's events say it is (None when it has no `reserve` event)."""
    cur: Projection | None = None
    for kind, from_state, to_state, epoch in events_store.job_steps(conn, key):
        cur = step(cur, kind, from_state, to_state, epoch)[0] or cur
    return cur


def mismatches(conn: Connection, bad: list[BadStep] | None = None) -> list[Mismatch]:
    """Every job whose row differs from what its events rebuild, in key order (one consistent snapshot); each
    event whose step the event table does not allow is added to `bad`."""
    with contextlib.nullcontext() if conn.in_transaction else store.read_snapshot(conn):
        # both reads from one snapshot, while writers go on
        replayed = rebuild(conn, bad)
        table = {key: Projection(state=state, epoch=epoch, attempt=attempt)
                 for key, (state, epoch, attempt) in jobs_store.projections(conn).items()}
    out = [
        Mismatch(key, replayed.get(key), table.get(key))
        for key in sorted(replayed.keys() | table.keys(), key=lambda k: (k.job_id, k.operation))
        if replayed.get(key) != table.get(key)
    ]
    return out
