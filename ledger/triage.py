"""Operator actions on a held (or failed) job: query, finding, dismiss-candidate, assign, release, reconcile, reject,
remediate.

Who may take each, on which states, what must be typed and what it does come from one table,
`ledger.actions`. Each action refuses a missing field (BadInput, naming it and its CLI option) before
anything else, then checks roles and policy and the job's state inside its own BEGIN IMMEDIATE
transaction, and either writes its event (with who, when and why) or raises Refused with the reason,
writing nothing. `refusal()` and `preview()` answer the same questions without writing, so the console
can show a disabled action and why, and the CLI's `--dry-run` can say what would happen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ledger import candidates as orphan_candidates
from ledger import evidence
from ledger.actions import DECISIONS as DECISIONS
from ledger.actions import FINDING_CATEGORIES as FINDING_CATEGORIES
from ledger.actions import JOB_ACTIONS
from ledger.actions import action as action_spec
from ledger.clock import Clock, clock_time, day_of, span, valid_time
from ledger.config import Config
from ledger.db import write_tx
from ledger.errors import BadInput, JobNotFound, NotYet, Refused, UndecidedCandidates
from ledger.identity import acting_source
from ledger.model import Event, Job, JobFilter, JobKey
from ledger.redaction import Redactor
from ledger.remotes import console_url_for
from ledger.remotes.base import Remote, RemoteStatus, redact_status
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.store import quota as quota_store
from ledger.transitions import Applied, apply

ACTIONS = JOB_ACTIONS
"""The actions on one job, in triage order (the table is `ledger.actions.ACTIONS`)."""


def get_job(conn: Connection, key: JobKey) -> Job:
    """The job with this key; raise JobNotFound naming it."""
    job = jobs_store.find_job(conn, key)
    if job is None:
        raise JobNotFound(f"job {key.job_id!r} / {key.operation!r}: not in the ledger (see 'reclaim status')")
    return job


def current_attempt_start(conn: Connection, key: JobKey) -> int:
    """The event id where the current attempt began (its last release, or 0): older findings are history."""
    last = events_store.latest_of_kind(conn, key, "release")
    return last.id if last else 0


def latest_finding(conn: Connection, key: JobKey) -> Event | None:
    """The newest finding recorded for the job's current attempt."""
    return events_store.latest_of_kind(conn, key, "finding", current_attempt_start(conn, key))


def latest_query(conn: Connection, key: JobKey) -> Event | None:
    """The newest remote query recorded for the job's current attempt."""
    return events_store.latest_of_kind(conn, key, "remote_query", current_attempt_start(conn, key))


def attempt_authors(conn: Connection, key: JobKey) -> dict[str, str]:
    """Everyone who wrote a finding or queried the remote in the job's current attempt, with what they did."""
    rows = events_store.triage_work(conn, key, current_attempt_start(conn, key))
    words = {"finding": "wrote a finding", "remote_query": "queried the remote",
             "candidate_dismissed": "dismissed a candidate"}
    did: dict[str, set[str]] = {}
    for actor, kind in rows:
        did.setdefault(actor, set()).add(words[kind])
    return {actor: " and ".join(sorted(what, reverse=True)) for actor, what in did.items()}


_SOURCE_WORDS = {
    "query": "a query",
    "webhook": "a signed webhook",
    "fenced_outcome": "an accepted send whose late write was fenced",
}


def refusal(conn: Connection, config: Config, job: Job, action: str, actor: str, now: float) -> str | None:
    """Why `actor` may not take `action` on `job` now, or None when it is allowed. Writes nothing.

    The role and the states come from the action table; a release also answers to policy and evidence.
    """
    spec = action_spec(action)
    if action not in JOB_ACTIONS:
        raise BadInput(f"action {action!r}: acts on many jobs, not one (actions: {', '.join(JOB_ACTIONS)})")
    if spec.role not in config.roles_of(actor):
        return spec.role_refusal(actor)
    why = spec.state_refusal(job.state)
    if why is not None:
        return why
    if action == "release":
        why = candidate_refusal(conn, config, job) or _release_refusal(conn, config, job, actor, now)
    elif action == "dismiss-candidate" and not orphan_candidates.candidates(conn, config, job):
        why = "no orphan delivery is an undecided candidate for this job's own (see 'reclaim show')"
    return why or arrival_refusal(conn, config, job, action, now)


