"""Storage clean-ups through the `http` remote and the loopback simulator: the article's three cases.

Counted at the receiving end: `sim.count("cleanup")` is the number of clean-up POSTs that reached the
simulator. Every ledger read is done on a fresh connection. Times come from a ManualClock (in process)
or the test launcher tests/support/clocked_reclaim.py (subprocesses); waiting for the simulator's job to finish is a bounded poll, never a sleep.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from child_env import inherited_env
from ledger_reads import job_fingerprint
from webhook_receiver import WebhookReceiver

from ledger import queries, triage
from ledger.clock import ManualClock, day_of, parse_time
from ledger.config import Config, RemoteConfig, load_config
from ledger.db import connect, create_ledger
from ledger.errors import ConfigError, Refused
from ledger.model import GROUPS, Event, Job, JobKey, idem_key
from ledger.remotes import remote_for
from ledger.remotes.http import HttpRemote, render_lookup
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store import quota as quota_store
from ledger.worker import RemoteCache, submit_now, tick

CLOCKED = Path(__file__).parents[1] / "support" / "clocked_reclaim.py"  # the CLI with a test clock (test-only)
ROOT = Path(__file__).resolve().parents[2]
OP = "storage.cleanup"
T0 = parse_time("2026-12-01T10:00:00Z")
DAY = 86400.0
SECRET_ENV = "RCLM_TEST_CLEANUP_TOKEN"
SECRET = "Bearer s3cret-7f1c9e2a-do-not-store"
PAYLOAD = {"bucket": "bucket-a", "older_than_days": 30}
STALE = 120.0
LEASE = 60.0


def config_text(
    url: str,
    lookup_url: str | None,
    *,
    dedupes: bool = True,
    timeout: float = 5.0,
    quota: int = 10,
    notify_url: str | None = None,
) -> str:
    """The TOML config every test here uses (subprocesses read the same file)."""
    lookup = f'lookup_url = "{lookup_url}"\n' if lookup_url else ""
    text = f"""
timezone = "UTC"

[policy]
stale_reserving_seconds = {STALE}
lease_seconds = {LEASE}
retry_backoff_seconds = 30

[identity]
source = "declared"

[operators]
scheduler = ["sender"]
alice = ["triage", "approver"]
bob = ["triage"]
carol = ["approver"]
vic = ["viewer"]

[remotes.cleaner]
kind = "http"
url = "{url}"
{lookup}timeout_seconds = {timeout}
dedupes_by_key = {"true" if dedupes else "false"}

[remotes.cleaner.header_env]
Authorization = "{SECRET_ENV}"

