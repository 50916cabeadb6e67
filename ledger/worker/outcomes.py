"""Recording a send's outcome: in the ledger under the epoch the send held, or (when the ledger refuses it) in
the outcome journal, which the next pass replays (`replay_journal`)."""

from __future__ import annotations

import dataclasses
import sys
import time

from ledger import journal, store
from ledger.clock import Clock
from ledger.config import Config
from ledger.db import write_tx
from ledger.errors import (
    LedgerConflict,
    LedgerError,
    LedgerLocked,
    LedgerUnusable,
)
from ledger.leases import Claim
from ledger.model import JobKey
from ledger.redaction import Redactor
from ledger.remote_health import record_refusal
from ledger.remotes.base import SendOutcome, redact_outcome
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.transitions import Applied, apply
from ledger.worker.pass_state import (
    TickReport,
)


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
            current = jobs_store.state_and_epoch(conn, job.key)
            if current is not None and current[1] == claim.epoch:
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
    try:
        path = journal.append(journal.of(conn), record)
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


def replay_journal(conn: Connection, config: Config, *, clock: Clock, report: TickReport) -> None:
    """Record every outcome the journal holds, idempotently by (job, epoch), then clear it.

    The journal is allocated first when it is missing or short (deleted, a migrated ledger, a PostgreSQL
    ledger's host-side journal). An outcome whose epoch moved on is kept as a fenced write (evidence); one
    already recorded is skipped. A record that cannot be recorded now (its operation is not declared in this
    config, or its job row is missing) is never dropped: it stays in the journal, is counted in
    `report.journal_kept`, and `reclaim status` lists it. A ledger that still refuses the writes leaves the
    journal as it is, for the next pass.
    """
    ledger = journal.of(conn)
    journal.reserve_space(ledger)
    if not journal.journal_path(ledger).exists():
        return
    with journal.replaying(ledger) as records:
        for rec in records:
            if journal.kept_reason(conn, config, rec) is not None:
                records.keep(rec)
                report.journal_kept += 1
                continue
            found = jobs_store.find_job(conn, JobKey(rec.job_id, rec.operation))
            assert found is not None  # kept_reason keeps a record whose job the ledger does not hold
            job = dataclasses.replace(found, attempt=rec.attempt, tries=rec.tries)
            claim = Claim(job=job, epoch=rec.epoch, owner=rec.owner, claimed_at=0.0)
            outcome = SendOutcome(rec.kind, handle=rec.handle, error=rec.error, reason=rec.reason,  # type: ignore[arg-type]
                                  retry_after=rec.retry_after)
            applied = record_send_outcome(conn, config, claim, outcome, now=clock.now(), journaled=rec)
            report.journal_replayed += applied.ok
            report.fenced += not applied.ok and applied.refusal == "fenced"