def candidate_refusal(conn: Connection, config: Config, job: Job) -> str | None:
    """Why a release must wait for a person to decide the orphan deliveries that could be the job's own
    (ledger.candidates), naming each and the two ways out; None when there are none undecided."""
    found = orphan_candidates.candidates(conn, config, job)
    return orphan_candidates.refusal_words(job, found) if found else None


def may_arrive_until(conn: Connection, job: Job) -> float | None:
    """Until when the held job's last request could still reach the remote (epoch seconds), or None when nothing
    of it can: the `may_arrive_until` its hold recorded (a send given up, or whose worker was found gone), for
    a job still held by that hold. Held by an answer from the remote (a poll, a webhook), or not held: None."""
    if job.state != "held":
        return None
    detail = events_store.hold_detail(conn, job.key)
    until = detail.get("may_arrive_until") if detail is not None else None
    return float(until) if isinstance(until, (int, float)) and not isinstance(until, bool) else None


def arrival_words(job: Job, until: float, tz: str) -> str:
    """'attempt 2 could still arrive until 12:04:31 (UTC)': what a held job's screens and refusals say."""
    return f"attempt {job.attempt} could still arrive until {clock_time(until, tz)} ({tz})"


def arrival_refusal(conn: Connection, config: Config, job: Job, action: str, now: float) -> str | None:
    """Why `action` must wait while the job's last request could still reach the remote, or None. Only the actions
    the table marks `waits_for_arrival` (release, reject, remediate) wait; a reconcile need not."""
    wait = _arrival_wait(conn, config, job, action, now)
    return wait[0] if wait is not None else None


def _arrival_wait(conn: Connection, config: Config, job: Job, action: str, now: float
                  ) -> tuple[str, float] | None:
    """(why, until) when `action` must wait for the job's arrival moment; None when it need not."""
    if not action_spec(action).waits_for_arrival:
        return None
    until = may_arrive_until(conn, job)
    if until is None or now >= until:
        return None
    why = (f"{arrival_words(job, until, config.timezone)} (in {span(math.ceil(until - now))}); {action} after "
           "then (a reconcile need not wait)")
    return why, until


def _release_refusal(conn: Connection, config: Config, job: Job, actor: str, now: float) -> str | None:
    finding = latest_finding(conn, job.key)
    if config.policy.release_requires_finding and finding is None:
        return "a release needs a finding first: query the remote and record what was found"
    ran = evidence.says_it_ran(conn, job)
    if ran is not None:
        said = "is still running" if ran.remote_state == "running" else "completed"
        where = f" ({ran.handle})" if ran.handle else ""
        return (f"evidence from {_SOURCE_WORDS.get(ran.source, ran.source)} says the remote {said} it{where}; "
                "reconcile instead (only newer evidence that it is not there lifts this)")
    if config.policy.four_eyes:
        authored = attempt_authors(conn, job.key)
        if actor in authored:
            return (f"four-eyes: {actor} {authored[actor]} for this attempt; an approver who did neither must "
                    "release")
    if finding is not None:
        if finding.detail.get("category") in ("in_progress", "completed_reply_lost"):
            return f"the finding says {finding.detail['category']}: the remote ran it; reconcile instead"
    op = config.operations.get(job.operation)
    if op is None:
        return f"operation {job.operation!r} is no longer declared in the config"
    used = quota_store.used(conn, job.operation, day_of(now, config.timezone))
    if used >= op.daily_quota:
        return f"{job.operation} quota today is used up ({used}/{op.daily_quota}); release tomorrow or raise daily_quota"
    return None


@dataclass(frozen=True)
class Preview:
    """What an action would do, and whether it is allowed for this operator now."""

    action: str
    allowed: bool
    reason: str | None
    summary: str


