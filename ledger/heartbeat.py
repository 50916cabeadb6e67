"""Worker liveness: each worker upserts one heartbeat row as it runs; `status` and the console read them.

A heartbeat is not an event (a row a pass would flood the audit chain): it is a plain upsert of one row per
worker (`worker_id`), each in its own short BEGIN IMMEDIATE transaction. A `worker` records when it started,
each pass's start and end with the pass's counters, and that it stopped when it exits cleanly; a `tick` is a
worker of one pass. While a worker has nothing to do it writes at most every HEARTBEAT_SECONDS, so an idle
worker does not keep the ledger busy; a pass that did something is always recorded. A heartbeat never holds
up or fails a pass: when the ledger stays locked for HEARTBEAT_WAIT seconds (or cannot be written) it is
skipped, and the next one carries the same facts.

Silence: when no worker pass started or ended for `policy.worker_silence_seconds` (default 300), nothing is
sending, polling or delivering; `reclaim status` and the console header say so.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from ledger.clock import Clock, span
from ledger.db import write_tx
from ledger.errors import LedgerError
from ledger.store import Connection
from ledger.store import heartbeats as heartbeats_store
from ledger.store.heartbeats import Heartbeat

HEARTBEAT_SECONDS = 5.0
"""While idle, a worker writes its heartbeat at most this often (a pass that did something always writes)."""
HEARTBEAT_WAIT = 1.0
"""How long a heartbeat waits for the write lock before it is skipped (a pass is never held up by one)."""
KEEP_STOPPED_SECONDS = 86_400.0
"""Rows of workers that stopped (every `tick` stops) are deleted this long after their last write."""
KEEP_SILENT_SECONDS = 7 * 86_400.0
"""Rows still marked running but silent this long (a killed process) are deleted too."""


@cache
def reclaim_version() -> str:
    """The installed reclaim's version, or 'unknown'."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reclaim")
    except PackageNotFoundError:
        return "unknown"


class WorkerBeat:
    """One worker's heartbeat: `pass_started`, `pass_ended` and `stopped` upsert its row (best effort)."""

    def __init__(
        self, conn: Connection, clock: Clock, worker_id: str, *, kind: str, interval: float | None = None,
        every: float = HEARTBEAT_SECONDS,
    ) -> None:
        self.conn = conn
        self.clock = clock
        self.worker_id = worker_id
        self.kind = kind
        self.interval = interval
        self.every = every
        self.started_at = clock.now()
        self.passes = 0
        self.pass_started_at: float | None = None
        self.pass_ended_at: float | None = None
        self.report: Mapping[str, object] = {}
        self.error: str | None = None
        self.running = True
        self.stopped_at: float | None = None
        self.written_at: float | None = None
        """When the row was last written (clock time), or None before the first write."""

    def _due(self, now: float) -> bool:
        return self.written_at is None or now - self.written_at >= self.every

    def pass_started(self) -> bool:
        """Note that a pass begins now; written when the row is new or has not been written for a while."""
        now = self.clock.now()
        self.pass_started_at = now  # the previous pass's end stays: a start after it means a pass under way
        return self._write(now) if self._due(now) else False

    def pass_ended(self, report: Mapping[str, object]) -> bool:
        """Note that the pass ended with these counters; written when it did something, or now and then."""
        now = self.clock.now()
        self.passes += 1
        self.pass_ended_at = now
        self.report = dict(report)
        did_something = any(bool(v) for v in report.values())
        return self._write(now) if did_something or self._due(now) else False

    def waiting(self, error: BaseException, retry_in: float) -> bool:
        """Note that the ledger refused the last pass (locked, or its server unavailable) and the worker waits
        `retry_in` seconds before the next; written if the ledger takes it now (best effort, never raises)."""
        self.error = f"waiting for the ledger, next try in {retry_in:.3g} s: {describe(error)}"
        try:
            now = self.clock.now()  # the server's clock on PostgreSQL: it may be the thing that is down
        except LedgerError:
            return False
        return self._write(now)

    def resumed(self) -> bool:
        """Note that a pass went through again after waiting for the ledger (clears the waiting note)."""
        if self.error is None:
            return False
        self.error = None
        return self._write(self.clock.now())

    def stopped(self, error: BaseException | None = None) -> bool:
        """Mark the worker stopped (with what stopped it, when it was an error); always written."""
        now = self.clock.now()
        self.running = False
        self.stopped_at = now
        if error is not None:
            self.error = describe(error)
        return self._write(now, prune=True)

    def _write(self, now: float, prune: bool = False) -> bool:
        """Upsert the row in one short transaction; False (nothing written) when the ledger would not take it."""
        last_pass = max((t for t in (self.pass_started_at, self.pass_ended_at) if t is not None), default=None)
        beat = Heartbeat(
            worker_id=self.worker_id, host=socket.gethostname(), pid=os.getpid(), version=reclaim_version(),
            kind=self.kind, interval=self.interval, started_at=self.started_at, pass_started_at=self.pass_started_at,
            pass_ended_at=self.pass_ended_at, last_pass_at=last_pass, passes=self.passes, report=dict(self.report),
            error=self.error, running=self.running, stopped_at=self.stopped_at, updated_at=now,
        )
        try:
            with write_tx(self.conn, wait=HEARTBEAT_WAIT):
                heartbeats_store.write(self.conn, beat)
                if prune:
                    heartbeats_store.prune(self.conn, stopped_before=now - KEEP_STOPPED_SECONDS,
                                           silent_before=now - KEEP_SILENT_SECONDS)
        except LedgerError:
            return False
        self.written_at = now
        return True


