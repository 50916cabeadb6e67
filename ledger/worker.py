"""The worker's pass: recover stale sends, send due jobs, poll submitted ones, deliver results.

No network call happens inside a transaction: each step claims or reads in one short transaction,
talks to the remote with none open, then records the outcome in another, naming the epoch it holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ledger import evidence, foreign, journal, queries, store
from ledger.clock import Clock
from ledger.config import Config
from ledger.crashpoints import crashpoint
from ledger.db import write_tx
from ledger.errors import (
    LedgerConflict,
    LedgerError,
    LedgerLocked,
    LedgerUnavailable,
    LedgerUnusable,
    ReservedNotSent,
)
from ledger.heartbeat import WorkerBeat
from ledger.leases import Claim, claim_for_send, claim_stale
from ledger.model import Evidence, Job, JobKey
from ledger.picks import START, HeldPicks, pick_due, release_picks
from ledger.redaction import Redactor
from ledger.remote_health import lift, record_refusal
from ledger.remotes import remote_for, request_body_size
from ledger.remotes.base import Remote, RemoteStatus, SendOutcome, redact_outcome, redact_status
from ledger.send_window import SendWindow, call_with_deadline, transfer_refusal
from ledger.sink import deliver_to_folder
from ledger.store import Connection
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.store.remote_pauses import RemotePause, paused_remotes
from ledger.transitions import Applied, apply

Progress = Callable[[str, int, int], None]


def worker_id() -> str:
    """A name for this worker process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class TickReport:
    """What one pass did, by step."""

    sent: int = 0
    accepted: int = 0
    not_delivered: int = 0
    invalid: int = 0
    held: int = 0
    polled: int = 0
    completed: int = 0
    failed: int = 0
    delivered: int = 0
    orphans_found: int = 0
    orphans_held: int = 0
    fenced: int = 0
    abandoned: int = 0
    remote_refused: int = 0
    journal_replayed: int = 0
    journal_kept: int = 0
    evidence_polled: int = 0
    evidence_attributed: int = 0
    foreign: int = 0  # deliveries of another application's interactions, registered foreign (ledger.foreign)
    duplicates_cancelled: int = 0
    reconciled_by_evidence: int = 0
    duplicates: int = 0
    notifications: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the counters."""
        return dict(self.__dict__)


class RemoteCache:
    """One adapter per operation, built on first use."""

    def __init__(self, config: Config, factory: Callable[[Config, str], Remote] = remote_for) -> None:
        self.config = config
        self.factory = factory
        self._by_remote: dict[str, Remote] = {}
        self._lock = threading.Lock()

    def for_operation(self, operation: str) -> Remote:
        """The adapter for `operation`'s remote."""
        name = self.config.operations[operation].remote
        with self._lock:
            if name not in self._by_remote:
                self._by_remote[name] = self.factory(self.config, operation)
            return self._by_remote[name]

    def for_remote(self, name: str) -> Remote | None:
        """The adapter for the remote called `name`, or None when no declared operation uses it."""
        operation = next((op for op, oc in self.config.operations.items() if oc.remote == name), None)
        return self.for_operation(operation) if operation is not None else None


def _backoff(config: Config, tries: int) -> float:
    return float(min(config.policy.retry_backoff_seconds * (2 ** max(tries - 1, 0)), 3600.0))