def preview(conn: Connection, config: Config, key: JobKey, action: str, actor: str, clock: Clock) -> Preview:
    """Say what `action` will do ("sends 1 new request to gemini; quota 12/200 -> 13/200") and if it may.

    The text is the action table's; a release fills in the remote, the attempt and today's quota.
    """
    job = get_job(conn, key)
    now = clock.now()
    why = refusal(conn, config, job, action, actor, now)
    spec = action_spec(action)
    op = config.operations.get(job.operation)
    facts: dict[str, object] = {}
    if action == "release" and op is not None:
        used = quota_store.used(conn, job.operation, day_of(now, config.timezone))
        facts = {"remote": op.remote, "attempt": job.attempt + 1, "operation": job.operation, "used": used,
                 "after": used + 1, "limit": op.daily_quota}
    return Preview(action=action, allowed=why is None, reason=why, summary=spec.preview_text(**facts))


def check_input(action: str, given: Mapping[str, object]) -> None:
    """Refuse (BadInput, naming the field and its CLI option) input `action` cannot be taken with: a required
    field missing (the action table says which), a category not known, an owner who is no one, a due time not
    in 1970..9999. Returns when the input will do; reads nothing."""
    spec = action_spec(action)
    spec.require(given)
    needs = {f.name for f in spec.fields}
    if "owner" in needs:
        check_owner(str(given["owner"]))
    due = given.get("due")
    if "due" in needs and isinstance(due, (int, float)):
        check_due(due)


def dry_run(
    conn: Connection, config: Config, key: JobKey, action: str, given: Mapping[str, object], *, actor: str,
    clock: Clock, remote: Remote | None = None, unverified: bool = False,
) -> Preview:
    """What `action` with this input would do now, and whether it would be allowed: the same checks the action
    makes, stopping before it writes (a reconcile still asks the remote about the handle). Writes nothing.

    Input it cannot be taken with is refused at once (BadInput), as the action itself would refuse it.
    """
    check_input(action, given)
    p = preview(conn, config, key, action, actor, clock)
    if unverified and action_spec(action).unverified:
        p = Preview(action, p.allowed, p.reason, action_spec(action).unverified)  # the one path that will run
    if p.allowed and action == "dismiss-candidate":
        why = _dismiss_refusal(conn, config, key, evidence_id_of(str(given.get("evidence", ""))))
        if why is not None:
            p = Preview(action, False, why, p.summary)
    if p.allowed and action == "reconcile":
        handle, _ = resolve_handle(conn, str(given.get("handle", "")))
        why = _reconcile_refusal(conn, config, get_job(conn, key), handle, remote, unverified)
        if why is not None:
            p = Preview(action, False, why, p.summary)
    return p


def _act(
    conn: Connection,
    config: Config,
    key: JobKey,
    action: str,
    event: str,
    *,
    actor: str,
    clock: Clock,
    detail: dict[str, Any],
    fields: dict[str, Any] | None = None,
    count_today: bool = False,
    check: Callable[[Connection], str | None] | None = None,
    after: Callable[[Connection, Applied], None] | None = None,
) -> Applied:
    detail = {**detail, "identity_source": acting_source(config)}  # how the actor's name was established
    with write_tx(conn):
        now = clock.now()
        job = get_job(conn, key)
        why = refusal(conn, config, job, action, actor, now)
        if why is None and check is not None:
            why = check(conn)
        if why is not None:
            message = f"{action} refused for {key.job_id} / {key.operation}: {why}"
            wait = _arrival_wait(conn, config, job, action, now)
            if wait is not None and why == wait[0]:
                raise NotYet(message, wait[1])  # allowed from then: the same command then succeeds
            if action == "release":
                found = orphan_candidates.candidates(conn, config, job)
                if found and why == orphan_candidates.refusal_words(job, found):
                    raise UndecidedCandidates(message, tuple(c.evidence_id for c in found))
            raise Refused(message)
        if count_today:
            day = day_of(now, config.timezone)
            quota_store.count(conn, key.operation, day)
            detail = {**detail, "quota_day": day}  # what `verify` replays the quota from
        # A decision bumps the epoch (ledger.event_table): a poll or send still in flight for the old state is fenced.
        applied = apply(
            conn, key, event, actor=actor, now=now, expected_state=job.state, detail=detail,
            fields=fields, notify=config.notify,
        )
        if not applied.ok:
            raise Refused(f"{action} refused for {key.job_id} / {key.operation}: the job changed meanwhile; look again")
        if after is not None:
            after(conn, applied)  # in the same transaction as the event
        return applied