def describe(error: BaseException) -> str:
    """What stopped a worker, in one line: a ledger error's own message, else the exception's type only."""
    if isinstance(error, LedgerError):
        return f"{type(error).__name__}: {str(error)[:300]}"
    return type(error).__name__


# -- reading ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Liveness:
    """Whether workers are passing, at one instant: the figures `status` and the console header show."""

    workers: int
    """Workers marked running and heard from within the threshold."""
    unresponsive: int
    """Workers marked running but silent past the threshold (killed, hung, or their host is down)."""
    last_pass_at: float | None
    age: float | None
    """Seconds since the last pass started or ended (None: no pass recorded)."""
    silence_seconds: float

    @property
    def silent(self) -> bool:
        """True when no worker pass started or ended within the threshold (or none ever did)."""
        return self.age is None or self.age > self.silence_seconds

    def summary(self) -> str:
        """'2 workers, last pass 3 s ago', or 'no worker pass for 6 min' when silent."""
        if self.age is None:
            text = "no worker pass recorded yet"
        elif self.silent:
            text = f"no worker pass for {duration(self.age)}"
        elif self.workers:
            text = f"{_workers(self.workers)}, last pass {duration(self.age)} ago"
        else:
            text = f"no worker running, last pass {duration(self.age)} ago (a tick)"
        if self.unresponsive:
            text += f"; {self.unresponsive} marked running but silent"
        return text

    def short(self) -> str:
        """The header's form: '2 workers · 3s', 'no worker pass 6m', 'no worker pass yet'."""
        if self.age is None:
            return "no worker pass yet"
        if self.silent:
            return f"no worker pass {short_age(self.age)}"
        return f"{_workers(self.workers)} · {short_age(self.age)}"


def _workers(n: int) -> str:
    return f"{n} worker{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class WorkerBoard:
    """What the ledger says about its workers at one read: those marked running, the newest rows, the last pass."""

    running: tuple[Heartbeat, ...]
    recent: tuple[Heartbeat, ...]
    last_pass_at: float | None

    def liveness(self, now: float, silence_seconds: float) -> Liveness:
        """The figures at `now` (no read: a board read once can be judged again as time passes)."""
        live = sum(1 for h in self.running if h.state(now, silence_seconds) == "running")
        age = max(now - self.last_pass_at, 0.0) if self.last_pass_at is not None else None
        return Liveness(live, len(self.running) - live, self.last_pass_at, age, silence_seconds)


def read_board(conn: Connection, recent: int = 10) -> WorkerBoard:
    """Read the workers marked running, the `recent` newest rows and the last pass time (indexed reads)."""
    return WorkerBoard(tuple(heartbeats_store.running(conn)), tuple(heartbeats_store.newest(conn, recent)),
                       heartbeats_store.last_pass_at(conn))


def duration(seconds: float) -> str:
    """'3 s', '5 min', '2 h 05 min', '3 d 04 h'."""
    return span(seconds, words=True)


def short_age(seconds: float) -> str:
    """'3s', '5m', '2h05m', '3d04h'."""
    return span(seconds, join="")
