"""Lease arithmetic and the claim that fences out stale writers.

A worker that claims a job bumps its epoch and holds a lease until `lease_until`. Every later write by
that worker names the epoch; once someone else claims the job, the old worker's writes match no row.

Workers share the due jobs out by picks (ledger.picks: a table of their own, not the job's state); each
picked job is claimed with `claim_for_send` right before its own send, and that claim ends the pick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ledger.authors import attempt_refusal
from ledger.config import Config
from ledger.db import write_tx
from ledger.errors import RowDisagrees
from ledger.model import Job, JobKey
from ledger.replay import Projection, rebuild_job
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.store import picks as picks_store
from ledger.transitions import apply


def lease_deadline(now: float, seconds: float) -> float:
    """The time a lease taken at `now` for `seconds` runs out. Raises ValueError unless seconds > 0."""
    if not seconds > 0:
        raise ValueError(f"lease length must be > 0 seconds, got {seconds!r}")
    return now + seconds


def send_is_stale(job: Job, now: float, stale_after: float, margin: float = 0.0) -> bool:
    """True when a send was begun, its lease ran out more than `margin` seconds ago, and `stale_after`
    seconds passed since it began.

    A clock that stepped back before the send began never makes a send stale. The margin is the send
    window's: a worker may still be writing its request until its lease ends, so nobody judges the send
    before `lease_until + margin`.
    """
    if job.state != "reserving" or job.send_started_at is None:
        return False
    if now < job.send_started_at:
        return False
    expired = job.lease_until is None or now >= job.lease_until + margin
    return expired and now - job.send_started_at >= stale_after


def send_is_due(job: Job, now: float) -> bool:
    """True when a `reserving` job may be claimed for a send: none under way and its next try has come."""
    return (
        job.state == "reserving"
        and job.send_started_at is None
        and (job.next_try_at is None or job.next_try_at <= now)
    )


@dataclass(frozen=True)
class Claim:
    """A lease held on a job: write with this epoch. `claimed_at` is the monotonic time of the commit."""

    job: Job
    epoch: int
    owner: str
    claimed_at: float = 0.0


def _check_row_agrees(conn: Connection, current: Job) -> None:
    """Raise RowDisagrees when the job's row says other than its events (changed outside reclaim)."""
    key = current.key
    said = rebuild_job(conn, key)
    if said != Projection(current.state, current.epoch, current.attempt):
        # A row moved by a bare UPDATE (no event) must never lead to a send: fail closed, loudly.
        told = f"{said.state} at epoch {said.epoch}, attempt {said.attempt}" if said else "no reservation"
        raise RowDisagrees(
            f"job {key.job_id!r} / {key.operation}: its row says {current.state} at epoch {current.epoch}, "
            f"attempt {current.attempt}, but its events say {told}: it was changed outside reclaim. Nothing "
            "was sent; run `reclaim verify` and restore the ledger from a backup"
        )


def _claim(
    conn: Connection, config: Config, key: JobKey, event: str, *, owner: str, now: float,
    eligible: Callable[[Job], bool], fields: Callable[[Job, float], dict[str, object]], ends_pick: bool = False,
) -> Claim | None:
    until = lease_deadline(now, config.policy.lease_seconds)
    with write_tx(conn):
        current = jobs_store.find_job(conn, key)
        if current is None or not eligible(current):
            return None
        _check_row_agrees(conn, current)
        if event == "send_started" and (unverified := attempt_refusal(conn, config, key)) is not None:
            _hold_unverified(conn, config, current, unverified, owner=owner, now=now)
            return None
        applied = apply(
            conn, key, event, actor=owner, now=now, expected_state="reserving", expected_epoch=current.epoch,
            fields={"lease_until": until, **fields(current, until)},
            detail={"attempt": current.attempt, "try": current.tries + (event == "send_started"),
                    "lease_until": until, "lease_seconds": config.policy.lease_seconds},
        )
        if ends_pick and applied.ok:
            picks_store.drop(conn, key)  # after the job's row: see ledger.picks on lock order
    job = applied.job
    assert job is not None  # read and written in one BEGIN IMMEDIATE transaction
    return Claim(job=job, epoch=job.epoch, owner=owner, claimed_at=time.monotonic())


def _hold_unverified(conn: Connection, config: Config, job: Job, unverified: tuple[int, str], *, owner: str,
                     now: float) -> None:
    """Hold a job whose attempt's authorisation does not verify (ledger.authors), naming the event; notified."""
    event_id, why = unverified
    apply(conn, job.key, "decision_unverified", actor=owner, now=now, expected_state="reserving",
          expected_epoch=job.epoch, fields={"held_reason": f"not sent: {why}"[:500]},
          detail={"event_id": event_id, "why": why, "attempt": job.attempt}, notify=config.notify)


def claim_for_send(
    conn: Connection, config: Config, key: JobKey, *, owner: str, now: float, expected_epoch: int | None = None,
) -> Claim | None:
    """Claim a due `reserving` job for one send: epoch + 1, lease, send start, event; committed on return.
    The job's pick (ledger.picks), whoever held it, is deleted in the same transaction.

    Returns None (nothing written) when the job is not due: another send is under way or was begun without an
    outcome, its next try is later, it is no longer `reserving`, another worker holds a live pick of it, or (when
    `expected_epoch` is given: the epoch it had when picked) it changed since. Returns None too, sending nothing,
    when the reservation or release behind the attempt does not verify against its writer's registered key and
    role (ledger.authors): the job is held instead, naming that event, and a notification is queued.
    """
    return _claim(
        conn, config, key, "send_started", owner=owner, now=now,
        eligible=lambda job: send_is_due(job, now) and expected_epoch in (None, job.epoch)
        and not picks_store.picked_by_other(conn, key, owner, now),
        fields=lambda job, until: {"send_started_at": now, "tries": job.tries + 1},
        ends_pick=True,
    )


def claim_stale(conn: Connection, config: Config, key: JobKey, *, owner: str, now: float) -> Claim | None:
    """Take over a stale send (begun, lease out past the margin, no outcome) for the recovery pass; epoch + 1.

    Returns None, writing nothing, when the send is not stale any more.
    """
    policy = config.policy
    return _claim(
        conn, config, key, "stale_claimed", owner=owner, now=now,
        eligible=lambda job: send_is_stale(job, now, policy.stale_reserving_seconds, policy.send_margin_seconds),
        fields=lambda job, until: {},
    )
