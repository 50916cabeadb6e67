"""One job's whole story, as the screens that triage it read it: its fields and timeline, the stale writes fenced
off it, the latest query and finding, what its remote can answer and whether a query would help, the evidence,
until when its last request could still arrive, the orphan deliveries that could be its own, and which of the
three held cases it looks like (`HELD_CASES`). Only reads: what the remote can answer comes from the config and
the ledger (`remote_lines`), so no adapter is built, no SDK imported and nothing is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.actions import JOB_ACTIONS
from ledger.candidates import Candidate
from ledger.candidates import candidates as held_candidates
from ledger.clock import Clock
from ledger.config import Config
from ledger.evidence import known_handle
from ledger.model import Event, Evidence, Job, JobKey
from ledger.remote_answers import RemoteAnswers
from ledger.remote_answers import answers as what_remotes_answer
from ledger.remote_answers import capabilities_of as remote_capabilities
from ledger.remotes import build_refusal, console_url_for
from ledger.store import Connection
from ledger.store.events import job_events
from ledger.store.evidence import for_job as evidence_for_job
from ledger.store.jobs import fenced_writes_for, find_job
from ledger.triage import Preview, arrival_words, latest_finding, latest_query, may_arrive_until, where_to_look
from ledger.triage import preview as preview_action

# The three ways a send can end unknown, in the words operators use.
HELD_CASES: tuple[tuple[str, str, str], ...] = (
    ("not_received", "Not delivered", "the request never reached the remote: a release sends it (once) again."),
    ("in_progress", "Delivered and running", "the remote has it and is working: find its handle and reconcile."),
    (
        "completed_reply_lost",
        "Completed, reply lost",
        "the remote finished, the answer was lost: reconcile with its handle; never release.",
    ),
)


@dataclass(frozen=True)
class JobDetail:
    """Everything the job and triage screens show about one job."""

    job: Job
    events: list[Event]
    fenced: list[dict[str, Any]]
    latest_query: Event | None
    latest_finding: Event | None
    can_answer: list[str]
    previews: dict[str, Preview] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    console_url: str | None = None
    """Where a person checks the remote's own records of this job (shown whole, copyable), if anywhere."""
    query_helps: bool = True
    """Whether a query can ask the remote anything: a handle is recorded, evidence names one, or the remote can be
    searched by idem key. When not, the screens offer no query and say what is known instead."""
    answers: RemoteAnswers | None = None
    """What the job's remote can answer, from the config and the ledger (no adapter built)."""
    arrives_until: float | None = None
    """Until when the held job's last request could still reach the remote, when that was still ahead at the read
    (release, reject and remediate wait for it; the screens read the job again then)."""
    arrival: str = ""
    """That, in words ('attempt 1 could still arrive until 12:04:31 (UTC)'), or ''."""
    candidates: list[Candidate] = field(default_factory=list)
    """Orphan deliveries that could be this held job's own and that nobody has decided yet (a release waits)."""

    @property
    def duplicates(self) -> list[Event]:
        """Second remote interactions detected for this job's idem key (a send twice), oldest first."""
        return [e for e in self.events if e.kind == "duplicate_send"]

    def known_state(self) -> Evidence | None:
        """The newest evidence for the current attempt that says what the remote did (running, completed, absent,
        gone, failed), if any."""
        for ev in reversed(self.evidence):
            if ev.attempt in (None, self.job.attempt) and ev.remote_state:
                return ev
        return None

    def suggested_handle(self) -> str | None:
        """The handle evidence names for the current attempt (a webhook, a fenced accepted send, a query)."""
        for ev in reversed(self.evidence):
            if ev.handle and ev.attempt in (None, self.job.attempt):
                return ev.handle
        return None

    @property
    def findings(self) -> list[Event]:
        """Every finding recorded on the job, oldest first."""
        return [e for e in self.events if e.kind == "finding"]

    @property
    def blocked_new_jobs(self) -> list[Event]:
        """The new jobs on this job's target that reserve() refused while it was held, oldest first."""
        return [e for e in self.events if e.kind == "blocked_new_job"]

    def suspected_case(self) -> str | None:
        """Which of the three cases the latest finding or query points to, if any."""
        if self.latest_finding is not None:
            category = self.latest_finding.detail.get("category")
            if category in {c for c, _, _ in HELD_CASES}:
                return str(category)
        if self.latest_query is not None:
            state = self.latest_query.detail.get("remote_state")
            if state == "running":
                return "in_progress"
            if state == "completed":
                return "completed_reply_lost"
            if state == "not_found" and not self.latest_query.detail.get("handle"):
                return "not_received"  # a search by key found nothing; a 404 for a handle says nothing
        return None


