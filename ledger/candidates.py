"""Candidates: orphan deliveries that could be a held job's own, kept in sight of it until a person decides.

A webhook delivery names only an interaction id; when the interaction's own record names no idem key (the remote
does not echo labels) or cannot be read, the delivery stays orphan evidence (ledger.evidence). Such an orphan may be
the very interaction a held job sent and never heard back about, so it is listed on every held job it could
belong to: same remote, created (by the remote's record) within the job's send window, and the same model when
both are known. One whose record could not be read is a candidate by the time it arrived instead (at or after the
window opened), so it never vanishes from sight.

The send window runs from the last send's start to its hold plus the send margin (until when its request could
still have reached the remote: `may_arrive_until`), widened by `CREATED_SLACK_SECONDS` on both sides.

A release waits until each candidate is decided: reconciled from (`reclaim reconcile JOB --handle evidence:ID
--unverified`:
the job leaves `held`), or dismissed by a person (`reclaim dismiss-candidate JOB --evidence ID --reason ...`, an
audited `candidate_dismissed` event on the job). Reject, remediate and reconcile need not wait: none of them sends.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ledger.config import Config
from ledger.model import Job, JobKey
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store

CREATED_SLACK_SECONDS = 2.0
"""How far outside the send window an interaction's `created` (given to the second by the remote, on the remote's
clock) may fall and still be a candidate."""

DISMISS_EVENT = "candidate_dismissed"
"""The event a dismissal writes on the job: `detail.evidence_id` is the orphan a person said is not its own."""


@dataclass(frozen=True)
class Candidate:
    """One orphan delivery that could be a held job's own interaction."""

    evidence_id: int
    handle: str | None
    """The interaction id the delivery named."""
    remote_state: str
    """What the delivery said (completed, failed, running ...)."""
    arrived: float
    """When the delivery was recorded (epoch seconds)."""
    created: float | None
    """When the remote created the interaction, when its record could be read."""
    model: str | None
    matched_by: str
    """`created` (the interaction's record was read) or `arrival` (it could not be: matched by arrival time)."""
    why: str | None
    """What the worker pass said of it (None: not looked at yet)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


def send_window(conn: Connection, config: Config, job: Job) -> tuple[float, float] | None:
    """(from, until) in epoch seconds for a held job with no handle: its last send's start to its hold plus the
    send margin (or its recorded `may_arrive_until`, when later). None for any other job: one with a handle knows
    its interaction, and only a held job can be released."""
    if job.state != "held" or job.handle:
        return None
    from ledger.triage import may_arrive_until

    start = job.send_started_at
    if start is None:
        started = events_store.last_send_started(conn, job.key)
        start = started if started is not None else job.created_at
    held = job.held_at if job.held_at is not None else job.updated_at
    end = held + config.policy.send_margin_seconds
    until = may_arrive_until(conn, job)
    if until is not None:
        end = max(end, until)
    return start, max(end, start)


def dismissed(conn: Connection, key: JobKey) -> dict[int, dict[str, Any]]:
    """The orphans a person dismissed for this job: evidence id -> {actor, at, reason}."""
    out: dict[int, dict[str, Any]] = {}
    for actor, at, d in events_store.of_kind(conn, key, DISMISS_EVENT):
        if isinstance(d.get("evidence_id"), int):
            out[d["evidence_id"]] = {"actor": actor, "at": at, "reason": d.get("reason")}
    return out


def _model_name(name: str | None) -> str | None:
    return name.rsplit("/", 1)[-1].strip().lower() if name else None


def candidates(conn: Connection, config: Config, job: Job, *, undecided: bool = True) -> list[Candidate]:
    """The orphan deliveries that could be `job`'s own, oldest first (see the module's words); with `undecided`
    (the default) those a person dismissed for this job are left out. [] for a job with no send window."""
    window = send_window(conn, config, job)
    if window is None:
        return []
    start, end = window[0] - CREATED_SLACK_SECONDS, window[1] + CREATED_SLACK_SECONDS
    op = config.operations.get(job.operation)
    remote = op.remote if op is not None else None
    rc = config.remotes.get(remote) if remote is not None else None
    model = _model_name(getattr(rc, "model", None) or None)
    gone = dismissed(conn, job.key) if undecided else {}
    out: list[Candidate] = []
    for u in evidence_store.orphans_since(conn, start):
        ev = u.evidence
        signed_by = ev.detail.get("remote")
        if remote is None or (signed_by is not None and signed_by != remote):
            continue
        if u.created is not None and not start <= u.created <= end:
            continue
        if model is not None and u.model is not None and _model_name(u.model) != model:
            continue
        if ev.id in gone:
            continue
        if ev.handle and jobs_store.handle_owner(conn, ev.handle) not in (None, job.key):
            continue  # since reconciled onto another job
        out.append(Candidate(
            evidence_id=ev.id, handle=ev.handle, remote_state=ev.remote_state, arrived=ev.at, created=u.created,
            model=u.model, matched_by="created" if u.created is not None else "arrival", why=ev.outcome,
        ))
    return out


def refusal_words(job: Job, found: list[Candidate]) -> str:
    """The release refusal naming each undecided candidate and the two ways out."""
    named = ", ".join(f"evidence {c.evidence_id} (interaction {c.handle or '?'}, {c.remote_state})" for c in found)
    ways = decide_words(job, found)
    return f"{len(found)} orphan deliver{'y' if len(found) == 1 else 'ies'} could be this job's own: {named}; {ways}"


def decide_words(job: Job, found: list[Candidate]) -> str:
    """The two ways to decide the candidates, as commands to type (the id filled in when there is one)."""
    jid = shlex.quote(job.job_id)
    ev = str(found[0].evidence_id) if len(found) == 1 else "ID"
    return (f"decide {'it' if len(found) == 1 else 'each'} first: 'reclaim reconcile {jid} --handle evidence:{ev} "
            f"--unverified --reason TEXT' if it is (its record names no idem key, so the remote cannot confirm it), "
            f"or 'reclaim dismiss-candidate {jid} --evidence {ev} --reason TEXT' if it is not")
