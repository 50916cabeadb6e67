"""Sending: recover stale sends, pick and send the due jobs, each only while its lease outlasts the whole request
(`send_within_window`), and `submit_now` (reserve, then send once)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ledger.clock import Clock
from ledger.config import Config
from ledger.crashpoints import crashpoint
from ledger.db import write_tx
from ledger.errors import (
    LedgerConflict,
    LedgerError,
    LedgerLocked,
    LedgerUnusable,
    ReservedNotSent,
)
from ledger.leases import Claim, claim_for_send, claim_stale
from ledger.model import Job, JobKey
from ledger.picks import START, HeldPicks, pick_due, release_picks
from ledger.redaction import Redactor
from ledger.remote_health import lift
from ledger.remotes import request_body_size
from ledger.remotes.base import Remote, RemoteStatus, SendOutcome, redact_status
from ledger.send_window import SendWindow, call_with_deadline, transfer_refusal
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.store import remote_pauses as remote_pauses_store
from ledger.store.remote_pauses import RemotePause, paused_remotes
from ledger.transitions import Applied, apply
from ledger.worker.outcomes import (
    OutcomeNotRecorded,
    commit_outcome,
)
from ledger.worker.pass_state import (
    Progress,
    RemoteCache,
    TickReport,
    worker_id,
)


def send_within_window(
    config: Config, claim: Claim, remote: Remote, while_waiting: Callable[[], None] | None = None,
) -> SendOutcome:
    """Send once through a SendWindow for this claim, waiting at most the request's total deadline.

    Nothing is written once the lease left is not more than the deadline plus the margin (`abandoned`), nor
    when the payload's transfer at `policy.min_send_rate` would outlast the margin (`invalid`, saying why).
    The deadline counts from the moment the request was allowed out; when it passes with no answer the
    window is closed, and the outcome is `unknown` (timeout) if the request went out, else `abandoned`.
    A send that finished is used whatever the clock says: time the process spent stopped does not count
    against the deadline (ledger.send_window.call_with_deadline), so a reply that reached the socket
    during a pause is read after it and its handle kept.
    `while_waiting` is called now and then on this thread while the reply is awaited (e.g. to renew picks).
    """
    policy = config.policy
    job = claim.job
    rc = config.remotes[config.operations[job.operation].remote]
    size = request_body_size(config, job.operation, job.payload, idem_key=job.idem_key, attempt=job.attempt)
    too_big = transfer_refusal(size, margin_seconds=policy.send_margin_seconds, min_send_rate=policy.min_send_rate)
    if too_big is not None:  # reserved under another config: never sent, said why (an approver may release)
        return SendOutcome("invalid", error=f"not sent: {too_big}")
    window = SendWindow(
        lease_seconds=policy.lease_seconds, deadline_seconds=rc.timeout_seconds,
        margin_seconds=policy.send_margin_seconds, claimed_at=claim.claimed_at,
    )
    slack = min(policy.send_margin_seconds / 2, 1.0)

    def limit() -> float:
        if window.checked_at is not None:
            return window.checked_at + rc.timeout_seconds + slack
        return claim.claimed_at + policy.lease_seconds - policy.send_margin_seconds

    def firm_limit() -> float:  # a request still being written is cut at its deadline, pause or not
        if window.checked_at is not None and window.sent_at is None:
            return window.checked_at + rc.timeout_seconds + slack
        return math.inf

    try:
        finished, outcome = call_with_deadline(
            lambda: remote.send(job.payload, job.idem_key, job.attempt, window), limit,
            while_waiting=while_waiting, firm_limit=firm_limit,
        )
    except BaseException:  # interrupted (a signal, a shutdown): the request in flight is reset, not left to finish
        window.close()
        raise
    if finished and outcome is not None:
        return outcome
    if window.close():  # gives up: resets the connection, so no further byte of the request leaves
        return SendOutcome("unknown", error=f"no reply within the total deadline of {rc.timeout_seconds:g} s",
                           reason="timeout", unanswered=True)
    return SendOutcome("abandoned", error="the request was never written before the deadline")


def send_one(
    conn: Connection, config: Config, key: JobKey, remote: Remote, *, clock: Clock, owner: str,
    expected_epoch: int | None = None, while_waiting: Callable[[], None] | None = None,
) -> tuple[SendOutcome | None, Applied | None]:
    """Claim a due reserving job, send it once within the send window, record the outcome.

    (None, None) if it was not due (or, given `expected_epoch`, changed since it was picked). Raises
    OutcomeNotRecorded when the outcome had to be journaled.
    """
    claim = claim_for_send(conn, config, key, owner=owner, now=clock.now(), expected_epoch=expected_epoch)
    if claim is None:
        return None, None
    crashpoint("after_send_claim")
    outcome = send_within_window(config, claim, remote, while_waiting)
    if outcome.kind == "accepted":
        crashpoint("after_remote_accept")
    applied = commit_outcome(conn, config, claim, outcome, clock=clock)
    if outcome.kind != "remote_unusable" and applied.ok:
        _lift_after_probe(conn, config, key.operation, owner=owner, now=clock.now())
    return outcome, applied


def _lift_after_probe(conn: Connection, config: Config, operation: str, *, owner: str, now: float) -> None:
    remote = config.operations[operation].remote
    if not remote_pauses_store.is_paused(conn, remote):
        return
    with write_tx(conn):
        lift(conn, config, remote, actor=owner, now=now, why="a probe send was not refused")


def recover_stale(
    conn: Connection, config: Config, remotes: RemoteCache, *, clock: Clock, owner: str, report: TickReport
) -> None:
    """Stale sends (begun, lease out, no outcome): attach a handle found by key, or hold the job."""
    now = clock.now()
    cutoff = now - config.policy.stale_reserving_seconds
    stale = jobs_store.stale_sends(conn, started_before=cutoff, lease_before=now - config.policy.send_margin_seconds)
    for key in stale:
        if key.operation not in config.operations:
            continue
        remote = remotes.for_operation(key.operation)  # built first: a remote that cannot be built claims nothing
        claim = claim_stale(conn, config, key, owner=owner, now=clock.now())
        if claim is None:
            continue
        found: RemoteStatus | None = None
        attach = remote.capabilities.search_by_key and remote.capabilities.dedupes_by_key
        if attach:
            status = remote.search(claim.job.idem_key)
            if status.state == "error":
                continue  # the search itself failed: the lease runs out and the next pass asks again
            if status.state in ("running", "completed", "failed") and status.handle:
                found = redact_status(status, Redactor.from_config(config))
        with write_tx(conn):
            if found is not None:
                applied = apply(
                    conn,
                    claim.job.key,
                    "orphan_found",
                    actor=owner,
                    now=clock.now(),
                    expected_state="reserving",
                    expected_epoch=claim.epoch,
                    detail={"handle": found.handle, "remote_state": found.state, "snapshot": found.snapshot},
                    fields={"handle": found.handle},
                    notify=config.notify,
                )
                report.orphans_found += applied.ok
            else:
                if attach:
                    reason = "send begun, no outcome recorded, and a search by key found nothing"
                elif remote.capabilities.search_by_key:
                    reason = "no handle recorded; the remote can be searched by key but does not dedupe by key"
                else:
                    reason = "no handle recorded and the remote cannot be searched"
                held_at = clock.now()
                applied = apply(
                    conn,
                    claim.job.key,
                    "orphan_held",
                    actor=owner,
                    now=held_at,
                    expected_state="reserving",
                    expected_epoch=claim.epoch,
                    detail={"cause": "worker died mid-send", "held_reason": reason},
                    fields={"held_reason": reason},
                    notify=config.notify,
                )
                report.orphans_held += applied.ok
            report.fenced += not applied.ok and applied.refusal == "fenced"


RELEASE_WAIT = 1.0
"""On an error's way out, how long giving back the pass's picks waits for the write lock (else they lapse)."""


def send_due(
    conn: Connection,
    config: Config,
    remotes: RemoteCache,
    *,
    clock: Clock,
    owner: str,
    report: TickReport,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    limit: int = 1000,
    batch: int = 20,
) -> None:
    """Send every due reserving job once (stops early, between jobs, when `stop` is set).

    Jobs are picked `batch` at a time (ledger.picks: a row per job in `picks`, not a change to the job;
    SKIP LOCKED on PostgreSQL), so workers sharing the ledger take different jobs; each picked job is
    claimed (`claim_for_send`: epoch + 1, send start, event) only right before its own send, and passed by
    when it changed since it was picked. The pass renews its picks as it goes and gives back those it did
    not send when its sends end, also after an error, except one that says the ledger is locked or
    unusable (or an outcome had to be journaled): that error is what the caller must see, and the picks
    lapse by themselves within the pick window. At most `limit` jobs per pass.
    """
    pauses = paused_remotes(conn)
    probed: set[str] = set()
    held = HeldPicks(conn, config, owner, clock)
    after = START
    done = 0
    total = jobs_store.count_due(conn, clock.now()) if progress else 0
    try:
        while done < limit and not (stop is not None and stop.is_set()):
            picked = pick_due(conn, config, owner=owner, now=clock.now(), limit=min(batch, limit - done), after=after)
            if not picked:
                break
            held.picked()
            last = picked[-1]
            after = (last.created_at, last.job_id, last.operation)
            for job in picked:
                if stop is not None and stop.is_set():
                    break
                done += 1
                held.keep()
                pauses = _send_picked(conn, config, remotes, job, clock=clock, owner=owner, report=report,
                                      pauses=pauses, probed=probed, held=held)
                if progress:
                    progress("send", done, max(total, done))
    except BaseException as e:
        if held.held and not isinstance(e, (OutcomeNotRecorded, LedgerLocked, LedgerUnusable, LedgerConflict)):
            with contextlib.suppress(LedgerError):  # never masks the error on its way out
                release_picks(conn, owner, now=clock.now(), wait=RELEASE_WAIT)
        raise
    if held.held:
        release_picks(conn, owner, now=clock.now())



def _send_picked(
    conn: Connection, config: Config, remotes: RemoteCache, job: Job, *, clock: Clock, owner: str,
    report: TickReport, pauses: dict[str, RemotePause], probed: set[str], held: HeldPicks,
) -> dict[str, RemotePause]:
    """Claim and send one picked job (unless its remote is paused), count what happened; the pauses after."""
    key = job.key
    if key.operation not in config.operations:
        return pauses
    remote_name = config.operations[key.operation].remote
    pause = pauses.get(remote_name)
    if pause is not None:
        # A paused remote gets one probe send per pass once its probe time has come, nothing else.
        if remote_name in probed or pause.probe_at > clock.now():
            return pauses
        probed.add(remote_name)
    outcome, applied = send_one(conn, config, key, remotes.for_operation(key.operation), clock=clock, owner=owner,
                                expected_epoch=job.epoch, while_waiting=held.keep)
    if outcome is None or applied is None:
        return pauses
    if outcome.kind == "remote_unusable":
        pauses = paused_remotes(conn)
    elif pause is not None and applied.ok:
        pauses.pop(remote_name, None)
    if outcome.kind == "abandoned":
        report.abandoned += applied.ok
        report.fenced += not applied.ok and applied.refusal == "fenced"
        return pauses
    report.sent += 1
    if not applied.ok:
        report.fenced += applied.refusal == "fenced"
    elif outcome.kind == "accepted":
        report.accepted += 1
    elif outcome.kind == "not_delivered":
        report.not_delivered += 1
    elif outcome.kind == "remote_unusable":
        report.remote_refused += 1
    elif outcome.kind == "invalid":
        report.invalid += 1
    else:
        report.held += 1
    return pauses


@dataclass(frozen=True)
class SubmitResult:
    """What `submit_now` did: the reservation outcome and, when it sent, the job's state after the send."""

    outcome: str
    key: JobKey
    state: str | None
    send: SendOutcome | None = None
    blocking: JobKey | None = None
    used: int = 0
    limit: int = 0
    fenced: bool = False  # this process's outcome was refused: someone else moved the job on first


