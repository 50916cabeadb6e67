"""A pass's work on webhook evidence: attribute the deliveries that name no job (from the interaction's own
labels), then act on what nobody handled yet (poll a submitted job at once, reconcile a held one, record and
cancel a duplicate)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ledger import evidence, foreign
from ledger.clock import Clock
from ledger.config import Config
from ledger.db import write_tx
from ledger.model import Evidence, Job
from ledger.remotes.base import Remote
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.transitions import apply
from ledger.worker.pass_state import (
    RemoteCache,
    TickReport,
)
from ledger.worker.poll import (
    record_poll,
)

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
            job = jobs_store.find_job(conn, owner)
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
        job = jobs_store.find_by_idem_key(conn, idem) if idem is not None else None
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
        current = jobs_store.find_job(conn, job.key)
        assert current is not None
        apply(conn, job.key, "evidence", actor="reclaim", now=now, expected_state=current.state,
              detail={"source": "webhook", "webhook_id": ev.ref, "type": ev.detail.get("type"),
                      "handle": ev.handle, "attempt": attempt, "evidence_id": new_id, "attributed_by": how,
                      evidence_store.HANDLED_KEY: ev.id})
        evidence_store.mark_handled(conn, ev.id, f"attributed to {job.job_id} / {job.operation} "
                              f"(evidence {new_id}, by {how})", now)
    report.evidence_attributed += 1


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
        job = jobs_store.find_job(conn, ev.job)
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
                detail={"handle": ev.handle, "reason": reason, "verified": True, "evidence_id": ev.id,
                        evidence_store.HANDLED_KEY: ev.id},
                fields={"handle": ev.handle}, notify=config.notify,
            )
            report.reconciled_by_evidence += applied.ok
            outcome = "reconciled" if applied.ok else f"not reconciled: {applied.refusal}"
        else:
            category = "completed_reply_lost" if ev.remote_state == "completed" else "in_progress"
            apply(
                conn, job.key, "finding", actor="reclaim", now=now, expected_state="held",
                detail={"category": category, "note": reason, "suggested_handle": ev.handle,
                        "evidence_id": ev.id, "query_event_id": None, "snapshot": None, evidence_store.HANDLED_KEY: ev.id},
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
           for e in events_store.job_events(conn, job.key)):
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
        current = jobs_store.find_job(conn, job.key)
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