[operations."{OP}"]
remote = "cleaner"
daily_quota = {quota}
sink = "results"
"""
    if notify_url:
        text += f'\n[notify.oncall]\nkind = "webhook"\nurl = "{notify_url}"\nevents = ["held", "resolved"]\n'
    return text


@dataclass
class Env:
    """One test's simulator, config file, ledger file and clock."""

    sim: Simulator
    tmp: Path
    config_path: Path
    ledger: Path
    clock: ManualClock

    @property
    def cfg(self) -> Config:
        return load_config(self.config_path)

    def write_config(self, **kw: Any) -> Config:
        url = kw.pop("url", f"{self.sim.url}/cleanup")
        lookup = kw.pop("lookup_url", f"{self.sim.url}/cleanup/{{handle}}?key={{idem_key}}")
        self.config_path.write_text(config_text(url, lookup, **kw), encoding="utf-8")
        return self.cfg

    def conn(self) -> Any:
        return connect(self.ledger)

    def job(self, key: JobKey) -> Job:
        conn = connect(self.ledger, readonly=True)
        try:
            return triage.get_job(conn, key)
        finally:
            conn.close()

    def events(self, key: JobKey) -> list[Event]:
        conn = connect(self.ledger, readonly=True)
        try:
            return events_store.job_events(conn, key)
        finally:
            conn.close()

    def jobs_and_quota(self) -> tuple[list[tuple[object, ...]], dict[str, list[object]]]:
        conn = connect(self.ledger, readonly=True)
        try:
            jobs = [(j.job_id, j.state, j.epoch, j.attempt) for g in GROUPS for j in jobs_store.list_jobs(conn, g)]
            return sorted(jobs), {op: [(d.day, d.used) for d in days] for op, days in
                                  queries.quota_history(conn, self.cfg, self.clock.now(), days=3).items()}
        finally:
            conn.close()

    def fingerprint(self) -> str:
        conn = connect(self.ledger, readonly=True)
        try:
            return job_fingerprint(conn)
        finally:
            conn.close()

    def tick(self, cfg: Config | None = None) -> Any:
        conn = self.conn()
        try:
            return tick(conn, cfg or self.cfg, clock=self.clock)
        finally:
            conn.close()

    def submit(self, job_id: str, target: str = "bucket-a", cfg: Config | None = None) -> Any:
        conn = self.conn()
        try:
            return submit_now(conn, cfg or self.cfg, OP, PAYLOAD, clock=self.clock, job_id=job_id, target=target,
                              actor="cron")
        finally:
            conn.close()

    def act(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        conn = self.conn()
        try:
            return fn(conn, self.cfg, *args, clock=self.clock, **kw)
        finally:
            conn.close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with Simulator(dedupes_by_key=True).start() as sim:
        ledger = tmp_path / "ledger.db"
        create_ledger(ledger)
        e = Env(sim, tmp_path, tmp_path / "reclaim.toml", ledger, ManualClock(T0))
        e.write_config()
        yield e


def wait_for(pred: Callable[[], Any], timeout: float = 15.0, step: float = 0.05) -> Any:
    """Poll `pred` until truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(step)


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def reclaim(env: Env, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the `reclaim` CLI in a subprocess against this test's ledger and config."""
    inherited = inherited_env()
    penv = {**inherited, "RECLAIM_TEST_NOW": str(env.clock.now()), "RECLAIM_OPERATOR": "scheduler", **(extra_env or {})}
    return subprocess.run(
        [sys.executable, str(CLOCKED), *args, "--ledger", str(env.ledger), "--config", str(env.config_path)],
        env=penv, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )


# -- the three cases ---------------------------------------------------------------------------------------
def test_not_received_is_held_then_found_not_received_and_released_once(env: Env) -> None:
    env.sim.add_fault("drop_before_accept", method="cleanup")
    key = JobKey("retention-check 2026-12-01 bucket-a", OP)
    ikey = idem_key(key.job_id, key.operation)

    res = env.submit(key.job_id)
    assert (res.outcome, res.state) == ("reserved", "held")
    assert env.sim.count("cleanup", idem=ikey) == 1 and env.sim.cleanup_jobs() == []
    job = env.job(key)
    assert job.handle is None and "connection closed before a reply" in (job.held_reason or "")

    env.clock.advance(3600)
    env.tick()  # a held job is never retried by a pass
    assert env.job(key).state == "held" and env.sim.count("cleanup") == 1

    remote = RemoteCache(env.cfg).for_operation(OP)
    status = env.act(triage.query_job, key, remote, actor="bob")
    assert status.state == "not_found" and status.handle is None
    assert env.sim.count("cleanup_get", idem=ikey) == 1
    query = [e for e in env.events(key) if e.kind == "remote_query"][-1]
    assert (query.actor, query.detail["remote_state"]) == ("bob", "not_found")

    with pytest.raises(Refused, match="needs a finding"):
        env.act(triage.release, key, actor="carol", reason="r")
    env.act(triage.record_finding, key, "not_received", "GET /cleanup?key=... is 404; bucket unchanged", actor="bob")
    before = env.fingerprint()
    with pytest.raises(Refused, match="lacks the approver role"):
        env.act(triage.release, key, actor="bob", reason="r")
    assert env.fingerprint() == before

    env.act(triage.release, key, actor="carol", reason="remote shows no job for the key")
    job = env.job(key)
    assert (job.state, job.attempt, job.idem_key) == ("reserving", 2, ikey)
    assert env.sim.count("cleanup") == 1  # a release only re-queues; the pass sends
    conn = connect(env.ledger, readonly=True)
    assert quota_store.used(conn, OP, day_of(env.clock.now(), "UTC")) == 2  # the release counts against today
    conn.close()

    env.tick()
    job = env.job(key)
    assert job.state == "consumed"
    assert env.sim.count("cleanup", idem=ikey) == 2  # exactly one more POST
    assert job.result["selected"] == job.result["deleted"] == 100 and job.result["status"] == "completed"
    assert (env.tmp / "results").is_dir() and any((env.tmp / "results").iterdir())
    env.clock.advance(DAY)
    env.tick()
    assert env.sim.count("cleanup") == 2
    assert kinds(env.events(key)) == [
        "reserve", "send_started", "send_unknown", "remote_query", "finding", "release",
        "send_started", "accepted", "completed", "delivered",
    ]


def test_four_eyes_refuses_the_finding_author(env: Env) -> None:
    env.sim.add_fault("drop_before_accept", method="cleanup")
    key = JobKey("retention-check 2026-12-01 bucket-a", OP)
    env.submit(key.job_id)
    remote = RemoteCache(env.cfg).for_operation(OP)
    env.act(triage.query_job, key, remote, actor="alice")
    env.act(triage.record_finding, key, "not_received", "no job for the key", actor="alice")
    before = env.fingerprint()
    with pytest.raises(Refused, match="four-eyes"):
        env.act(triage.release, key, actor="alice", reason="r")
    assert env.fingerprint() == before and env.sim.count("cleanup") == 1


@pytest.mark.slow
def test_received_and_running_is_reconciled_without_a_second_post(env: Env) -> None:
    env.write_config(timeout=0.5)
    env.sim.configure(cleanup_seconds=2.5)
    env.sim.add_fault("accept_then_hang", method="cleanup")
    key = JobKey("retention-check 2026-12-01 bucket-a", OP)
    ikey = idem_key(key.job_id, OP)

    res = env.submit(key.job_id)
    assert res.state == "held" and "timeout" in (env.job(key).held_reason or "")
    assert env.sim.count("cleanup") == 1 and len(env.sim.cleanup_jobs()) == 1

    remote = RemoteCache(env.cfg).for_operation(OP)
    status = env.act(triage.query_job, key, remote, actor="bob")
    assert status.state == "running", status
    assert status.handle == env.sim.cleanup_jobs()[0]["id"]
    assert status.snapshot["selected"] == 100 and 0 <= status.snapshot["deleted"] < 100
    assert status.snapshot["status"] in ("accepted", "running")
    recorded = [e for e in env.events(key) if e.kind == "remote_query"][-1].detail
    assert recorded["snapshot"]["selected"] == 100 and recorded["handle"] == status.handle

    # Even a finding that would allow a release does not: the last query says the remote is running it.
    env.act(triage.record_finding, key, "cannot_determine", "bucket size unchanged so far", actor="bob")
    before = env.fingerprint()
    with pytest.raises(Refused, match="evidence from a query says the remote is still running it"):
        env.act(triage.release, key, actor="carol", reason="r")
    assert env.fingerprint() == before
    env.act(triage.record_finding, key, "in_progress", f"{status.handle} running", actor="bob")

    env.act(triage.reconcile, key, status.handle, actor="carol", reason="the remote is running it",
            remote=remote_for(env.cfg, OP))
    assert env.job(key).state == "submitted" and env.job(key).handle == status.handle

    def consumed() -> bool:
        env.tick()
        return env.job(key).state == "consumed"

    wait_for(consumed, timeout=20.0)
    job = env.job(key)
    assert job.result["deleted"] == job.result["selected"] == 100
    assert env.sim.count("cleanup", idem=ikey) == 1 and env.sim.count("cleanup") == 1
    assert "completed" in kinds(env.events(key)) and "release" not in kinds(env.events(key))


def test_completed_with_reply_lost_is_reconciled_with_its_counts(env: Env) -> None:
    env.sim.add_fault("complete_lose_reply", method="cleanup")
    key = JobKey("retention-check 2026-12-01 bucket-a", OP)
    res = env.submit(key.job_id)
    assert res.state == "held" and env.sim.count("cleanup") == 1

    remote = RemoteCache(env.cfg).for_operation(OP)
    status = env.act(triage.query_job, key, remote, actor="bob")
    assert status.state == "completed"
    assert status.snapshot["selected"] == status.snapshot["deleted"] == 100
    env.act(triage.record_finding, key, "cannot_determine", "no reply seen", actor="bob")
    before = env.fingerprint()
    with pytest.raises(Refused, match="evidence from a query says the remote completed it"):
        env.act(triage.release, key, actor="carol", reason="r")
    assert env.fingerprint() == before
    env.act(triage.record_finding, key, "completed_reply_lost", "deleted 100/100", actor="bob")
    env.act(triage.reconcile, key, status.handle, actor="carol", reason="completed, reply lost",
            remote=remote_for(env.cfg, OP))
    env.tick()
    job = env.job(key)
    assert job.state == "consumed" and job.result["deleted"] == 100
    assert env.sim.count("cleanup") == 1


# -- orphans: worker died after the remote accepted ----------------------------------------------------------
@pytest.mark.parametrize("dedupes", [True, False])
def test_orphan_is_attached_only_when_the_remote_dedupes_by_key(env: Env, dedupes: bool) -> None:
    cfg = env.write_config(dedupes=dedupes)
    env.sim.configure(dedupes_by_key=dedupes)
    key = JobKey("retention-check 2026-12-01 bucket-a", OP)
    ikey = idem_key(key.job_id, OP)
    proc = reclaim(env, "submit", OP, "--payload", json.dumps(PAYLOAD), "--job-id", key.job_id,
                   "--target", "bucket-a", extra_env={"RECLAIM_CRASH_AT": "after_remote_accept"})
    assert proc.returncode == -9, proc.stderr
    assert env.sim.count("cleanup", idem=ikey) == 1
    job = env.job(key)
    assert (job.state, job.handle, job.send_started_at) == ("reserving", None, T0)

    env.clock.advance(30)  # lease still running: nobody touches it
    env.tick(cfg)
    assert env.job(key).state == "reserving" and env.sim.count("cleanup_get") == 0

    env.clock.advance(STALE + LEASE)
    report = env.tick(cfg)
    evs = env.events(key)
    assert env.sim.count("cleanup") == 1  # never re-sent
    humans = {"alice", "bob", "carol"}
    if dedupes:
        assert report.orphans_found == 1
        found = next(e for e in evs if e.kind == "orphan_found")
        assert found.to_state == "submitted" and found.detail["handle"] == env.sim.cleanup_jobs()[0]["id"]
        assert env.job(key).state == "consumed"
        assert not humans & {e.actor for e in evs}
        assert "orphan_held" not in kinds(evs)
    else:
        assert report.orphans_held == 1
        job = env.job(key)
        assert job.state == "held" and "does not dedupe" in (job.held_reason or "")
        assert env.sim.count("cleanup_get") == 0  # no automatic match was even attempted
        # A person can still search by key and reconcile: still one POST.
        remote = RemoteCache(cfg).for_operation(OP)
        status = env.act(triage.query_job, key, remote, actor="bob")
        assert status.state == "completed" and status.handle
        env.act(triage.record_finding, key, "completed_reply_lost", "found by key", actor="bob")
        env.act(triage.reconcile, key, status.handle, actor="carol", reason="found by key",
            remote=remote_for(env.cfg, OP))
        env.tick(cfg)
        assert env.job(key).state == "consumed" and env.sim.count("cleanup") == 1


def test_capabilities_follow_the_config_and_say_so() -> None:
    def caps(lookup: str | None, dedupes: bool) -> Any:
        return HttpRemote(RemoteConfig("r", "http", url="http://127.0.0.1:9/c", lookup_url=lookup,
                                       dedupes_by_key=dedupes)).capabilities

    both = caps("http://h/c/{handle}?key={idem_key}", True)
    assert (both.lookup_by_handle, both.search_by_key, both.dedupes_by_key) == (True, True, True)
    assert any("attached automatically" in s for s in both.explain())
    no_dedupe = caps("http://h/c/{handle}?key={idem_key}", False)
    assert no_dedupe.search_by_key and not no_dedupe.dedupes_by_key
    assert any("held for a person" in s and "search by key can show it" in s for s in no_dedupe.explain())
    by_handle = caps("http://h/c/{handle}", True)
    assert (by_handle.lookup_by_handle, by_handle.search_by_key) == (True, False)
    assert "cannot be searched by idem key (no list or search)" in by_handle.explain()
    nothing = caps(None, False)
    assert (nothing.lookup_by_handle, nothing.search_by_key) == (False, False)
    assert nothing.explain()[0] == "cannot look a job up by handle"


def test_lookup_url_rendering() -> None:
    t = "http://h:1/cleanup/{handle}?key={idem_key}&v=2"
    assert render_lookup(t, handle="cln 1") == "http://h:1/cleanup/cln%201?v=2"
    assert render_lookup(t, idem_key="k/1") == "http://h:1/cleanup?key=k%2F1&v=2"


# -- quota and holds -------------------------------------------------------------------------------------
def test_daily_quota_counts_cleanups_per_day(env: Env) -> None:
    cfg = env.write_config(quota=2)
    for target in ("bucket-a", "bucket-b"):
        assert env.submit(f"check 2026-12-01 {target}", target, cfg).outcome == "reserved"
    res = env.submit("check 2026-12-01 bucket-c", "bucket-c", cfg)
    assert res.outcome == "quota_exceeded" and (res.used, res.limit) == (2, 2)
    assert env.sim.count("cleanup") == 2
    conn = connect(env.ledger, readonly=True)
    assert jobs_store.find_job(conn, JobKey("check 2026-12-01 bucket-c", OP)) is None
    conn.close()

    env.clock.advance(DAY)
    res = env.submit("check 2026-12-02 bucket-c", "bucket-c", cfg)
    assert res.outcome == "reserved" and env.sim.count("cleanup") == 3
    # The calendar does not make a new job: yesterday's job id is still a duplicate, and sends nothing.
    assert env.submit("check 2026-12-01 bucket-a", "bucket-a", cfg).outcome == "duplicate"
    assert env.sim.count("cleanup") == 3


def test_new_days_cleanup_is_blocked_by_a_held_one_on_the_same_target(env: Env) -> None:
    env.sim.add_fault("status", status=503, method="cleanup")
    held = JobKey("check 2026-12-01 bucket-a", OP)
    assert env.submit(held.job_id).state == "held"

    env.clock.advance(DAY)
    jobs_before, quota_before = env.jobs_and_quota()
    res = env.submit("check 2026-12-02 bucket-a")
    assert res.outcome == "blocked_by_hold" and res.blocking == held
    # No job and no quota for the refused one; the held job's history says what it is holding up.
    assert env.jobs_and_quota() == (jobs_before, quota_before) and env.sim.count("cleanup") == 1
    blocked = [e for e in env.events(held) if e.kind == "blocked_new_job"]
    assert [e.detail["job_id"] for e in blocked] == ["check 2026-12-02 bucket-a"]
    assert env.submit("check 2026-12-02 bucket-b", "bucket-b").outcome == "reserved"  # other targets go on
    assert env.sim.count("cleanup") == 2

    proc = reclaim(env, "submit", OP, "--payload", json.dumps(PAYLOAD), "--job-id", "check 2026-12-02 bucket-a",
                   "--target", "bucket-a")
    assert proc.returncode == 5 and "must be resolved first" in proc.stdout
    assert env.sim.count("cleanup") == 2

    env.act(triage.reject, held, actor="carol", reason="superseded by today's check")
    assert env.submit("check 2026-12-02 bucket-a").outcome == "reserved"
    assert env.sim.count("cleanup") == 3


# -- how a send ends -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "state"),
    [(400, "failed"), (401, "reserving"), (403, "reserving"), (404, "reserving"), (429, "reserving"),
     (500, "held"), (503, "held")],
)
def test_http_status_classification(env: Env, status: int, state: str) -> None:
    env.sim.add_fault("status", status=status, method="cleanup")
    key = JobKey(f"check {status}", OP)
    env.submit(key.job_id)
    job = env.job(key)
    assert job.state == state and f"HTTP {status}" in (job.last_error or "")
    assert env.sim.count("cleanup") == 1
    env.clock.advance(3600)
    env.tick()
    # Not delivered is due again (exactly one more POST); failed and held are never re-sent.
    assert env.sim.count("cleanup") == (2 if state == "reserving" else 1)