def query_remote(config: Config, job: Job, remote: Remote, handle: str | None = None) -> RemoteStatus:
    """Ask the remote about a job by handle (the job's, or `handle` from evidence), or by key when it can
    be searched. No ledger access."""
    handle = job.handle or handle
    if handle:
        return remote.lookup(handle)
    if remote.capabilities.search_by_key:
        return remote.search(job.idem_key)
    return RemoteStatus(
        "error",
        error=where_to_look(config, job, remote.kind),
        snapshot={"asked": False},
    )


def where_to_look(config: Config, job: Job, kind: str, *, url_apart: bool = False) -> str:
    """For a job with no handle and no evidence on a remote of `kind`: what cannot be asked, and where a person can
    look (from the config alone: no adapter is built).

    With `url_apart` the remote-console URL is not spelled out (the caller shows it whole on its own line)."""
    if kind == "gemini":
        url = console_url_for(config, job.operation, job.idem_key)
        here = "" if url is None else (
            "; the demo's simulator lists them at the remote-console URL shown below" if url_apart else
            f"; the demo's simulator lists them at {url}")
        return (
            "no handle recorded and Gemini interactions cannot be listed or searched: look in AI Studio's logs "
            f"for interactions labelled idem={job.idem_key} attempt={job.attempt}{here}; a signed webhook, if "
            "configured, would have named it"
        )
    return f"no handle recorded; {kind} cannot be searched by idem key, so the remote cannot answer"


def record_query(
    conn: Connection, config: Config, key: JobKey, status: RemoteStatus, *, actor: str, clock: Clock
) -> Applied:
    """Record a remote query's reply (and its raw snapshot) as an event on the job, and as evidence when
    the remote answered (a failed query adds no evidence). Secrets the config names are replaced first."""
    status = redact_status(status, Redactor.from_config(config))
    detail: dict[str, Any] = {
        "remote_state": status.state,
        "handle": status.handle,
        "error": status.error,
        "snapshot": status.snapshot,
    }
    if status.state == "not_found" and status.handle:
        detail["meaning"] = "the remote no longer has it (retention): this says nothing about whether it ran"
    said = _EVIDENCE_STATE.get(status.state)
    if said == "absent" and status.handle:
        said = "gone"  # a handle the remote once accepted, now unknown: its records expired

    def keep(c: Connection, applied: Applied) -> None:
        if said is not None and applied.job is not None:
            evidence_store.record(
                c, at=clock.now(), source="query", idem_key=applied.job.idem_key, attempt=applied.job.attempt,
                handle=status.handle, remote_state=said, job=key, ref=f"event-{applied.event_id}",
                detail={"actor": actor},
            )

    return _act(conn, config, key, "query", "remote_query", actor=actor, clock=clock, detail=detail, after=keep)


_EVIDENCE_STATE = {
    "completed": "completed",
    "running": "running",
    "needs_person": "running",
    "failed": "failed",
    "not_found": "absent",
}


def query_job(
    conn: Connection, config: Config, key: JobKey, remote: Remote, *, actor: str, clock: Clock
) -> RemoteStatus:
    """Check the role, ask the remote (no transaction open), record the reply; return it (secrets replaced)."""
    job = get_job(conn, key)
    why = refusal(conn, config, job, "query", actor, clock.now())
    if why is not None:
        raise Refused(f"query refused for {key.job_id} / {key.operation}: {why}")
    known = evidence.known_handle(conn, job)
    status = redact_status(query_remote(config, job, remote, known.handle if known else None),
                           Redactor.from_config(config))
    record_query(conn, config, key, status, actor=actor, clock=clock)
    return status


def record_finding(
    conn: Connection, config: Config, key: JobKey, category: str, note: str, *, actor: str, clock: Clock
) -> Applied:
    """Record what a person learned (category + note), resting on the latest query's snapshot; a category not
    known or a blank note is refused (BadInput) before anything is read."""
    check_input("finding", {"category": category, "note": note})
    query = latest_query(conn, key)
    detail = {
        "category": category,
        "note": note,
        "query_event_id": query.id if query else None,
        "snapshot": query.detail.get("snapshot") if query else None,
    }
    return _act(conn, config, key, "finding", "finding", actor=actor, clock=clock, detail=detail)


