"""The jobs table is a projection of the events: replaying them gives every job's state, epoch, attempt.

Every change to a job goes through `transitions.apply()`, which writes the event in the same
transaction; so reading the events in order rebuilds what the `jobs` table must hold. A difference
means a write bypassed the state machine (or the table was edited by hand).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.model import JobKey
from ledger.store import Connection


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


def _fold(cur: Projection | None, kind: str, to_state: str | None, epoch: int | None) -> Projection | None:
    """One event applied to what the job's earlier events said."""
    if cur is None:
        return Projection(state=to_state or "", epoch=epoch or 0, attempt=1) if kind == "reserve" else None
    return Projection(
        state=to_state if to_state is not None else cur.state,
        epoch=epoch if epoch is not None else cur.epoch,
        attempt=cur.attempt + (kind == "release"),
    )


def rebuild(conn: Connection) -> dict[JobKey, Projection]:
    """Replay every event, in order, into each job's state, epoch and attempt.

    The state is the last event's `to_state`; the epoch the last event's epoch; the attempt counts the
    releases. Events that record a fact without a job row (none today) are ignored.
    """
    out: dict[JobKey, Projection] = {}
    rows = conn.execute(
        "SELECT job_id, operation, kind, to_state, epoch FROM events ORDER BY job_id, operation, seq"
    )
    for job_id, operation, kind, to_state, epoch in rows:
        key = JobKey(job_id, operation)
        folded = _fold(out.get(key), kind, to_state, epoch)
        if folded is not None:
            out[key] = folded
    return out


def rebuild_job(conn: Connection, key: JobKey) -> Projection | None:
    """What one job's events say it is (None when it has no `reserve` event)."""
    cur: Projection | None = None
    rows = conn.execute(
        "SELECT kind, to_state, epoch FROM events WHERE job_id = ? AND operation = ? ORDER BY seq",
        (key.job_id, key.operation),
    )
    for kind, to_state, epoch in rows:
        cur = _fold(cur, kind, to_state, epoch) or cur
    return cur


def mismatches(conn: Connection) -> list[Mismatch]:
    """Every job whose row differs from what its events rebuild, in key order (one consistent snapshot)."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")  # both reads from one snapshot, while writers go on
    try:
        events = rebuild(conn)
        table = {
            JobKey(r[0], r[1]): Projection(state=r[2], epoch=r[3], attempt=r[4])
            for r in conn.execute("SELECT job_id, operation, state, epoch, attempt FROM jobs")
        }
    finally:
        if own:
            conn.execute("COMMIT")
    out = [
        Mismatch(key, events.get(key), table.get(key))
        for key in sorted(events.keys() | table.keys(), key=lambda k: (k.job_id, k.operation))
        if events.get(key) != table.get(key)
    ]
    return out