def test_connection_refused_is_not_delivered_then_sent_once(env: Env) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = env.write_config(url=f"http://127.0.0.1:{port}/cleanup")
    key = JobKey("check refused", OP)
    env.submit(key.job_id, cfg=cfg)
    job = env.job(key)
    assert job.state == "reserving" and job.send_started_at is None and job.next_try_at is not None
    assert "could not connect" in (job.last_error or "")
    env.write_config()  # the service is reachable now
    env.clock.set(job.next_try_at)
    env.tick()
    assert env.job(key).state == "consumed" and env.sim.count("cleanup") == 1


def test_dns_failure_and_connect_timeout_are_not_delivered(env: Env) -> None:
    dns = HttpRemote(RemoteConfig("r", "http", url="http://reclaim-test.invalid/cleanup", timeout_seconds=2))
    out = dns.send({"a": 1}, "k", 1)
    assert out.kind == "not_delivered" and "gaierror" in (out.error or "")

    # A listener whose backlog is full drops new SYNs: the connect times out before a byte is sent.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers: list[socket.socket] = []
    try:
        while True:
            c = socket.socket()
            c.settimeout(0.2)
            fillers.append(c)
            try:
                c.connect(("127.0.0.1", port))
            except TimeoutError:
                break
            assert len(fillers) < 64, "backlog never filled"
        slow = HttpRemote(RemoteConfig("r", "http", url=f"http://127.0.0.1:{port}/cleanup", timeout_seconds=0.3))
        out = slow.send({"a": 1}, "k", 1)
        assert out.kind == "not_delivered" and "TimeoutError" in (out.error or "")
    finally:
        for c in fillers:
            c.close()
        srv.close()