def check_owner(owner: str) -> str:
    """Return `owner` when it names someone (not blank, at most 200 characters); else raise BadInput."""
    if not owner.strip():
        raise BadInput("owner: required; name the person who will see this through")
    if len(owner) > 200:
        raise BadInput("owner: at most 200 characters; name the person who will see this through")
    return owner


def check_due(due_at: float) -> float:
    """Return `due_at` when it is a time between 1970 and 9999 (finite); else raise BadInput saying so."""
    if not valid_time(due_at):
        raise BadInput(
            f"due: {due_at!r} is not a time between 1970 and 9999; give one such as 2026-12-03T09:00Z"
        )
    return due_at


def assign(
    conn: Connection, config: Config, key: JobKey, owner: str, due_at: float, *, actor: str, clock: Clock,
    reason: str,
) -> Applied:
    """Give the job an owner and a due time; refuses (BadInput) a blank reason or owner, or a due time not in
    1970..9999."""
    check_input("assign", {"reason": reason, "owner": owner, "due": due_at})
    return _act(
        conn, config, key, "assign", "assign", actor=actor, clock=clock,
        detail={"owner": owner, "due_at": due_at, "reason": reason}, fields={"owner": owner, "due_at": due_at},
    )


def release(
    conn: Connection, config: Config, key: JobKey, *, actor: str, clock: Clock, reason: str
) -> Applied:
    """Re-submit: back to reserving, attempt + 1, same idem key, counted against today's quota; a blank reason
    is refused (BadInput)."""
    check_input("release", {"reason": reason})
    job = get_job(conn, key)
    finding = latest_finding(conn, key)
    return _act(
        conn, config, key, "release", "release", actor=actor, clock=clock, count_today=True,
        detail={"reason": reason, "attempt": job.attempt + 1, "finding_event_id": finding.id if finding else None},
    )


def evidence_id_of(text: str) -> int:
    """The evidence id `--evidence` names ('12' or 'evidence:12'); BadInput for anything else."""
    raw = text.strip()
    number = raw[len(EVIDENCE_PREFIX):] if raw.startswith(EVIDENCE_PREFIX) else raw
    if not number.isdigit() or len(number) > 18:
        raise BadInput(f"--evidence {raw!r}: not an evidence id; give the number 'reclaim show JOB' lists "
                       "(e.g. 12 or evidence:12)")
    return int(number)


def dismiss_candidate(
    conn: Connection, config: Config, key: JobKey, evidence_ref: str, *, actor: str, clock: Clock,
    reason: str,
) -> Applied:
    """Record that orphan evidence `evidence_ref` (an id, or evidence:ID), listed as a candidate of this held job, is
    not its own: a `candidate_dismissed` event on the job, with who, when and why. Refused (nothing written) when it
    is not one of the job's undecided candidates; a blank reason or id is refused (BadInput)."""
    check_input("dismiss-candidate", {"evidence": evidence_ref, "reason": reason})
    evidence_id = evidence_id_of(evidence_ref)
    ev = evidence_store.get(conn, evidence_id)
    return _act(
        conn, config, key, "dismiss-candidate", orphan_candidates.DISMISS_EVENT, actor=actor, clock=clock,
        detail={"evidence_id": evidence_id, "handle": ev.handle if ev is not None else None, "reason": reason},
        check=lambda c: _dismiss_refusal(c, config, key, evidence_id),
    )


def _dismiss_refusal(conn: Connection, config: Config, key: JobKey, evidence_id: int) -> str | None:
    """Why evidence `evidence_id` cannot be dismissed for this job: it is not one of its undecided candidates."""
    found = orphan_candidates.candidates(conn, config, get_job(conn, key))
    if any(x.evidence_id == evidence_id for x in found):
        return None
    if evidence_id in orphan_candidates.dismissed(conn, key):
        return f"evidence {evidence_id} was already dismissed for this job"
    listed = ", ".join(str(x.evidence_id) for x in found) or "none"
    return f"evidence {evidence_id} is not a candidate for this job's own (its candidates: {listed})"


