"""A hypothesis state machine over the real ledger functions, checked against an in-memory model.

Every step drives real ledger code (reserve, leases.claim_for_send, worker.send_one /
record_send_outcome / recover_stale / record_poll / deliver_done, triage.*) on a real SQLite file, then
reads the ledger back from a fresh connection and compares it with the model: state, attempt, epoch,
lease, handle, quota, event sequences, fenced writes, and -- the one rule -- that no job is ever sent
twice without an approved release in between.

The remote is a fake in-process adapter (`ModelRemote`, implementing ledger.remotes.base.Remote). This
is the one place a fake remote is acceptable: the model needs thousands of sends per run with a chosen
outcome each, far more than a loopback HTTP server can serve in the time budget. Sends, lookups and
searches are counted by the fake at the call, per idem key.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from hypothesis_budget import examples
from ledger_reads import QmarkSql, job_fingerprint

from ledger import replay, triage
from ledger.clock import ManualClock, day_of, parse_time
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger, write_tx
from ledger.errors import Refused
from ledger.leases import Claim, claim_for_send
from ledger.model import STATES, Job, JobKey, idem_key
from ledger.remotes.base import Capabilities, RemoteStatus, SendKind, SendOutcome
from ledger.reservation import reserve
from ledger.sink import deliver_to_folder
from ledger.worker import (
    RemoteCache,
    TickReport,
    deliver_done,
    record_poll,
    record_send_outcome,
    recover_stale,
    send_one,
)

T0 = parse_time("2026-12-01T12:00:00Z")
LEASE = 60.0
STALE = 120.0
BACKOFF = 30.0
MARGIN = 2.0  # policy.send_margin_seconds: recovery waits this long past a lease
QUOTA = {"gen": 3, "clean": 3}  # small: reservations and releases run into it
# gen: like Gemini, no search by key; clean: searchable and dedupes by key, so recovery may attach a handle.
SEARCHABLE = {"gen": False, "clean": True}
OPS = tuple(QUOTA)
JOB_IDS = ("a", "b", "c", "d")  # a small pool, so duplicates happen
TARGETS = (None, "t1", "t2")
ACTORS = ("tina", "ann", "bob", "vic")  # triage; triage+approver; triage+approver; viewer
# Hypothesis draws the first entries of a sampled_from most often: the interesting ones come first.
OUTCOMES: tuple[SendKind, ...] = ("unknown", "accepted", "not_delivered", "invalid")
POLL_STATES = ("completed", "not_found", "failed", "running")
HELD_UNKNOWN = "send outcome unknown (timeout)"
HELD_NO_SEARCH = "no handle recorded and the remote cannot be searched"
HELD_SEARCH_EMPTY = "send begun, no outcome recorded, and a search by key found nothing"
HELD_HANDLE_UNKNOWN = "the remote does not know the recorded handle"

pick = st.integers(min_value=0, max_value=7)
# A frozen worker's claim: (job key, the claim it holds, the handle its send got, if it went out).
Zombie = tuple[tuple[str, str], Claim, str | None]
actor_st = st.sampled_from(ACTORS)


class ModelRemote:
    """Fake remote (see the module docstring). Records, at each send, how many releases the ledger held."""

    def __init__(self, name: str, kind: str, searchable: bool, ledger: Path) -> None:
        self.name = name
        self.kind = kind
        self.capabilities = Capabilities(lookup_by_handle=True, search_by_key=searchable, dedupes_by_key=searchable)
        self.next: SendKind = "accepted"
        self.create_on_unknown = False
        self.sends: Counter[str] = Counter()
        # Per idem key, one (outcome, releases in the ledger at that moment) per send.
        self.send_log: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.interactions: dict[str, str] = {}  # handle -> status
        self.by_idem: dict[str, list[str]] = defaultdict(list)
        self._reader = QmarkSql(connect(ledger, readonly=True, check_same_thread=False))

    def close(self) -> None:
        self._reader.close()

    def _create(self, idem: str) -> str:
        handle = f"{self.name}-{len(self.interactions) + 1}"
        self.interactions[handle] = "running"
        self.by_idem[idem].append(handle)
        return handle

    def send(self, payload: dict[str, Any], idem: str, attempt: int, window: Any = None) -> SendOutcome:
        self.sends[idem] += 1
        releases = self._reader.execute(
            "SELECT COUNT(*) FROM events e JOIN jobs j ON e.job_id = j.job_id AND e.operation = j.operation "
            "WHERE j.idem_key = ? AND e.kind = 'release'", (idem,)
        ).fetchone()[0]
        kind = self.next
        self.send_log[idem].append((kind, releases))
        if kind == "accepted":
            return SendOutcome("accepted", handle=self._create(idem))
        if kind == "not_delivered":
            return SendOutcome("not_delivered", error="HTTP 429: try later")
        if kind == "invalid":
            return SendOutcome("invalid", error="HTTP 400: bad request")
        if self.create_on_unknown:
            self._create(idem)
        return SendOutcome("unknown", error="ReadTimeout: no reply", reason="timeout")

    def lookup(self, handle: str) -> RemoteStatus:
        status = self.interactions.get(handle)
        if status is None:
            return RemoteStatus("not_found", snapshot={"status_code": 404}, error="not found", handle=handle)
        result = {"text": f"result of {handle}"} if status == "completed" else None
        return RemoteStatus(status, result=result, snapshot={"id": handle, "status": status}, handle=handle)  # type: ignore[arg-type]

    def search(self, idem: str) -> RemoteStatus:
        if not self.capabilities.search_by_key:
            return RemoteStatus("error", error="cannot be searched")
        handles = self.by_idem.get(idem)
        if not handles:
            return RemoteStatus("not_found", snapshot={"idem": idem})
        return self.lookup(handles[-1])

    def latest(self, idem: str) -> str | None:
        handles = self.by_idem.get(idem)
        return handles[-1] if handles else None


@dataclass
class MJob:
    """The model's view of one job."""

    job_id: str
    op: str
    target: str | None
    state: str = "reserving"
    attempt: int = 1
    epoch: int = 0
    tries: int = 0
    send_started: float | None = None
    lease_until: float | None = None
    next_try: float | None = None
    handle: str | None = None
    held_reason: str | None = None
    held_at: float | None = None
    owner: str | None = None
    releases: int = 0
    sends: int = 0
    finding: tuple[str, str] | None = None  # (author, category) in the current attempt
    authors: set[str] = field(default_factory=set)  # who queried or wrote a finding in the current attempt
    # Evidence for the current attempt: what says the remote ran it (state, handle), and the newest handle
    # any evidence named (queries and fenced accepted outcomes), which a query then asks about.
    ran: tuple[str, str | None] | None = None
    ev_handle: str | None = None

    @property
    def idem(self) -> str:
        return idem_key(self.job_id, self.op)

    @property
    def key(self) -> JobKey:
        return JobKey(self.job_id, self.op)