def test_accepted_without_an_id_is_held(tmp_path: Path) -> None:
    with WebhookReceiver().start() as rx:
        rx.set_reply({"status": "accepted"}, status=202)
        out = HttpRemote(RemoteConfig("r", "http", url=rx.url)).send({"a": 1}, "k", 1)
    assert out.kind == "unknown" and out.reason == "accepted without a handle"


# -- headers from the environment ------------------------------------------------------------------------
def test_env_headers_are_sent(env: Env) -> None:
    with WebhookReceiver().start() as rx:
        rx.set_reply({"id": "rx-1", "status": "accepted", "selected": 3, "deleted": 0})
        rc = RemoteConfig("r", "http", url=rx.url, lookup_url=rx.url + "/{handle}",
                          header_env={"Authorization": SECRET_ENV})
        remote = HttpRemote(rc)
        out = remote.send(PAYLOAD, "idem-1", 1)
        assert (out.kind, out.handle) == ("accepted", "rx-1")
        st = remote.lookup("rx-1")
        assert st.state == "running" and st.snapshot["selected"] == 3
        post, get = rx.received()
        assert post.method == "POST" and post.body == PAYLOAD
        for r in (post, get):
            headers = {k.lower(): v for k, v in r.headers.items()}
            assert headers["authorization"] == SECRET
        assert {k.lower(): v for k, v in post.headers.items()}["idempotency-key"] == "idem-1"
    assert SECRET not in repr(remote) and not any(SECRET in s for s in remote.capabilities.explain())