def submit_now(
    conn: Connection,
    config: Config,
    operation: str,
    payload: str | dict[str, object],
    *,
    clock: Clock,
    job_id: str | None = None,
    target: str | None = None,
    actor: str = "reclaim",
    remotes: RemoteCache | None = None,
) -> SubmitResult:
    """Reserve the job (committed), then send it once at once; a duplicate or refusal sends nothing."""
    from ledger.reservation import check_operation, reserve

    check_operation(config, operation)
    # Build the adapter first: a remote that cannot be built (a missing key) must not leave a reservation.
    remote = (remotes or RemoteCache(config)).for_operation(operation)
    res = reserve(conn, config, operation, payload, clock=clock, job_id=job_id, target=target, actor=actor)
    if res.outcome != "reserved":
        state = res.job.state if res.job else None
        return SubmitResult(res.outcome, res.key, state, blocking=res.blocking, used=res.used, limit=res.limit)
    crashpoint("after_reserve_commit")
    try:
        outcome, applied = send_one(conn, config, res.key, remote, clock=clock, owner=worker_id())
    except OutcomeNotRecorded:
        raise
    except LedgerError as e:
        raise ReservedNotSent(
            f"reserved {res.key.job_id} / {res.key.operation} (committed), but not sent now: {e}; "
            "the next worker pass (reclaim tick / reclaim worker) sends it"
        ) from None
    state = jobs_store.state_of(conn, res.key)
    fenced = applied is not None and not applied.ok
    return SubmitResult("reserved", res.key, state or "reserving", send=outcome, used=res.used, limit=res.limit, fenced=fenced)