class OutcomeNotRecorded(LedgerError):
    """A send's outcome could not be committed; it was journaled (or, last resort, printed)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def record_send_outcome(
    conn: Connection, config: Config, claim: Claim, outcome: SendOutcome, *, now: float,
    journaled: journal.OutcomeRecord | None = None,
) -> Applied:
    """Record how a send ended, as the claim's epoch; a fenced write changes nothing and is counted.

    `journaled` names the journal record this outcome is replayed from, kept in the event's detail.
    Every secret the config names is replaced in the outcome's text before anything is written.
    """
    outcome = redact_outcome(outcome, Redactor.from_config(config))
    job = claim.job
    remote = config.operations[job.operation].remote if job.operation in config.operations else None
    detail: dict[str, object] = {"attempt": job.attempt, "try": job.tries}
    if journaled is not None:
        detail["journaled"] = {"at": journaled.at, "cause": journaled.cause, "owner": journaled.owner}
    fields: dict[str, object]
    paused = False
    if outcome.kind == "accepted":
        event, fields = "accepted", {"handle": outcome.handle}
        detail["handle"] = outcome.handle
    elif outcome.kind == "not_delivered":
        wait = outcome.retry_after if outcome.retry_after is not None else _backoff(config, job.tries)
        nxt = now + wait
        event = "not_delivered"
        fields = {"next_try_at": nxt, "last_error": outcome.error}
        detail.update(error=outcome.error, next_try_at=nxt, retry_after=outcome.retry_after)
    elif outcome.kind == "abandoned":
        event, fields = "send_abandoned", {}
        detail.update(why=outcome.error, sent=False)
    elif outcome.kind == "remote_unusable":
        # Due at once, but the remote's pause holds every send back until a probe passes or a resume.
        event = "remote_refused"
        fields = {"last_error": outcome.error}
        detail.update(error=outcome.error, reason=outcome.reason, remote=remote)
    elif outcome.kind == "invalid":
        event, fields = "invalid", {"last_error": outcome.error}
        detail["error"] = outcome.error
    else:
        reason = f"send outcome unknown ({outcome.reason or 'error'})"
        event = "send_unknown"
        fields = {"last_error": outcome.error, "held_reason": reason}
        detail.update(error=outcome.error, cause=outcome.reason, held_reason=reason)
        if outcome.unanswered:
            detail["may_arrive_until"] = arrival_deadline(config, now)
    with write_tx(conn):
        if outcome.kind == "remote_unusable" and remote is not None:
            current = conn.execute(
                "SELECT epoch FROM jobs WHERE job_id = ? AND operation = ?", (job.job_id, job.operation)
            ).fetchone()
            if current is not None and current[0] == claim.epoch:
                paused = record_refusal(
                    conn, config, remote, job.key, reason=outcome.reason or "the remote refuses every job",
                    error=outcome.error, now=now,
                )
                if paused:
                    event = "remote_paused"
        return apply(
            conn,
            job.key,
            event,
            actor=claim.owner,
            now=now,
            expected_state="reserving",
            expected_epoch=claim.epoch,
            detail=detail,
            fields=fields,
            notify=config.notify,
        )


def arrival_deadline(config: Config, held_at: float) -> float:
    """Until when the request of a send held at `held_at` for want of an answer could still reach the remote: the
    send margin past the hold. The send was given up and its connection reset before the hold
    (ledger.remotes.abort); what had already left arrives within the margin. Recorded on the hold event as
    `may_arrive_until`: release, reject and remediate wait for it (ledger.triage).

    A send whose worker was found gone (`orphan_held`) records none: recovery acts only past the claim's lease
    plus the margin, while a live worker gives up before its lease minus the margin, so that moment has passed
    (a worker killed resets its connection as it dies; one stopped and resumed is cut on resuming)."""
    return held_at + config.policy.send_margin_seconds


def commit_outcome(
    conn: Connection, config: Config, claim: Claim, outcome: SendOutcome, *, clock: Clock
) -> Applied:
    """Record a send's outcome; never lose it.

    A lock past the timeout, a full disk or an I/O error is retried with backoff for up to
    `policy.outcome_retry_seconds` (never past the lease), then the outcome is appended and fsynced to
    the journal beside the ledger, and OutcomeNotRecorded is raised with the ledger error's exit code.
    When even the journal cannot take it, one stderr line carries the job key and the handle. Secrets the
    config names are replaced first, so neither the journal nor that line holds one.
    """
    outcome = redact_outcome(outcome, Redactor.from_config(config))
    left = claim.claimed_at + config.policy.lease_seconds - time.monotonic()
    deadline = time.monotonic() + max(min(config.policy.outcome_retry_seconds, left), 0.0)
    pause = 0.05
    while True:
        try:
            return record_send_outcome(conn, config, claim, outcome, now=clock.now())
        except (LedgerLocked, LedgerUnusable, LedgerConflict) as e:
            error: BaseException = e
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
    code = error.exit_code if isinstance(error, LedgerError) else LedgerUnusable.exit_code
    job = claim.job
    what = f"{outcome.kind}" + (f", handle {outcome.handle}" if outcome.handle else "")
    record = journal.OutcomeRecord(
        job_id=job.job_id, operation=job.operation, epoch=claim.epoch, owner=claim.owner, attempt=job.attempt,
        tries=job.tries, kind=outcome.kind, handle=outcome.handle, error=outcome.error, reason=outcome.reason,
        retry_after=outcome.retry_after, at=store.host_clock(clock).now(), cause=str(error)[:300],
    )
    ledger = _ledger_file(conn)
    try:
        path = journal.append(ledger, record)
    except journal.JournalFull as full:
        print(
            f"reclaim: UNRECORDED send outcome for job {job.job_id!r} / {job.operation} epoch {claim.epoch}: "
            f"{what}; the ledger refused it ({error}) and the journal too ({full}); record it by hand",
            file=sys.stderr, flush=True,
        )
        raise OutcomeNotRecorded(f"{error}; the send's outcome ({what}) is on stderr only", code) from None
    raise OutcomeNotRecorded(
        f"{error}; the send's outcome ({what}) for job {job.job_id} / {job.operation} is journaled in {path} "
        "and the next pass records it",
        code,
    ) from None


def _ledger_file(conn: Connection) -> str:
    try:
        return store.ledger_file(conn)
    except LedgerError:
        return conn.ledger_name


def replay_journal(conn: Connection, config: Config, *, clock: Clock, report: TickReport) -> None:
    """Record every outcome the journal holds, idempotently by (job, epoch), then clear it.

    The journal is allocated first when it is missing or short (deleted, a migrated ledger, a PostgreSQL
    ledger's host-side journal). An outcome whose epoch moved on is kept as a fenced write (evidence); one
    already recorded is skipped. A record that cannot be recorded now (its operation is not declared in this
    config, or its job row is missing) is never dropped: it stays in the journal, is counted in
    `report.journal_kept`, and `reclaim status` lists it. A ledger that still refuses the writes leaves the
    journal as it is, for the next pass.
    """
    ledger = _ledger_file(conn)
    journal.reserve_space(ledger)
    if not journal.journal_path(ledger).exists():
        return
    with journal.replaying(ledger) as records:
        for rec in records:
            if journal.kept_reason(conn, config, rec) is not None:
                records.keep(rec)
                report.journal_kept += 1
                continue
            row = conn.execute(
                "SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (rec.job_id, rec.operation)
            ).fetchone()
            job = Job.from_row(row)
            job = dataclasses.replace(job, attempt=rec.attempt, tries=rec.tries)
            claim = Claim(job=job, epoch=rec.epoch, owner=rec.owner, claimed_at=0.0)
            outcome = SendOutcome(rec.kind, handle=rec.handle, error=rec.error, reason=rec.reason,  # type: ignore[arg-type]
                                  retry_after=rec.retry_after)
            applied = record_send_outcome(conn, config, claim, outcome, now=clock.now(), journaled=rec)
            report.journal_replayed += applied.ok
            report.fenced += not applied.ok and applied.refusal == "fenced"


ATTRIBUTION_BATCH = 200
"""Deliveries a pass attributes at most: the oldest half and the newest half of those waiting, so a flood of
another application's deliveries neither starves the old ones nor keeps a fresh one of ours waiting a pass."""


def attribute_deliveries(
    conn: Connection, config: Config, remotes: RemoteCache, *, clock: Clock, report: TickReport
) -> None:
    """Give each webhook delivery that names no job an owner, from the interaction's own record.

    A delivery names only an interaction id. When the id has since become a job's handle, that job owns
    it; otherwise the interaction is fetched by id (one GET, `poll_concurrency` at a time) and its `labels` name
    the idem key and attempt. The owner gets a new evidence record (append-only: the delivery's own record stays,
    marked "attributed"), which `act_on_evidence` then acts on. A record whose labels name no idem key of this
    ledger is another application's: registered **foreign** once (ledger.foreign), never an orphan; its later
    deliveries are only counted by the receiver. An interaction the remote no longer knows, or whose record echoes
    no labels, stays orphan evidence with the reason and what its record says of when it was created and its model
    (a held job lists it as a candidate: ledger.candidates). A GET that fails is tried again next pass.
    """
    _prune_foreign(conn, config, clock)
    waiting = _waiting_deliveries(conn)
    asked: list[tuple[Evidence, Remote]] = []  # (delivery, the remote to GET it from)
    for ev in waiting:
        assert ev.handle is not None
        owner = jobs_store.handle_owner(conn, ev.handle)
        if owner is not None:
            job = _read_job(conn, owner)
            if job is None:
                _handled(conn, ev.id, "orphan: its job is gone", clock)
                continue
            _attribute(conn, ev, job, job.attempt, "handle", clock, report)
            continue
        remote = remotes.for_remote(str(ev.detail.get("remote", "")))
        if remote is None:
            _handled(conn, ev.id, "orphan: no declared operation uses the remote that signed it", clock)
            continue
        asked.append((ev, remote))
    if not asked:
        return
    once = {ev.handle: remote for ev, remote in asked}  # one GET per interaction, however many deliveries name it
    with ThreadPoolExecutor(max_workers=max(1, min(config.policy.poll_concurrency, len(once)))) as pool:
        read = dict(zip(once, pool.map(lambda item: item[1].lookup(item[0] or ""), once.items()), strict=True))
    for ev, _remote in asked:
        status = read[ev.handle]
        if status.state == "error":
            continue  # the remote could not be asked: try again next pass
        if status.state == "not_found":
            _handled(conn, ev.id, f"orphan: the remote no longer knows {ev.handle}", clock, record={})
            continue
        idem, attempt, where = evidence.owner_of_record(status.snapshot)
        job = _job_by_idem(conn, idem) if idem is not None else None
        if job is not None:
            _attribute(conn, ev, job, attempt, str(where), clock, report)
            continue
        if idem is None and not foreign.is_foreign(status.snapshot, idem):
            _handled(conn, ev.id, "orphan: the interaction's record names no idem key "
                     "(its labels were not echoed)", clock, record=evidence.what_record_says(status.snapshot))
            continue
        why = ("foreign: its labels name no idem key (another application's interaction)" if idem is None
               else f"foreign: idem key {idem} is not in this ledger (another application's or ledger's)")
        with write_tx(conn):
            evidence_store.mark_handled(conn, ev.id, why, clock.now())
            foreign.register(conn, interaction_id=ev.handle or "", remote=str(ev.detail.get("remote", "")),
                             labels=status.snapshot.get("labels"), evidence_id=ev.id, seen_at=ev.at)
        report.foreign += 1


def _waiting_deliveries(conn: Connection) -> list[Evidence]:
    """The deliveries this pass attributes: the oldest and the newest of those waiting (ATTRIBUTION_BATCH in all),
    oldest first."""
    half = ATTRIBUTION_BATCH // 2
    oldest = evidence_store.unattributed(conn, limit=half)
    newest = evidence_store.unattributed(conn, limit=half, newest=True) if len(oldest) == half else []
    seen = {ev.id for ev in oldest}
    return oldest + sorted((ev for ev in newest if ev.id not in seen), key=lambda ev: ev.id)


def _prune_foreign(conn: Connection, config: Config, clock: Clock) -> None:
    """Forget foreign interactions not seen for `foreign_retention_days` (a read first: most passes write nothing)."""
    before = clock.now() - config.policy.foreign_retention_days * 86_400
    oldest = evidence_store.foreign_oldest_seen(conn)
    if oldest is not None and oldest < before:
        with write_tx(conn):
            evidence_store.prune_foreign(conn, before)


def _attribute(
    conn: Connection, ev: Evidence, job: Job, attempt: int | None, how: str, clock: Clock, report: TickReport
) -> None:
    """Record delivery `ev` as `job`'s evidence (a new record; `ev` marked attributed) and tell the job."""
    now = clock.now()
    with write_tx(conn):
        new_id = evidence_store.record(
            conn, at=now, source="webhook", idem_key=job.idem_key, attempt=attempt, handle=ev.handle,
            remote_state=ev.remote_state, job=job.key, ref=ev.ref,
            detail={**ev.detail, "attributed_from": ev.id, "attributed_by": how},
        )
        current = _read_job(conn, job.key)
        assert current is not None
        apply(conn, job.key, "evidence", actor="reclaim", now=now, expected_state=current.state,
              detail={"source": "webhook", "webhook_id": ev.ref, "type": ev.detail.get("type"),
                      "handle": ev.handle, "attempt": attempt, "evidence_id": new_id, "attributed_by": how})
        evidence_store.mark_handled(conn, ev.id, f"attributed to {job.job_id} / {job.operation} "
                              f"(evidence {new_id}, by {how})", now)
    report.evidence_attributed += 1


def _read_job(conn: Connection, key: JobKey) -> Job | None:
    row = conn.execute("SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)).fetchone()
    return Job.from_row(row) if row is not None else None


def _job_by_idem(conn: Connection, idem: str) -> Job | None:
    row = conn.execute("SELECT * FROM jobs WHERE idem_key = ? LIMIT 1", (idem,)).fetchone()
    return Job.from_row(row) if row is not None else None


CLOSED_BY_A_PERSON = frozenset({"rejected", "remediated"})
"""States a person closed without a re-send: an interaction for them that reaches the remote is a duplicate."""


def act_on_evidence(
    conn: Connection, config: Config, remotes: RemoteCache, *, clock: Clock, owner: str, report: TickReport
) -> None:
    """Act on webhook evidence for a known job that no pass has handled yet (see ledger.evidence).

    A submitted job named by it is polled at once. A held job with no handle is reconciled once a GET of
    the interaction shows the job's idem key and attempt in its own record (actor `reclaim`, the webhook id
    in the reason), or gets a finding by `reclaim` when `reconcile_on_evidence` is off. An interaction
    other than the job's own for the same idem key, one for a superseded attempt, or one that reached the
    remote after a person rejected or remediated the job is a duplicate send: recorded on the job,
    cancelled while it runs (when the remote's record is this job's), never delivered. Evidence for a send
    still under way waits for the next pass.
    """
    for ev in list(evidence_store.unhandled(conn)):
        assert ev.job is not None
        job = _read_job(conn, ev.job)
        if job is None or ev.job.operation not in config.operations or not ev.handle:
            _handled(conn, ev.id, "nothing to do", clock)
            continue
        if job.state == "reserving" and job.send_started_at is not None:
            continue  # a send is under way or awaits recovery: decide once it has an outcome
        remote = remotes.for_operation(job.operation)
        superseded = ev.attempt is not None and ev.attempt < job.attempt
        after_a_person = job.state in CLOSED_BY_A_PERSON and ev.handle != job.handle
        if (job.handle and ev.handle != job.handle) or superseded or after_a_person:
            _duplicate(conn, config, job, ev, remote, clock=clock, owner=owner, report=report)
        elif job.state == "submitted" and ev.handle == job.handle:
            status = remote.lookup(job.handle)
            with write_tx(conn):
                record_poll(conn, config, job, status, actor=owner, now=clock.now())
                evidence_store.mark_handled(conn, ev.id, f"polled: {status.state}", clock.now())
            report.evidence_polled += 1
        elif job.state == "held" and not job.handle and ev.attempt in (None, job.attempt):
            _reconcile_from_evidence(conn, config, job, ev, remote, clock=clock, report=report)
        else:
            _handled(conn, ev.id, f"recorded (job {job.state})", clock)


def _handled(conn: Connection, evidence_id: int, outcome: str, clock: Clock,
             record: dict[str, object] | None = None) -> None:
    with write_tx(conn):
        evidence_store.mark_handled(conn, evidence_id, outcome, clock.now(), record)


def _reconcile_from_evidence(
    conn: Connection, config: Config, job: Job, ev: Evidence, remote: Remote, *, clock: Clock,
    report: TickReport,
) -> None:
    from ledger.triage import verify_handle

    assert ev.handle is not None
    why = verify_handle(config, job, ev.handle, remote, attempt=job.attempt)
    if why is not None and "could not be asked" in why:
        return  # the GET failed: ask again next pass
    now = clock.now()
    with write_tx(conn):
        if why is not None:
            evidence_store.mark_handled(conn, ev.id, f"not reconciled: {why}", now)
            return
        if jobs_store.handle_owner(conn, ev.handle) not in (None, job.key):
            evidence_store.mark_handled(conn, ev.id, "not reconciled: the handle belongs to another job", now)
            return
        reason = (f"webhook {ev.ref}: the remote's own record {ev.handle} carries this job's idem key "
                  f"(checked by GET); {ev.remote_state}")
        if config.policy.reconcile_on_evidence:
            applied = apply(
                conn, job.key, "reconcile", actor="reclaim", now=now, expected_state="held",
                expected_epoch=job.epoch,
                detail={"handle": ev.handle, "reason": reason, "verified": True, "evidence_id": ev.id},
                fields={"handle": ev.handle}, notify=config.notify,
            )
            report.reconciled_by_evidence += applied.ok
            outcome = "reconciled" if applied.ok else f"not reconciled: {applied.refusal}"
        else:
            category = "completed_reply_lost" if ev.remote_state == "completed" else "in_progress"
            apply(
                conn, job.key, "finding", actor="reclaim", now=now, expected_state="held",
                detail={"category": category, "note": reason, "suggested_handle": ev.handle,
                        "evidence_id": ev.id, "query_event_id": None, "snapshot": None},
            )
            outcome = "finding recorded"
        evidence_store.mark_handled(conn, ev.id, outcome, now)


def _duplicate(
    conn: Connection, config: Config, job: Job, ev: Evidence, remote: Remote, *, clock: Clock,
    owner: str, report: TickReport,
) -> None:
    """Record a second interaction for the job's idem key; cancel it while it runs, but only when the
    remote's own record names this job's idem key and the handle is no other job's. A later delivery about an
    interaction already recorded as this job's duplicate (its cancellation, its end) records nothing new."""
    assert ev.handle is not None
    if any(e.kind == "duplicate_send" and e.detail.get("handle") == ev.handle
           for e in queries.job_events(conn, job.key)):
        _handled(conn, ev.id, f"duplicate {ev.handle} already recorded", clock)
        return
    status = remote.lookup(ev.handle)
    if status.state == "error":
        return  # the remote could not be asked: decide next pass
    carried, _, _ = evidence.owner_of_record(status.snapshot)
    other = jobs_store.handle_owner(conn, ev.handle)
    if other not in (None, job.key):
        _handled(conn, ev.id, f"not a duplicate: {ev.handle} is job {other.job_id} / {other.operation}'s", clock)
        return
    if carried is not None and carried != job.idem_key:
        _handled(conn, ev.id, f"not a duplicate: the remote's record carries idem key {carried}", clock)
        return
    cancelled: str | None = None
    cancel = getattr(remote, "cancel", None)
    live = status.state in ("running", "needs_person")
    if live and carried == job.idem_key and callable(cancel):  # still live at the remote and ours: stop it
        cancelled = cancel(ev.handle).state
        report.duplicates_cancelled += 1
    with write_tx(conn):
        current = _read_job(conn, job.key)
        assert current is not None
        apply(
            conn, job.key, "duplicate_send", actor=owner, now=clock.now(), expected_state=current.state,
            detail={"handle": ev.handle, "attempt": ev.attempt, "job_handle": job.handle, "job_attempt": job.attempt,
                    "job_state": job.state, "remote_state": status.state, "cancel": cancelled,
                    "ownership": "verified" if carried == job.idem_key else "unverified: the record names no idem key",
                    "webhook_id": ev.ref, "evidence_id": ev.id},
        )
        evidence_store.mark_handled(conn, ev.id, "duplicate" + (f", cancel: {cancelled}" if cancelled else ""), clock.now())
    report.duplicates += 1


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
    if conn.execute("SELECT 1 FROM remote_pauses WHERE remote = ?", (remote,)).fetchone() is None:
        return
    with write_tx(conn):
        lift(conn, config, remote, actor=owner, now=now, why="a probe send was not refused")


def recover_stale(
    conn: Connection, config: Config, remotes: RemoteCache, *, clock: Clock, owner: str, report: TickReport
) -> None:
    """Stale sends (begun, lease out, no outcome): attach a handle found by key, or hold the job."""
    now = clock.now()
    cutoff = now - config.policy.stale_reserving_seconds
    rows = conn.execute(
        "SELECT job_id, operation FROM jobs WHERE state = 'reserving' AND send_started_at IS NOT NULL "
        "AND send_started_at <= ? AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, job_id, operation",
        (cutoff, now - config.policy.send_margin_seconds),
    ).fetchall()
    for job_id, operation in rows:
        if operation not in config.operations:
            continue
        remote = remotes.for_operation(operation)  # built first: a remote that cannot be built claims nothing
        claim = claim_stale(conn, config, JobKey(job_id, operation), owner=owner, now=clock.now())
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
    total = conn.execute(
        "SELECT COUNT(*) FROM jobs WHERE state = 'reserving' AND send_started_at IS NULL "
        "AND (next_try_at IS NULL OR next_try_at <= ?)", (clock.now(),),
    ).fetchone()[0] if progress else 0
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


def record_poll(conn: Connection, config: Config, job: Job, status: RemoteStatus, *, actor: str, now: float) -> Applied | None:
    """Record a poll's answer for a submitted job (inside the caller's transaction); None if nothing to write.

    Every secret the config names is replaced in the answer (result, snapshot, error) before it is written.
    """
    status = redact_status(status, Redactor.from_config(config))
    base = {"handle": job.handle}
    if status.state == "completed":
        detail: dict[str, object] = dict(base)
        if isinstance(status.result, dict) and status.result.get("text_missing"):
            detail["text_missing"] = True  # completed, but the reply carried no text: said, not hidden
        return apply(
            conn, job.key, "completed", actor=actor, now=now, expected_state="submitted", expected_epoch=job.epoch,
            detail=detail, fields={"result": status.result, "result_at": now}, notify=config.notify,
        )
    if status.state == "failed":
        fields: dict[str, object] = {"last_error": status.error}
        if status.result is not None:
            fields.update(result=status.result, result_at=now)  # e.g. an incomplete interaction's partial text
        return apply(
            conn, job.key, "remote_failed", actor=actor, now=now, expected_state="submitted",
            expected_epoch=job.epoch, detail={**base, "error": status.error, "snapshot": status.snapshot},
            fields=fields, notify=config.notify,
        )
    if status.state in ("not_found", "needs_person"):
        if status.state == "not_found":
            event, reason = "handle_unknown", "the remote does not know the recorded handle"
        else:
            event, reason = "remote_needs_person", status.error or "the remote answered something only a person can judge"
        return apply(
            conn, job.key, event, actor=actor, now=now, expected_state="submitted",
            expected_epoch=job.epoch, detail={**base, "held_reason": reason, "snapshot": status.snapshot},
            fields={"held_reason": reason}, notify=config.notify,
        )
    return None


def poll_submitted(
    conn: Connection,
    config: Config,
    remotes: RemoteCache,
    *,
    clock: Clock,
    owner: str,
    report: TickReport,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    batch: int = 200,
) -> None:
    """Look up every submitted job (bounded concurrency) and record completions and failures."""
    total = conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'submitted'").fetchone()[0]
    done_count = 0
    last_key: tuple[float, str, str] = (float("-inf"), "", "")
    with ThreadPoolExecutor(max_workers=config.policy.poll_concurrency) as pool:
        while not (stop is not None and stop.is_set()):
            rows = conn.execute(
                "SELECT * FROM jobs WHERE state = 'submitted' AND handle IS NOT NULL "
                "AND (created_at, job_id, operation) > (?, ?, ?) ORDER BY created_at, job_id, operation LIMIT ?",
                (*last_key, batch),
            ).fetchall()
            if not rows:
                break
            jobs = [Job.from_row(r) for r in rows if r["operation"] in config.operations]
            last_key = (rows[-1]["created_at"], rows[-1]["job_id"], rows[-1]["operation"])
            statuses = list(
                pool.map(lambda j: remotes.for_operation(j.operation).lookup(j.handle or ""), jobs)
            )
            report.polled += len(jobs)
            with write_tx(conn):
                for job, status in zip(jobs, statuses, strict=True):
                    applied = record_poll(conn, config, job, status, actor=owner, now=clock.now())
                    if applied is None:
                        continue
                    if not applied.ok:
                        report.fenced += applied.refusal == "fenced"
                    elif status.state == "completed":
                        report.completed += 1
                    elif status.state == "failed":
                        report.failed += 1
                    else:
                        report.held += 1
            crashpoint("after_done")
            done_count += len(rows)
            if progress:
                progress("poll", done_count, total)


def deliver_done(
    conn: Connection,
    config: Config,
    *,
    clock: Clock,
    owner: str,
    report: TickReport,
    stop: threading.Event | None = None,
) -> None:
    """Deliver every done job to its sink, then mark it consumed (redelivery after a crash is harmless)."""
    rows = conn.execute("SELECT * FROM jobs WHERE state = 'done' ORDER BY updated_at, job_id, operation").fetchall()
    redactor = Redactor.from_config(config)
    for row in rows:
        if stop is not None and stop.is_set():
            break
        job = Job.from_row(row)
        if job.operation not in config.operations:
            continue
        path = deliver_to_folder(config.sink_dir(job.operation), job, redactor)
        crashpoint("after_deliver")
        with write_tx(conn):
            applied = apply(
                conn, job.key, "delivered", actor=owner, now=clock.now(), expected_state="done",
                expected_epoch=job.epoch, detail={"sink": str(path)}, notify=config.notify,
            )
        report.delivered += applied.ok
        report.fenced += not applied.ok and applied.refusal == "fenced"


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
    row = conn.execute(
        "SELECT state FROM jobs WHERE job_id = ? AND operation = ?", (res.key.job_id, res.key.operation)
    ).fetchone()
    fenced = applied is not None and not applied.ok
    return SubmitResult("reserved", res.key, row[0], send=outcome, used=res.used, limit=res.limit, fenced=fenced)