def test_missing_header_env_is_a_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)
    rc = RemoteConfig("cleaner", "http", url="http://127.0.0.1:9/c", header_env={"Authorization": SECRET_ENV})
    with pytest.raises(ConfigError, match=f"environment variable {SECRET_ENV} .*Authorization.* not set"):
        HttpRemote(rc)


def test_secret_header_never_reaches_the_ledger(env: Env) -> None:
    # Every path that stores text from the remote: a held send, a query, a reconcile, a completed result,
    # an orphan recovered in a subprocess, and a CLI query.
    env.sim.add_fault("complete_lose_reply", method="cleanup")
    key = JobKey("check secret", OP)
    env.submit(key.job_id)
    remote = remote_for(env.cfg, OP)
    status = env.act(triage.query_job, key, remote, actor="bob")
    env.act(triage.record_finding, key, "completed_reply_lost", "seen", actor="bob")
    env.act(triage.reconcile, key, status.handle, actor="carol", reason="seen",
            remote=remote_for(env.cfg, OP))
    env.tick()
    assert env.job(key).state == "consumed"

    proc = reclaim(env, "submit", OP, "--payload", json.dumps(PAYLOAD), "--job-id", "check secret 2",
                   "--target", "bucket-b", extra_env={"RECLAIM_CRASH_AT": "after_remote_accept"})
    assert proc.returncode == -9
    env.clock.advance(STALE + LEASE + 1)
    env.tick()
    env.sim.add_fault("status", status=401, method="cleanup")
    env.submit("check secret 3", "bucket-c")
    out = reclaim(env, "query", key.job_id, "--operation", OP, "--operator", "bob", "--json")
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert env.sim.count("cleanup") == 3

    conn = connect(env.ledger, readonly=True)
    dumped = json.dumps([dict(r) for t in ("jobs", "events", "outbox", "fenced_writes")
                         for r in conn.execute(f"SELECT * FROM {t}")], default=str)
    conn.close()
    assert SECRET not in dumped and "s3cret" not in dumped
    for path in env.tmp.glob("ledger.db*"):  # the file and its WAL, byte for byte
        assert SECRET.encode() not in path.read_bytes() and b"s3cret" not in path.read_bytes()
    for path in (env.tmp / "results").iterdir():
        assert "s3cret" not in path.read_text(encoding="utf-8")


def test_a_remote_echoing_the_secret_is_redacted_before_the_ledger(env: Env) -> None:
    def echo(r: Any) -> Any:
        auth = {k.lower(): v for k, v in r.headers.items()}["authorization"]
        return {"error": {"message": f"bad token {auth}"}, "id": "rx-9", "status": "running", "token": auth}

    with WebhookReceiver().start() as rx:
        rx.set_reply(echo, status=401)
        cfg = env.write_config(url=rx.url, lookup_url=rx.url + "/{handle}")
        key = JobKey("check echo", OP)
        env.submit(key.job_id, cfg=cfg)
        job = env.job(key)
        assert job.state == "reserving" and f"bad token [redacted:{SECRET_ENV}]" in (job.last_error or "")
        rx.set_reply(echo, status=200)
        st = HttpRemote(cfg.remotes["cleaner"]).lookup("rx-9")
        assert st.state == "running" and st.snapshot["token"] == f"[redacted:{SECRET_ENV}]"
        assert SECRET not in json.dumps(st.snapshot)
    for path in env.tmp.glob("ledger.db*"):
        assert b"s3cret" not in path.read_bytes()