def verify_handle(config: Config, job: Job, handle: str, remote: Remote, attempt: int | None = None) -> str | None:
    """Ask the remote whether `handle` is this job's: None when it is, else which check failed.

    A Gemini handle must exist and carry the job's idem key in its labels (and, when `attempt` is given
    and the labels carry one, that attempt); an HTTP handle must answer the lookup with the job's
    idempotency key. A remote that cannot be asked is a refusal too.
    """
    if not remote.capabilities.lookup_by_handle:
        return f"{remote.kind} remote {remote.name} cannot look a handle up: reconcile with --unverified and a reason"
    status = redact_status(remote.lookup(handle), Redactor.from_config(config))
    if status.state == "error":
        return f"the remote could not be asked about {handle} ({status.error}); try again, or --unverified with a reason"
    if status.state == "not_found":
        return f"the remote does not know {handle}; check the handle"
    carried, label_attempt, _ = evidence.owner_of_record(status.snapshot)
    if carried is None:
        return (f"the remote's record of {handle} names no idem key (its labels are not "
                "echoed): it cannot be verified; reconcile with --unverified and a reason")
    if carried != job.idem_key:
        return f"{handle} carries idem key {carried}, not this job's {job.idem_key}: it is another job's interaction"
    if attempt is not None and label_attempt is not None and label_attempt != attempt:
        return f"{handle} is attempt {label_attempt}'s interaction, not attempt {attempt}'s"
    return None


EVIDENCE_PREFIX = "evidence:"
"""A handle given as `evidence:ID` is the handle that evidence record names (e.g. an orphan delivery's)."""


def resolve_handle(conn: Connection, handle: str) -> tuple[str, int | None]:
    """The handle to reconcile with, and the evidence id it was read from (None when typed as is).

    Raises BadInput when `evidence:ID` names no evidence record, or one without a handle.
    """
    text = handle.strip()
    if not text.startswith(EVIDENCE_PREFIX):
        return handle, None
    number = text[len(EVIDENCE_PREFIX):]
    ev = evidence_store.get(conn, int(number)) if number.isdigit() and len(number) <= 18 else None
    if ev is None or not ev.handle:
        raise BadInput(f"--handle {text}: no evidence record {number or '?'} with a handle; "
                       "list them with 'reclaim evidence --orphans' or 'reclaim evidence JOB_ID'")
    return ev.handle, ev.id


def reconcile(
    conn: Connection, config: Config, key: JobKey, handle: str, *, actor: str, clock: Clock, reason: str,
    remote: Remote | None = None, unverified: bool = False,
) -> Applied:
    """The remote did run it: attach the handle and move to submitted; nothing is sent.

    A blank reason or handle is refused (BadInput). The handle is first verified with the remote
    (`verify_handle`); `unverified=True` skips that and is recorded as unverified. A handle attached to
    another job is always refused.
    """
    check_input("reconcile", {"reason": reason, "handle": handle})
    handle, evidence_id = resolve_handle(conn, handle)
    job = get_job(conn, key)
    why = refusal(conn, config, job, "reconcile", actor, clock.now())
    if why is None:
        why = _reconcile_refusal(conn, config, job, handle, remote, unverified)
    if why is not None:
        raise Refused(f"reconcile refused for {key.job_id} / {key.operation}: {why}")
    return _act(
        conn, config, key, "reconcile", "reconcile", actor=actor, clock=clock,
        detail={"handle": handle, "reason": reason, "verified": not unverified,
                **({"evidence_id": evidence_id} if evidence_id is not None else {})},
        fields={"handle": handle},
        check=lambda c: _handle_taken(c, key, handle),
    )


@dataclass(frozen=True)
class BulkAssigned:
    """What a bulk assign matched, and how many of them it assigned (0 when it only counted)."""

    matched: list[JobKey]
    assigned: int


