"""Picks: how workers share out the due jobs between them without changing any job.

A worker takes due jobs a batch at a time (`pick_due`): each job it picks gets a row in the `picks` table
(the job's key, the worker, `picked_until`), written in one short transaction: on PostgreSQL the due rows
are read `FOR UPDATE SKIP LOCKED` (no advisory lock), on SQLite inside BEGIN IMMEDIATE. A pick is a
scheduling reservation among workers, not a change to the job: no event, nothing written to the jobs
table (no lease owner, no epoch bump, no send start), so the jobs stay exactly the projection of their
events. Another worker's pick passes a job by while it is live (`picked_until` after now, by the
ledger's clock: the server's `clock_timestamp()` on PostgreSQL with the wall clock).

Each picked job is then claimed by `ledger.leases.claim_for_send` (epoch + 1, send start, event) right
before its own send; the claim deletes the job's pick in its own transaction. Picks a pass did not send
are given back (`release_picks`) when the pass ends.

A pick lasts `pick_window(policy)`: `policy.pick_seconds` (10 s by default), at most the lease. While it
works through its batch the worker renews all its picks (`HeldPicks.keep`: before each claim and while it
waits on a send's reply), so a live worker keeps its batch however long its sends take, and a dead or
stopped worker's picks lapse at most one window after its last renewal; other workers then pick those
jobs. No pick is needed for safety: the claim (a send start only on a due job, the epoch fence) is what
keeps a job from being sent twice; picks only keep workers from colliding.

Lock order on PostgreSQL: a claim writes the job's row before it deletes the job's pick; a picker locks
job rows only with SKIP LOCKED before it writes picks; renewing and giving back skip pick rows another
transaction holds. So no two of them ever wait on each other in a cycle.
"""

from __future__ import annotations

import time

from ledger import store
from ledger.clock import Clock
from ledger.config import Config, Policy
from ledger.crashpoints import crashpoint
from ledger.db import write_tx
from ledger.errors import LedgerError
from ledger.model import Job
from ledger.store import Connection
from ledger.store import picks as picks_store

Cursor = picks_store.Cursor
"""Where a pass got to in the due jobs: (created_at, job_id, operation) of the last one picked."""

START: Cursor = (float("-inf"), "", "")

RENEW_WAIT = 0.25
"""How long a renewal waits for the write lock before it is skipped (a send is never held up by one)."""

def pick_window(policy: Policy) -> float:
    """How long a pick lasts unless renewed: policy.pick_seconds, at most the lease."""
    return min(policy.pick_seconds, policy.lease_seconds)


def pick_due(
    conn: Connection, config: Config, *, owner: str, now: float, limit: int, after: Cursor = START,
) -> list[Job]:
    """Pick up to `limit` due `reserving` jobs after `after` (oldest first) for worker `owner`, in one short
    transaction; committed on return. Returns the jobs picked, as read then.

    Each gets a `picks` row (this worker, picked_until = now + the pick window); the job itself is not
    written. Jobs another worker holds a live pick of are passed by; on PostgreSQL rows another picker is
    reading are skipped (`FOR UPDATE SKIP LOCKED`), not waited for. Returns [] only when every due job is picked
    by another worker or being picked right now, never because another worker's pick won a race. Reads first and opens no write
    transaction when nothing is due. Each job must still be claimed (`claim_for_send`) before its send.
    """
    until = now + pick_window(config.policy)
    if not picks_store.any_due(conn, owner=owner, now=now, after=after):
        return []  # nothing to pick: no write transaction for an idle pass

    def body() -> list[Job]:
        with write_tx(conn, rows_only=True):
            while True:
                jobs = picks_store.due_batch(conn, owner=owner, now=now, after=after, limit=limit)
                crashpoint("after_pick_read")
                got = picks_store.pick(conn, [j.key for j in jobs], owner, until=until, now=now)
                if got or not jobs:
                    return [j for j in jobs if j.key in got]
                # Every job read was lost to other workers' picks, committed after this statement's
                # snapshot was taken (on PostgreSQL a pick writes no job row, so the row lock did not
                # stop it). Those picks are live and seen by the next statement, which passes them by:
                # each round leaves fewer jobs to lose, and "nothing picked" means nothing was due.

    return store.retrying(conn, body)


def renew_picks(conn: Connection, config: Config, owner: str, *, now: float, wait: float | None = None) -> int:
    """Make every pick `owner` still holds last one more pick window from `now`; returns how many.

    A pick another worker took over once it lapsed is no longer `owner`'s and is not touched. Raises
    LedgerLocked when the write lock is not had within `wait` seconds (the busy timeout when None).
    """
    until = now + pick_window(config.policy)

    def body() -> int:
        with write_tx(conn, rows_only=True, wait=wait):
            return picks_store.renew(conn, owner, until=until)

    return store.retrying(conn, body)


def release_picks(conn: Connection, owner: str, *, now: float, wait: float | None = None) -> int:
    """Give back every pick `owner` holds (so other workers need not wait for them to lapse), and clear
    lapsed picks of any worker (they hold nothing back); returns how many of `owner`'s were given back."""

    def body() -> int:
        with write_tx(conn, rows_only=True, wait=wait):
            return picks_store.release(conn, owner, now=now)

    return store.retrying(conn, body)


class HeldPicks:
    """One pass's picks, kept alive while the worker works through them.

    `keep()` renews them (`renew_picks`) when a third of the pick window passed since they were written or
    last renewed (by the monotonic clock); it is called before each claim and while a send waits on its
    reply. A renewal that cannot get the write lock within RENEW_WAIT, or fails, is skipped: the picks may
    then lapse and other workers take those jobs, which is all a lapse ever does.
    """

    def __init__(self, conn: Connection, config: Config, owner: str, clock: Clock) -> None:
        self.conn = conn
        self.config = config
        self.owner = owner
        self.clock = clock
        self.every = pick_window(config.policy) / 3
        self.held = False
        """True once this pass picked something (so there may be picks to give back)."""
        self._renewed_at = 0.0

    def picked(self) -> None:
        """Note that picks were just written (their window starts now)."""
        self.held = True
        self._renewed_at = time.monotonic()

    def keep(self) -> None:
        """Renew this worker's picks if a third of the window passed since the last write (best effort)."""
        if not self.held or time.monotonic() - self._renewed_at < self.every:
            return
        try:
            renew_picks(self.conn, self.config, self.owner, now=self.clock.now(), wait=RENEW_WAIT)
        except LedgerError:
            pass  # not renewed: the picks may lapse and other workers take those jobs
        self._renewed_at = time.monotonic()