def remote_lines(config: Config, job: Job, conn: Connection | None = None) -> list[str]:
    """What the remote can and cannot answer for this job, in plain sentences (never pretending). From the config,
    the environment and the ledger alone: no adapter is built and no SDK imported (`build_refusal` says what
    building it would refuse), so a screen can ask this as soon as it opens."""
    op = config.operations.get(job.operation)
    if op is None:
        return [f"operation {job.operation} is not declared in the config: its remote cannot be asked"]
    rc = config.remotes.get(op.remote)
    if rc is None:
        return [f"remote {op.remote}: not declared in the config"]
    refusal = build_refusal(rc)
    if refusal is not None:
        return [f"remote {op.remote}: cannot be built ({refusal})"]
    caps = remote_capabilities(rc)
    lines = [f"remote {rc.name} ({rc.kind}): " + "; ".join(caps.explain())]
    found = known_handle(conn, job) if conn is not None else None
    if not job.handle and found is not None and found.handle:
        lines.append(f"no handle recorded, but {found.source} evidence names {found.handle}: a query asks the remote "
                     "about it")
        return lines
    if job.handle:
        if caps.lookup_by_handle:
            lines.append(f"handle {job.handle} is recorded: a query asks the remote about it")
        else:
            lines.append(f"handle {job.handle} is recorded, but {rc.kind} cannot look it up")
    elif caps.search_by_key:
        lines.append(f"no handle recorded; a query searches {rc.kind} by idem key {job.idem_key}")
    else:
        lines.append(where_to_look(config, job, rc.kind, url_apart=True))
    if rc.kind == "gemini":
        lines.append(
            "signed webhooks are on: a delivery for this job's idem key becomes evidence and is acted on"
            if rc.webhook_secret_env else
            "webhooks are off (no webhook_secret_env on this remote): nothing tells reclaim what happened"
        )
    return lines


def read_job_detail(
    conn: Connection, config: Config, key: JobKey, *, operator: str, clock: Clock,
    refused_because: str | None = None, with_previews: bool = False, with_remote: bool = True,
) -> JobDetail | None:
    """Read one job's fields, timeline, fenced writes, latest query/finding, and what the remote can answer; None
    when the ledger has no such job. With `with_previews`, what each action would do and whether `operator` may
    (every one refused with `refused_because`, when given: a read-only seat).

    `with_remote=False` leaves `can_answer` empty (the screens draw the ledger's part first and ask `remote_lines`
    after)."""
    job = find_job(conn, key)
    if job is None:
        return None
    helps, cannot_ask = query_helps(conn, config, job)
    previews: dict[str, Preview] = {}
    if with_previews:
        for action in JOB_ACTIONS:
            p = preview_action(conn, config, key, action, operator, clock)
            if refused_because is not None:
                p = Preview(action, False, refused_because, p.summary)
            elif action == "query" and p.allowed and not helps:
                p = Preview(action, False, cannot_ask, p.summary)
            previews[action] = p
    rc_name = config.operations[job.operation].remote if job.operation in config.operations else None
    answers = next((a for a in what_remotes_answer(conn, config, clock.now()) if a.name == rc_name), None)
    arrives = may_arrive_until(conn, job)
    if arrives is not None and arrives <= clock.now():
        arrives = None
    return JobDetail(
        job=job,
        events=job_events(conn, key),
        fenced=fenced_writes_for(conn, key),
        latest_query=latest_query(conn, key),
        latest_finding=latest_finding(conn, key),
        can_answer=remote_lines(config, job, conn) if with_remote else [],
        previews=previews,
        evidence=evidence_for_job(conn, job),
        console_url=console_url_for(config, job.operation, job.idem_key),
        query_helps=helps,
        answers=answers,
        arrives_until=arrives,
        arrival=arrival_words(job, arrives, config.timezone) if arrives is not None else "",
        candidates=held_candidates(conn, config, job),
    )


def query_helps(conn: Connection, config: Config, job: Job) -> tuple[bool, str]:
    """Whether a query can ask the job's remote anything (a handle recorded, evidence naming one, or a search by
    idem key), and when not, why, in one line. Reads the config and the ledger; builds no adapter."""
    op = config.operations.get(job.operation)
    rc = config.remotes.get(op.remote) if op is not None else None
    if rc is None:
        return False, f"operation {job.operation} has no declared remote: a query cannot ask anything"
    caps = remote_capabilities(rc)
    if job.handle:
        return (True, "") if caps.lookup_by_handle else (
            False, f"{rc.kind} remote {rc.name} cannot look a handle up: a query cannot ask anything")
    found = known_handle(conn, job)
    if found is not None and found.handle and caps.lookup_by_handle:
        return True, ""
    if caps.search_by_key:
        return True, ""
    return False, (f"a query cannot help: no handle is recorded, no evidence names one, and {rc.kind} cannot be "
                   "searched by idem key: record what you found (step 2)")