def model_config(sink: Path) -> Config:
    return parse_config({
        "timezone": "UTC",
        "policy": {"lease_seconds": LEASE, "stale_reserving_seconds": STALE, "retry_backoff_seconds": BACKOFF},
        "operators": {"tina": ["triage"], "ann": ["triage", "approver"], "bob": ["triage", "approver"]},
        "remotes": {
            "gem": {"kind": "gemini", "base_url": "http://127.0.0.1:9"},
            "store": {"kind": "http", "url": "http://127.0.0.1:9/cleanup"},
        },
        "operations": {
            "gen": {"remote": "gem", "daily_quota": QUOTA["gen"], "sink": str(sink)},
            "clean": {"remote": "store", "daily_quota": QUOTA["clean"], "sink": str(sink)},
        },
    }, base_dir=sink.parent)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="reclaim-model-"))
        self.path: Any = self.new_ledger()
        self.sink = self.dir / "results"
        create_ledger(self.path)
        self.cfg = model_config(self.sink)
        self.conn = connect(self.path)
        self.clock = ManualClock(T0)
        self.fakes = {
            "gen": ModelRemote("gem", "gemini", SEARCHABLE["gen"], self.path),
            "clean": ModelRemote("store", "http", SEARCHABLE["clean"], self.path),
        }
        by_remote = {self.cfg.operations[op].remote: fake for op, fake in self.fakes.items()}
        self.remotes = RemoteCache(self.cfg, factory=lambda c, op: by_remote[c.operations[op].remote])
        self.jobs: dict[tuple[str, str], MJob] = {}
        self.quota: Counter[tuple[str, str]] = Counter()
        self.fenced = 0
        self.zombies: list[Zombie] = []
        self.stale_reads: list[Job] = []
        self.steps = 0

    def new_ledger(self) -> Any:
        """Where this example's ledger lives: a fresh file."""
        return self.dir / "ledger.db"

    def teardown(self) -> None:
        event(f"steps: {self.steps // 10 * 10}+")
        self.conn.close()
        for fake in self.fakes.values():
            fake.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.clock.now()

    def today(self) -> str:
        return day_of(self.now, "UTC")

    def job(self, i: int, states: tuple[str, ...] = ()) -> MJob:
        """The i-th job, counting jobs in `states` first (small i are drawn most, so those are favoured)."""
        keys = sorted(self.jobs, key=lambda k: (self.jobs[k].state not in states, k))
        return self.jobs[keys[i % len(keys)]]

    def roles(self, actor: str) -> frozenset[str]:
        return self.cfg.roles_of(actor)

    def due(self, m: MJob) -> bool:
        return m.state == "reserving" and m.send_started is None and (m.next_try is None or m.next_try <= self.now)

    def expect(self, allowed: bool, action: Any) -> Any:
        """Run a triage action; when the model says it is refused, it must raise Refused and write nothing."""
        if allowed:
            return action()
        before = job_fingerprint(self.conn)
        with pytest.raises(Refused):
            action()
        assert job_fingerprint(self.conn) == before
        return None

    def hold(self, m: MJob, reason: str) -> None:
        m.state, m.held_reason, m.lease_until, m.held_at = "held", reason, None, self.now

    def apply_outcome(self, m: MJob, outcome: SendOutcome, tries: int) -> None:
        """The model of record_send_outcome for a write the ledger accepts."""
        m.lease_until = None
        if outcome.kind == "accepted":
            m.state, m.handle = "submitted", outcome.handle
        elif outcome.kind == "not_delivered":
            m.send_started = None
            m.next_try = self.now + min(BACKOFF * 2 ** max(tries - 1, 0), 3600.0)
        elif outcome.kind == "invalid":
            m.state = "failed"
        else:
            self.hold(m, HELD_UNKNOWN)

    def claimed(self, m: MJob) -> None:
        m.epoch += 1
        m.tries += 1
        m.send_started = self.now
        m.lease_until = self.now + LEASE

    # -- reserve and send -----------------------------------------------------------------------------
    @rule(job_id=st.sampled_from(JOB_IDS), op=st.sampled_from(OPS), on=st.sampled_from(TARGETS))
    def reserve_job(self, job_id: str, op: str, on: str | None) -> None:
        target = on
        day = self.today()
        if (job_id, op) in self.jobs:
            expected = "duplicate"
        elif self.quota[(op, day)] >= QUOTA[op]:
            expected = "quota_exceeded"
        elif target is not None and any(j.target == target and j.state == "held" for j in self.jobs.values()):
            expected = "blocked_by_hold"
        else:
            expected = "reserved"
        res = reserve(self.conn, self.cfg, op, {"input": f"do {job_id}"}, clock=self.clock, job_id=job_id,
                      target=target, actor="svc")
        assert res.outcome == expected
        if expected == "blocked_by_hold":  # by the job held first on the target (then by job id, operation)
            first = min((j for j in self.jobs.values() if j.target == target and j.state == "held"),
                        key=lambda j: (j.held_at, j.job_id, j.op))
            assert res.blocking == JobKey(first.job_id, first.op)
        event(f"reserve: {expected}")
        if expected == "reserved":
            self.jobs[(job_id, op)] = MJob(job_id, op, target)
            self.quota[(op, day)] += 1

    @initialize(specs=st.lists(st.tuples(st.sampled_from(JOB_IDS), st.sampled_from(OPS), st.sampled_from(TARGETS)),
                               min_size=2, max_size=4))
    def first_jobs(self, specs: list[tuple[str, str, str | None]]) -> None:
        for job_id, op, on in specs:
            self.reserve_job(job_id, op, on)

    def _send(self, m: MJob, kind: SendKind, created: bool) -> None:
        fake = self.fakes[m.op]
        fake.next, fake.create_on_unknown = kind, created
        due = self.due(m)
        outcome, applied = send_one(self.conn, self.cfg, m.key, fake, clock=self.clock, owner="w-send")
        if not due:
            assert outcome is None and applied is None
            return
        assert outcome is not None and applied is not None and applied.ok
        self.claimed(m)
        m.sends += 1
        self.apply_outcome(m, outcome, m.tries)

    def _crash(self, m: MJob, sent: bool) -> Zombie | None:
        due = self.due(m)
        claim = claim_for_send(self.conn, self.cfg, m.key, owner="w-crash", now=self.now)
        if not due:
            assert claim is None
            return None
        assert claim is not None and claim.epoch == m.epoch + 1
        self.claimed(m)
        handle = None
        if sent:  # the request left; the reply died with the worker
            fake = self.fakes[m.op]
            fake.next = "accepted"
            out = fake.send(claim.job.payload, claim.job.idem_key, claim.job.attempt)
            handle = out.handle
            m.sends += 1
        return ((m.job_id, m.op), claim, handle)

    def _zombie_write(self, zombie: Zombie, accept: bool) -> None:
        key, claim, handle = zombie
        m = self.jobs[key]
        if handle is not None:
            outcome = SendOutcome("accepted", handle=handle) if accept else SendOutcome(
                "unknown", error="ReadTimeout: no reply", reason="timeout")
        else:
            outcome = SendOutcome("not_delivered", error="ConnectError") if accept else SendOutcome(
                "unknown", error="ReadTimeout: no reply", reason="timeout")
        applied = record_send_outcome(self.conn, self.cfg, claim, outcome, now=self.now)
        if m.state == "reserving" and m.epoch == claim.epoch:
            assert applied.ok
            self.apply_outcome(m, outcome, claim.job.tries)
            event("zombie write: accepted (epoch still held)")
        elif m.epoch != claim.epoch:
            assert not applied.ok and applied.refusal == "fenced"
            self.fenced += 1
            if outcome.kind == "accepted" and claim.job.attempt == m.attempt:
                self._evidence(m, "running", outcome.handle)  # a fenced accepted send is evidence
            event(f"zombie write: fenced, job now {m.state}")
        else:
            assert not applied.ok and applied.refusal == "state"

    @precondition(lambda self: self.jobs)
    @rule(i=pick, kind=st.sampled_from(OUTCOMES), created=st.booleans())
    def send(self, i: int, kind: SendKind, created: bool) -> None:
        self._send(self.job(i, ("reserving",)), kind, created)

    @precondition(lambda self: self.jobs)
    @rule(i=pick, sent=st.booleans())
    def crash_mid_send(self, i: int, sent: bool) -> None:
        """A worker claims the job and dies (or freezes) before recording any outcome."""
        zombie = self._crash(self.job(i, ("reserving",)), sent)
        if zombie is not None:
            self.zombies = [*self.zombies[-4:], zombie]

    @precondition(lambda self: self.zombies)
    @rule(z=pick, accept=st.booleans())
    def zombie_writes(self, z: int, accept: bool) -> None:
        """A frozen worker wakes up and records its send's outcome with its old epoch: fenced if anyone
        claimed the job since (recovery, another worker), accepted only while its epoch still holds."""
        self._zombie_write(self.zombies.pop(z % len(self.zombies)), accept)

    @precondition(lambda self: any(self.due(m) for m in self.jobs.values()))
    @rule(i=pick, sent=st.booleans(), accept=st.booleans(), resend=st.sampled_from((True, False)),
          kind=st.sampled_from(OUTCOMES))
    def stale_worker_after_takeover(self, i: int, sent: bool, accept: bool, resend: bool, kind: SendKind) -> None:
        """Worker A claims a send and freezes past its lease; the recovery pass takes the job over, triage
        releases it, worker B may claim and send it again; then A wakes and writes its outcome with its
        old epoch. The epoch fence must refuse A's write even though the job is `reserving` again."""
        m = self.job(i, ("reserving",))
        zombie = self._crash(m, sent)
        if zombie is None:
            return
        self.advance_clock(LEASE + STALE)
        self.recover()
        self._query(m, "tina")
        self._finding(m, "tina", "not_received")
        self._release(m, "bob")
        if resend:
            self._send(m, kind, created=True)
        self._zombie_write(zombie, accept)

    @precondition(lambda self: any(m.state == "submitted" for m in self.jobs.values()))
    @rule(i=pick, state=st.sampled_from(POLL_STATES[:3]), kind=st.sampled_from(OUTCOMES))
    def stale_poller_after_resubmit(self, i: int, state: str, kind: SendKind) -> None:
        """A poller reads a submitted job and stalls; the job is lost remotely, held, released and sent
        again (a new epoch); then the stalled poller writes its old answer, which must be fenced."""
        m = self.job(i, ("submitted",))
        snapshot = triage.get_job(self.conn, m.key)
        self._poll(snapshot, "not_found")
        self._query(m, "ann")
        self._finding(m, "ann", "not_received")
        self._release(m, "bob")
        self._send(m, kind, created=False)
        self._poll(snapshot, state)

    @rule(seconds=st.sampled_from([LEASE + STALE, 86400.0, LEASE, 1.0, 3600.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(seconds=st.sampled_from([LEASE + STALE, 86400.0, LEASE]))
    def restart_worker_later(self, seconds: float) -> None:
        """Time passes, then a worker starts and runs its recovery pass."""
        self.advance_clock(seconds)
        self.recover()

    @rule()
    def recover(self) -> None:
        report = TickReport()
        found = held = 0
        for m in self.jobs.values():
            if not (m.state == "reserving" and m.send_started is not None and m.lease_until is not None):
                continue
            if self.now - m.send_started < STALE or self.now < m.lease_until + MARGIN:
                continue
            m.epoch += 1
            status = self.fakes[m.op].search(m.idem) if SEARCHABLE[m.op] else None
            if status is not None and status.state in ("running", "completed", "failed") and status.handle:
                m.state, m.handle, m.lease_until = "submitted", status.handle, None
                found += 1
            else:
                self.hold(m, HELD_SEARCH_EMPTY if SEARCHABLE[m.op] else HELD_NO_SEARCH)
                held += 1
        recover_stale(self.conn, self.cfg, self.remotes, clock=self.clock, owner="w-recover", report=report)
        assert (report.orphans_found, report.orphans_held, report.fenced) == (found, held, 0)
        if found or held:
            event(f"recover: {found} found, {held} held")

    # -- poll and deliver -----------------------------------------------------------------------------
    def _poll(self, job: Job, state: str) -> None:
        m = self.jobs[(job.job_id, job.operation)]
        result = {"text": "done"} if state == "completed" else None
        status = RemoteStatus(state, result=result, handle=job.handle, error=None if state != "failed" else "x")  # type: ignore[arg-type]
        with write_tx(self.conn):
            applied = record_poll(self.conn, self.cfg, job, status, actor="w-poll", now=self.now)
        if state == "running":
            assert applied is None
            return
        assert applied is not None
        if m.state == "submitted" and m.epoch == job.epoch:
            assert applied.ok
            if state == "completed":
                m.state = "done"
            elif state == "failed":
                m.state = "failed"
            else:
                self.hold(m, HELD_HANDLE_UNKNOWN)
        elif m.epoch != job.epoch:
            assert not applied.ok and applied.refusal == "fenced"
            self.fenced += 1
            event(f"poll write: fenced, job now {m.state}")
        else:
            assert not applied.ok and applied.refusal == "state"

    @precondition(lambda self: self.jobs)
    @rule(i=pick, state=st.sampled_from(POLL_STATES))
    def poll(self, i: int, state: str) -> None:
        self._poll(triage.get_job(self.conn, self.job(i, ("submitted",)).key), state)

    @precondition(lambda self: self.jobs)
    @rule(i=pick)
    def read_for_poll(self, i: int) -> None:
        """A poller reads a job, then stalls before writing (see stale_poll)."""
        job = triage.get_job(self.conn, self.job(i, ("submitted",)).key)
        if job.state == "submitted":
            self.stale_reads = [*self.stale_reads[-4:], job]

    @precondition(lambda self: self.stale_reads)
    @rule(z=pick, state=st.sampled_from(POLL_STATES[:3]))
    def stale_poll(self, z: int, state: str) -> None:
        self._poll(self.stale_reads.pop(z % len(self.stale_reads)), state)

    @rule()
    def deliver(self) -> None:
        report = TickReport()
        expected = 0
        for m in self.jobs.values():
            if m.state == "done":
                m.state = "consumed"
                expected += 1
        deliver_done(self.conn, self.cfg, clock=self.clock, owner="w-deliver", report=report)
        assert (report.delivered, report.fenced) == (expected, 0)

    @precondition(lambda self: self.jobs)
    @rule(i=pick)
    def deliver_then_crash(self, i: int) -> None:
        """The sink file is written, then the worker dies before marking the job consumed."""
        m = self.job(i, ("done",))
        if m.state == "done":
            deliver_to_folder(self.cfg.sink_dir(m.op), triage.get_job(self.conn, m.key))

    @precondition(lambda self: self.jobs)
    @rule(i=pick, status=st.sampled_from(["completed", "failed"]))
    def remote_progress(self, i: int, status: str) -> None:
        """The remote finishes the job's latest interaction (what a query or a search will see)."""
        m = self.job(i)
        fake = self.fakes[m.op]
        handle = fake.latest(m.idem)
        if handle is not None:
            fake.interactions[handle] = status

    # -- triage ---------------------------------------------------------------------------------------
    def _query(self, m: MJob, actor: str) -> None:
        fake = self.fakes[m.op]
        asked = m.handle or m.ev_handle
        if asked:
            expected = fake.lookup(asked).state
        elif SEARCHABLE[m.op]:
            expected = fake.search(m.idem).state
        else:
            expected = "error"
        allowed = "triage" in self.roles(actor)
        status = self.expect(allowed, lambda: triage.query_job(
            self.conn, self.cfg, m.key, fake, actor=actor, clock=self.clock))
        if allowed:
            assert status.state == expected
            m.authors.add(actor)
            self._evidence(m, expected, status.handle)

    def _evidence(self, m: MJob, state: str, handle: str | None) -> None:
        """What ledger.evidence keeps: 'ran' until newer evidence positively says it is not there."""
        said = {"completed": "completed", "running": "running", "failed": "failed", "not_found": "absent"}.get(state)
        if said == "absent" and handle:
            said = "gone"  # a handle the remote once had: says nothing either way
        if said in ("completed", "running"):
            m.ran = (said, handle)
        elif said in ("absent", "failed") and m.ran is not None and handle in (None, m.ran[1]):
            m.ran = None
        if said is not None and handle:
            m.ev_handle = handle

    def _finding(self, m: MJob, actor: str, category: str) -> None:
        allowed = "triage" in self.roles(actor) and m.state in ("held", "failed")
        self.expect(allowed, lambda: triage.record_finding(
            self.conn, self.cfg, m.key, category, f"{actor} looked", actor=actor, clock=self.clock))
        if allowed:
            m.finding = (actor, category)
            m.authors.add(actor)

    def _release(self, m: MJob, actor: str) -> None:
        day = self.today()
        allowed = (
            "approver" in self.roles(actor)
            and m.state in ("held", "failed")
            and m.finding is not None
            and actor not in m.authors  # four-eyes: no finding or query of this attempt is the approver's
            and m.finding[1] not in ("in_progress", "completed_reply_lost")
            and m.ran is None
            and self.quota[(m.op, day)] < QUOTA[m.op]
        )
        self.expect(allowed, lambda: triage.release(self.conn, self.cfg, m.key, actor=actor, clock=self.clock,
                                                    reason="model"))
        event(f"release: {'allowed' if allowed else 'refused'}")
        if allowed:
            m.state, m.attempt, m.releases = "reserving", m.attempt + 1, m.releases + 1
            m.epoch += 1  # a decision fences whatever was in flight for the old state
            m.handle = m.send_started = m.next_try = m.lease_until = m.held_reason = None
            m.finding = m.ran = m.ev_handle = None
            m.authors = set()
            self.quota[(m.op, day)] += 1

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st)
    def query(self, i: int, actor: str) -> None:
        self._query(self.job(i, ("held", "failed")), actor)

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st, category=st.sampled_from(triage.FINDING_CATEGORIES))
    def finding(self, i: int, actor: str, category: str) -> None:
        self._finding(self.job(i, ("held", "failed")), actor, category)

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st)
    def release(self, i: int, actor: str) -> None:
        self._release(self.job(i, ("held", "failed")), actor)

    @precondition(lambda self: self.jobs)
    @rule(i=pick, finder=st.sampled_from(("tina", "ann", "bob")), four_eyes=st.booleans(),
          category=st.sampled_from(("not_received", "cannot_determine", "in_progress")))
    def query_find_release(self, i: int, finder: str, four_eyes: bool, category: str) -> None:
        """The usual triage: one operator queries and records a finding, another approver releases
        (or, without four_eyes, the finder tries to release on their own finding)."""
        m = self.job(i, ("held", "failed"))
        self._query(m, finder)
        self._finding(m, finder, category)
        self._release(m, ("ann" if finder == "bob" else "bob") if four_eyes else finder)

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st)
    def assign(self, i: int, actor: str) -> None:
        m = self.job(i, ("held", "failed"))
        allowed = "triage" in self.roles(actor) and m.state in ("held", "failed")
        self.expect(allowed, lambda: triage.assign(self.conn, self.cfg, m.key, actor, self.now + 3600,
                                                   actor=actor, clock=self.clock, reason="model"))
        if allowed:
            m.owner = actor

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st, use_remote=st.booleans())
    def reconcile(self, i: int, actor: str, use_remote: bool) -> None:
        m = self.job(i, ("held",))
        handle = (self.fakes[m.op].latest(m.idem) if use_remote else None) or f"manual-{m.job_id}-{m.op}"
        allowed = "approver" in self.roles(actor) and m.state == "held"
        # The fake remote keeps no labels to verify: the model reconciles as a person who checked elsewhere.
        self.expect(allowed, lambda: triage.reconcile(self.conn, self.cfg, m.key, handle, actor=actor,
                                                      clock=self.clock, reason="seen in the remote console",
                                                      unverified=True))
        if allowed:
            m.state, m.handle, m.held_reason = "submitted", handle, None
            m.epoch += 1

    @precondition(lambda self: self.jobs)
    @rule(i=pick, actor=actor_st, close=st.sampled_from(["reject", "remediate"]))
    def close(self, i: int, actor: str, close: str) -> None:
        m = self.job(i, ("held",))
        allowed = "approver" in self.roles(actor) and m.state == "held"
        if close == "reject":
            self.expect(allowed, lambda: triage.reject(self.conn, self.cfg, m.key, actor=actor, clock=self.clock,
                                                       reason="not needed any more"))
        else:
            self.expect(allowed, lambda: triage.remediate(self.conn, self.cfg, m.key, "done by hand",
                                                          actor=actor, clock=self.clock))
        if allowed:
            m.state = "rejected" if close == "reject" else "remediated"
            m.epoch += 1

    # -- the comparison, after every step -------------------------------------------------------------
    @invariant()
    def ledger_matches_model(self) -> None:
        self.steps += 1
        conn = connect(self.path, readonly=True)
        try:
            self._compare(conn)
        finally:
            conn.close()

    def _compare(self, conn: sqlite3.Connection) -> None:
        rows = {(r["job_id"], r["operation"]): r for r in conn.execute("SELECT * FROM jobs")}
        assert set(rows) == set(self.jobs)
        releases = Counter((r[0], r[1]) for r in conn.execute(
            "SELECT job_id, operation FROM events WHERE kind = 'release'"))
        for key, m in self.jobs.items():
            r = rows[key]
            assert r["state"] in STATES
            got = (r["state"], r["attempt"], r["epoch"], r["tries"], r["handle"], r["held_reason"], r["owner"],
                   r["send_started_at"], r["lease_until"], r["next_try_at"])
            want = (m.state, m.attempt, m.epoch, m.tries, m.handle, m.held_reason, m.owner,
                    m.send_started, m.lease_until, m.next_try)
            assert got == want, f"{key}: ledger {got} != model {want}"
            assert r["attempt"] == 1 + releases[key] == 1 + m.releases
            if m.state in ("submitted", "done", "consumed"):
                assert r["handle"]
            if m.state == "consumed":
                assert (self.cfg.sink_dir(m.op) / f"{m.idem}.json").is_file()
            # The one rule: never two sends of a job without an approved release between them.
            fake = self.fakes[m.op]
            assert fake.sends[m.idem] == m.sends
            # A "not delivered" send (refused before the remote took it) may be tried again; any other may
            # have run remotely, so the next one needs an approved release in between.
            seen = [n for kind, n in fake.send_log[m.idem] if kind != "not_delivered"]
            assert all(a < b for a, b in pairwise(seen)), f"{key}: sends {fake.send_log[m.idem]}"
            assert len(seen) <= 1 + releases[key]
        for job_id, op, n, lo, hi in conn.execute(
            "SELECT job_id, operation, COUNT(*), MIN(seq), MAX(seq) FROM events GROUP BY job_id, operation"
        ):
            assert (lo, hi) == (1, n), f"{job_id}/{op}: seq {lo}..{hi} for {n} events"
        used = {(r[0], r[1]): r[2] for r in conn.execute("SELECT operation, day, used FROM quota_usage")}
        assert used == {k: v for k, v in self.quota.items() if v}
        assert conn.execute("SELECT COUNT(*) FROM fenced_writes").fetchone()[0] == self.fenced
        # The jobs table is a projection of the events: replaying them through the event table rebuilds state,
        # epoch, attempt, and every event's step is one the table allows.
        bad: list[replay.BadStep] = []
        assert replay.mismatches(conn, bad) == []
        assert bad == [], [b.text() for b in bad]


LedgerMachine.TestCase.settings = settings(
    max_examples=examples(300),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
TestLedgerModel = LedgerMachine.TestCase
TestLedgerModel.pytestmark = [pytest.mark.slow]


class PgLedgerMachine(LedgerMachine):
    """The same model, on a fresh PostgreSQL database per example (the session's throwaway server)."""

    server: Any = None

    def new_ledger(self) -> Any:
        return self.server.new_database("model")


def test_the_model_holds_on_postgresql(pg_server: Any) -> None:
    PgLedgerMachine.server = pg_server
    run_state_machine_as_test(PgLedgerMachine, settings=settings(
        max_examples=int(os.environ.get("RECLAIM_PG_MODEL_EXAMPLES", examples(15))),
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    ))