def bulk_assign(
    conn: Connection, config: Config, flt: JobFilter | None, owner: str, due_at: float, *, actor: str,
    clock: Clock, reason: str, apply: bool, only: Collection[JobKey] | None = None,
) -> BulkAssigned:
    """Give every held job `flt` matches this owner and due time (each its own assign, with its event); with
    `apply=False` only count them. With `only` (the keys a preview showed), a job that started to match after
    the preview is left alone, and one that stopped matching is not assigned either. The input and the role
    are checked first, for a count too (BadInput, Refused); never anything but an assign."""
    check_input("bulk-assign", {"reason": reason, "owner": owner, "due": due_at})
    spec = action_spec("bulk-assign")
    if spec.role not in config.roles_of(actor):
        raise Refused(f"bulk-assign refused: {spec.role_refusal(actor)}")
    keys: list[JobKey] = []
    while True:
        page = jobs_store.list_jobs(conn, "held", limit=500, offset=len(keys), flt=flt)
        keys += [j.key for j in page]
        if len(page) < 500:
            break
    if only is not None:
        previewed = set(only)
        keys = [k for k in keys if k in previewed]
    if apply:
        for key in keys:
            assign(conn, config, key, owner, due_at, actor=actor, clock=clock, reason=reason)
    return BulkAssigned(keys, len(keys) if apply else 0)


def _reconcile_refusal(
    conn: Connection, config: Config, job: Job, handle: str, remote: Remote | None, unverified: bool
) -> str | None:
    """Why `handle` may not be attached to `job` (another job's, or the remote says it is not this job's)."""
    why = _handle_taken(conn, job.key, handle)
    if why is None and not unverified:
        if remote is None:
            raise BadInput("reconcile: no remote to verify the handle with; pass the remote or --unverified")
        why = verify_handle(config, job, handle, remote)
    return why


def _handle_taken(conn: Connection, key: JobKey, handle: str) -> str | None:
    owner = jobs_store.handle_owner(conn, handle)
    if owner is not None and owner != key:
        return f"handle {handle} is already attached to job {owner.job_id} / {owner.operation}"
    return None


def reject(conn: Connection, config: Config, key: JobKey, *, actor: str, clock: Clock, reason: str) -> Applied:
    """Close a held job without re-sending; a blank reason is refused (BadInput)."""
    check_input("reject", {"reason": reason})
    return _act(conn, config, key, "reject", "reject", actor=actor, clock=clock, detail={"reason": reason})


def remediate(conn: Connection, config: Config, key: JobKey, note: str, *, actor: str, clock: Clock) -> Applied:
    """Close a held job as done by another allowed means; a blank note is refused (BadInput)."""
    check_input("remediate", {"note": note})
    return _act(conn, config, key, "remediate", "remediate", actor=actor, clock=clock, detail={"note": note})


def take(
    conn: Connection, config: Config, key: JobKey, action: str, given: Mapping[str, Any], *, actor: str,
    clock: Clock, remote: Remote | None = None, unverified: bool = False,
) -> Applied | RemoteStatus:
    """Take one job action with the input under the action table's field names (`due` in epoch seconds): the
    same function the action's own name calls, so the same checks and refusals. A query returns the remote's
    reply; every other action what it applied. `remote` is needed by a query and a verified reconcile."""
    check_input(action, given)
    if action == "query":
        if remote is None:
            raise BadInput("query: no remote to ask; pass the operation's remote")
        return query_job(conn, config, key, remote, actor=actor, clock=clock)
    if action == "finding":
        return record_finding(conn, config, key, given["category"], given["note"], actor=actor, clock=clock)
    if action == "dismiss-candidate":
        return dismiss_candidate(conn, config, key, given["evidence"], actor=actor, clock=clock,
                                 reason=given["reason"])
    if action == "assign":
        return assign(conn, config, key, given["owner"], given["due"], actor=actor, clock=clock, reason=given["reason"])
    if action == "release":
        return release(conn, config, key, actor=actor, clock=clock, reason=given["reason"])
    if action == "reconcile":
        return reconcile(conn, config, key, given["handle"], actor=actor, clock=clock, reason=given["reason"],
                         remote=remote, unverified=unverified)
    if action == "reject":
        return reject(conn, config, key, actor=actor, clock=clock, reason=given["reason"])
    if action == "remediate":
        return remediate(conn, config, key, given["note"], actor=actor, clock=clock)
    raise BadInput(f"action {action!r}: acts on many jobs, not one (actions: {', '.join(JOB_ACTIONS)})")
