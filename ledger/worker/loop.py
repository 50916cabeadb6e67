"""The pass and the loop around it: `tick` (one pass), `run_worker` (passes until stopped, waiting out outages,
woken early by webhook evidence)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ledger import store
from ledger.clock import Clock
from ledger.config import Config
from ledger.errors import (
    LedgerConflict,
    LedgerLocked,
    LedgerUnavailable,
    LedgerUnusable,
)
from ledger.heartbeat import WorkerBeat
from ledger.store import Connection
from ledger.store import evidence as evidence_store
from ledger.worker.evidence import (
    act_on_evidence,
    attribute_deliveries,
)
from ledger.worker.outcomes import (
    OutcomeNotRecorded,
    replay_journal,
)
from ledger.worker.pass_state import (
    Progress,
    RemoteCache,
    TickReport,
    worker_id,
)
from ledger.worker.poll import (
    deliver_done,
    poll_submitted,
)
from ledger.worker.send import (
    recover_stale,
    send_due,
)


def tick(
    conn: Connection,
    config: Config,
    *,
    clock: Clock,
    remotes: RemoteCache | None = None,
    owner: str | None = None,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    beat: WorkerBeat | None = None,
) -> TickReport:
    """One pass: recover stale sends, send due jobs, poll submitted ones, deliver done ones, notify.

    The pass is recorded in the worker heartbeats: on `beat` when a looping worker gives its own, else as a
    worker of one pass (kind 'tick') that is marked stopped when the pass returns or raises. On PostgreSQL
    with the host's wall clock, leases and stale sends are judged by the server's clock (store.ledger_clock).
    """
    clock = store.ledger_clock(conn, clock)
    owner = owner or worker_id()
    own = beat is None
    beat = beat or WorkerBeat(conn, clock, owner, kind="tick")
    if own:
        beat.pass_started_at = clock.now()  # a single pass is written once, when it ends
    else:
        beat.pass_started()
    try:
        report = _one_pass(conn, config, clock=clock, remotes=remotes or RemoteCache(config), owner=owner, stop=stop,
                           progress=progress)
    except BaseException as e:
        if own and not isinstance(e, (LedgerUnusable, LedgerConflict)):  # never write into a damaged file
            beat.stopped(e)
        raise
    beat.pass_ended(report.as_dict())
    if own:
        beat.stopped()
    return report


def _one_pass(
    conn: Connection, config: Config, *, clock: Clock, remotes: RemoteCache, owner: str,
    stop: threading.Event | None, progress: Progress | None,
) -> TickReport:
    from ledger.dispatch import dispatch_outbox

    report = TickReport()
    replay_journal(conn, config, clock=clock, report=report)
    attribute_deliveries(conn, config, remotes, clock=clock, report=report)
    act_on_evidence(conn, config, remotes, clock=clock, owner=owner, report=report)
    recover_stale(conn, config, remotes, clock=clock, owner=owner, report=report)
    send_due(conn, config, remotes, clock=clock, owner=owner, report=report, stop=stop, progress=progress)
    poll_submitted(conn, config, remotes, clock=clock, owner=owner, report=report, stop=stop, progress=progress)
    deliver_done(conn, config, clock=clock, owner=owner, report=report, stop=stop)
    if config.notify:
        report.notifications = dispatch_outbox(conn, config, clock=clock)
    return report


OUTAGE_BACKOFF_MAX = 30.0
"""The longest a worker waits between passes while the ledger stays locked or unavailable."""

OUTAGES: tuple[type[BaseException], ...] = (LedgerLocked, LedgerUnavailable, OutcomeNotRecorded)
"""What a looping worker waits out: the ledger locked past its timeout, its server unreachable or restarted,
a send's outcome journaled because the ledger would not take it (the next pass replays it)."""


def outage_backoff(interval: float, failures: int) -> float:
    """Seconds to wait after the `failures`-th pass in a row that met an outage: doubling from the pass
    interval (at least 0.1 s), at most OUTAGE_BACKOFF_MAX."""
    return float(min(max(interval, 0.1) * 2 ** max(failures - 1, 0), OUTAGE_BACKOFF_MAX))


def run_worker(
    conn: Connection,
    config: Config,
    *,
    clock: Clock,
    stop: threading.Event,
    interval: float = 1.0,
    on_pass: Callable[[TickReport], None] | None = None,
    on_outage: Callable[[BaseException, float], None] | None = None,
) -> int:
    """Run passes until `stop` is set; the pass under way finishes its current job first. Returns passes run.

    A pass that meets an outage (OUTAGES: the ledger locked past its timeout, its PostgreSQL server restarted
    or the session killed, an outcome journaled) does not end the worker: it waits `outage_backoff` (cut
    short by `stop`), says so through `on_outage(error, seconds)` and in its heartbeat when the ledger takes
    the write, and tries again; a PostgreSQL connection opens a new session by itself. Anything else (a
    damaged ledger, a bad config, a bug) ends it. Its heartbeat (kind 'worker') records every pass; a clean
    exit marks it stopped, and so does an error (with what it was) on its way out.
    """
    remotes = RemoteCache(config)
    owner = worker_id()
    beat = WorkerBeat(conn, clock, owner, kind="worker", interval=interval)
    passes = 0
    failures = 0
    try:
        while not stop.is_set():
            try:
                seen = evidence_store.latest_id(conn)  # evidence recorded while the pass runs wakes the next one
                report = tick(conn, config, clock=clock, remotes=remotes, owner=owner, stop=stop, beat=beat)
            except OUTAGES as e:
                failures += 1
                wait = outage_backoff(interval, failures)
                if on_outage is not None:
                    on_outage(e, wait)
                beat.waiting(e, wait)
                stop.wait(wait)
                continue
            if failures:
                failures = 0
                beat.resumed()
            passes += 1
            if on_pass:
                on_pass(report)
            try:
                wait_for_evidence(conn, interval, stop, since=seen)
            except OUTAGES:  # the next pass meets the outage and backs off
                stop.wait(interval)
    except BaseException as e:
        beat.stopped(e)
        raise
    beat.stopped()
    return passes


def wait_for_evidence(conn: Connection, seconds: float, stop: threading.Event, *, since: int) -> bool:
    """Wait up to `seconds` between passes; return early (True) when webhook evidence newer than id `since`
    is recorded (by the receiver, another process), so a delivery for a held job is acted on at once rather
    than after the poll interval. Returns False when the time ran out or `stop` was set."""
    deadline = time.monotonic() + seconds
    token = store.change_token(conn)  # before the look: a commit after it moves the token again
    if evidence_store.latest_id(conn) > since:
        return True
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not store.wait_for_change(conn, left, stop, since=token):
            return False
        token = store.change_token(conn)
        if evidence_store.latest_id(conn) > since:
            return True
