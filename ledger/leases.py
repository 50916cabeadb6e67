"""Lease arithmetic and the claim that fences out stale writers.

A worker that claims a job bumps its epoch and holds a lease until `lease_until`. Every later write by
that worker names the epoch; once someone else claims the job, the old worker's writes match no row.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ledger.config import Config
from ledger.db import write_tx
from ledger.model import Job, JobKey
from ledger.transitions import append_event


def lease_deadline(now: float, seconds: float) -> float:
    """The time a lease taken at `now` for `seconds` runs out. Raises ValueError unless seconds > 0."""
    if not seconds > 0:
        raise ValueError(f"lease length must be > 0 seconds, got {seconds!r}")
    return now + seconds


def lease_expired(lease_until: float | None, now: float) -> bool:
    """True when no lease is held or it ran out at or before `now` (expiry is inclusive)."""
    return lease_until is None or now >= lease_until


def send_is_stale(job: Job, now: float, stale_after: float) -> bool:
    """True when a send was begun, its lease ran out, and `stale_after` seconds passed since it began.

    A clock that stepped back before the send began never makes a send stale.
    """
    if job.state != "reserving" or job.send_started_at is None:
        return False
    if now < job.send_started_at:
        return False
    return lease_expired(job.lease_until, now) and now - job.send_started_at >= stale_after


@dataclass(frozen=True)
class Claim:
    """A lease held on a job: write with this epoch."""

    job: Job
    epoch: int
    owner: str


def claim_for_send(conn: sqlite3.Connection, config: Config, key: JobKey, *, owner: str, now: float) -> Claim | None:
    """Claim a due `reserving` job for one send: epoch + 1, lease, send start, event; committed on return.

    Returns None (nothing written) when the job is not due: another send is under way or was begun
    without an outcome, its next try is later, or it is no longer `reserving`.
    """
    until = lease_deadline(now, config.policy.lease_seconds)
    with write_tx(conn):
        row = conn.execute(
            "UPDATE jobs SET epoch = epoch + 1, lease_owner = ?, lease_until = ?, send_started_at = ?, "
            "tries = tries + 1, updated_at = ? "
            "WHERE job_id = ? AND operation = ? AND state = 'reserving' AND send_started_at IS NULL "
            "AND (next_try_at IS NULL OR next_try_at <= ?) RETURNING *",
            (owner, until, now, now, key.job_id, key.operation, now),
        ).fetchone()
        if row is None:
            return None
        job = Job.from_row(row)
        append_event(
            conn,
            key,
            at=now,
            actor=owner,
            kind="send_started",
            from_state="reserving",
            to_state="reserving",
            epoch=job.epoch,
            detail={"attempt": job.attempt, "try": job.tries, "lease_until": until},
        )
    return Claim(job=job, epoch=job.epoch, owner=owner)


def claim_stale(conn: sqlite3.Connection, config: Config, key: JobKey, *, owner: str, now: float) -> Claim | None:
    """Take over a stale send (begun, lease expired, no outcome) for the recovery pass; epoch + 1.

    Returns None, writing nothing, when the send is not stale any more.
    """
    until = lease_deadline(now, config.policy.lease_seconds)
    with write_tx(conn):
        row = conn.execute(
            "SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
        ).fetchone()
        if row is None or not send_is_stale(Job.from_row(row), now, config.policy.stale_reserving_seconds):
            return None
        row = conn.execute(
            "UPDATE jobs SET epoch = epoch + 1, lease_owner = ?, lease_until = ?, updated_at = ? "
            "WHERE job_id = ? AND operation = ? AND epoch = ? RETURNING *",
            (owner, until, now, key.job_id, key.operation, row["epoch"]),
        ).fetchone()
        job = Job.from_row(row)
    return Claim(job=job, epoch=job.epoch, owner=owner)
