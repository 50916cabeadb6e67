"""Remote create calls, counted at the HTTP level by the simulator, through the real google-genai SDK.

The rule under test: a job is sent at most once unless a person releases it. Every case reads the
count of `POST /v1/interactions` from the simulator and the job from a fresh ledger connection; a
refusal must also leave the ledger's fingerprint unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import queries
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, SubmitResult, submit_now, tick

OP = "article.generate"
PAYLOAD = {"input": "write the retention summary"}


def _submit(conn: Any, cfg: Config, clock: ManualClock, job_id: str, **kw: Any) -> SubmitResult:
    return submit_now(conn, cfg, OP, PAYLOAD, clock=clock, job_id=job_id, remotes=RemoteCache(cfg), **kw)


def _tick(conn: Any, cfg: Config, clock: ManualClock) -> Any:
    return tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="test-worker")


def _submit_args(job_id: str) -> list[str]:
    return ["submit", OP, "--payload", json.dumps(PAYLOAD), "--job-id", job_id]


# -- through the ledger functions ------------------------------------------------------------------------
def test_no_job_means_no_post(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock) -> None:
    report = _tick(conn, cfg, clock)
    assert sim.count("create") == 0
    assert report.sent == 0


def test_first_submit_posts_once_and_the_same_job_never_again(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    first = _submit(conn, cfg, clock, "j1")
    assert (first.outcome, first.state) == ("reserved", "submitted")
    assert sim.count("create") == 1
    assert sim.count("create", idem=idem_key("j1", OP)) == 1

    before = fingerprint(ledger_path)
    again = _submit(conn, cfg, clock, "j1")
    assert again.outcome == "duplicate"
    assert sim.count("create") == 1
    assert fingerprint(ledger_path) == before  # a duplicate writes nothing, not even quota

    clock.advance(3600)
    _tick(conn, cfg, clock)  # polls and delivers; must not create again
    assert sim.count("create") == 1
    job = read_job(ledger_path, "j1")
    assert job.state == "consumed"
    assert job.attempt == 1


def test_timed_out_send_is_held_and_never_resent(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any,
    clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    cfg = parse_config(make_config(timeout_seconds=0.5), base_dir=tmp_path)
    sim.add_fault("accept_then_hang")
    res = _submit(conn, cfg, clock, "hang")
    assert res.outcome == "reserved"
    assert res.state == "held"
    assert res.send is not None and res.send.reason == "timeout"
    assert sim.count("create") == 1
    # The remote did accept it: exactly the situation a re-send would duplicate.
    assert len(sim.find_by_idem(idem_key("hang", OP))) == 1

    assert _submit(conn, cfg, clock, "hang").outcome == "duplicate"
    for step in (0, 61, 121, 86_400):
        clock.advance(step)
        _tick(conn, cfg, clock)
    assert sim.count("create") == 1
    job = read_job(ledger_path, "hang")
    assert job.state == "held"
    assert job.held_reason and "timeout" in job.held_reason


def test_503_posts_exactly_once_and_holds(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any]
) -> None:
    sim.add_fault("status", status=503, count=5)  # would swallow SDK retries, if there were any
    res = _submit(conn, cfg, clock, "five-oh-three")
    assert res.state == "held"
    assert sim.count("create") == 1, "the SDK retried a create: HttpRetryOptions(attempts=1) is missing"
    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 1
    assert read_job(ledger_path, "five-oh-three").state == "held"


def test_same_job_after_midnight_is_a_duplicate_and_spends_no_new_quota(
    sim: Simulator, conn: Any, cfg: Config, ledger_path: Path, fingerprint: Callable[[Path], str]
) -> None:
    clock = ManualClock(parse_time("2026-12-01T23:59:50Z"))
    assert _submit(conn, cfg, clock, "nightly").outcome == "reserved"
    assert sim.count("create") == 1

    clock.set(parse_time("2026-12-02T00:00:10Z"))
    before = fingerprint(ledger_path)
    res = _submit(conn, cfg, clock, "nightly")
    assert res.outcome == "duplicate"
    assert sim.count("create") == 1
    assert fingerprint(ledger_path) == before

    fresh = connect(ledger_path, readonly=True)
    try:
        days = queries.quota_history(fresh, cfg, clock.now(), days=2)[OP]
    finally:
        fresh.close()
    assert [(d.day, d.used) for d in days] == [("2026-12-01", 1), ("2026-12-02", 0)]


@pytest.mark.slow
def test_quota_used_up_sends_nothing_and_writes_nothing(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any,
    clock: ManualClock, ledger_path: Path, fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    cfg = parse_config(make_config(daily_quota=2), base_dir=tmp_path)
    assert _submit(conn, cfg, clock, "q1").outcome == "reserved"
    assert _submit(conn, cfg, clock, "q2").outcome == "reserved"
    assert sim.count("create") == 2

    before = fingerprint(ledger_path)
    res = _submit(conn, cfg, clock, "q3")
    assert (res.outcome, res.used, res.limit) == ("quota_exceeded", 2, 2)
    assert sim.count("create") == 2
    assert fingerprint(ledger_path) == before
    assert read_job(ledger_path, "q3") is None


@pytest.mark.slow
def test_connection_refused_stays_reserving_then_sends_once_when_due(
    make_config: Callable[..., dict[str, Any]], free_port: Callable[[], int], tmp_path: Path, conn: Any,
    clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    port = free_port()  # nothing listens here until we start a simulator on it below
    cfg = parse_config(make_config(base_url=f"http://127.0.0.1:{port}"), base_dir=tmp_path)
    res = _submit(conn, cfg, clock, "refused")
    assert res.outcome == "reserved"
    assert res.send is not None and res.send.kind == "not_delivered"
    job = read_job(ledger_path, "refused")
    assert job.state == "reserving"
    assert job.last_error
    assert job.next_try_at is not None and job.next_try_at > clock.now()
    assert job.send_started_at is None  # an outcome was recorded: not a stale send

    late = Simulator(port=port, complete_after=0.0).start()
    try:
        _tick(conn, cfg, clock)  # not due yet
        assert late.count("create") == 0
        clock.set(job.next_try_at + 1)
        _tick(conn, cfg, clock)
        assert late.count("create") == 1
        assert late.count("create", idem=idem_key("refused", OP)) == 1
        clock.advance(3600)
        _tick(conn, cfg, clock)
        assert late.count("create") == 1
        assert read_job(ledger_path, "refused").state == "consumed"
    finally:
        late.stop()


def test_400_fails_with_one_post(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any]
) -> None:
    sim.add_fault("status", status=400)
    res = _submit(conn, cfg, clock, "bad-request")
    assert res.state == "failed"
    assert sim.count("create") == 1
    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 1
    job = read_job(ledger_path, "bad-request")
    assert job.state == "failed"
    assert "400" in (job.last_error or "")


@pytest.mark.slow
def test_429_is_not_delivered_and_waits_for_its_next_try(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any]
) -> None:
    sim.add_fault("status", status=429)
    res = _submit(conn, cfg, clock, "too-many")
    assert res.state == "reserving"
    assert sim.count("create") == 1
    job = read_job(ledger_path, "too-many")
    assert "429" in (job.last_error or "")
    assert job.next_try_at is not None and job.next_try_at > clock.now()

    _tick(conn, cfg, clock)  # same instant: not due
    assert sim.count("create") == 1
    clock.set(job.next_try_at)
    _tick(conn, cfg, clock)  # due: one more try, and only one
    assert sim.count("create") == 2
    assert read_job(ledger_path, "too-many").state == "consumed"


@pytest.mark.parametrize("fault", ["drop_before_accept", "complete_lose_reply"])
def test_lost_request_or_reply_is_held_with_one_post(
    fault: str, sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    read_job: Callable[..., Any],
) -> None:
    sim.add_fault(fault)
    res = _submit(conn, cfg, clock, f"lost-{fault}")
    assert res.state == "held"
    assert sim.count("create") == 1
    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 1
    assert read_job(ledger_path, f"lost-{fault}").state == "held"


# -- through the CLI -----------------------------------------------------------------------------------
def test_cli_tick_with_no_job_posts_nothing(
    sim: Simulator, ledger_path: Path, config_path: Path, clock: ManualClock, run_cli: Callable[..., Any]
) -> None:
    r = run_cli("tick", now=clock.now())
    assert r.rc == 0, r.stderr
    assert sim.count("create") == 0


def test_cli_submit_once_then_duplicate(
    sim: Simulator, ledger_path: Path, config_path: Path, clock: ManualClock, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    r = run_cli(*_submit_args("cli-1"), now=clock.now())
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("reserved")
    assert sim.count("create") == 1

    before = fingerprint(ledger_path)
    r = run_cli(*_submit_args("cli-1"), now=clock.now())
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("duplicate")
    assert sim.count("create") == 1
    assert fingerprint(ledger_path) == before
    assert read_job(ledger_path, "cli-1").state == "submitted"


@pytest.mark.slow
def test_cli_timed_out_send_is_held_then_duplicate_and_tick_sends_nothing(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    ledger_path: Path, clock: ManualClock, run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    write_config(make_config(timeout_seconds=0.5))
    sim.add_fault("accept_then_hang")
    r = run_cli(*_submit_args("cli-hang"), now=clock.now())
    assert r.rc == 4, (r.stdout, r.stderr)  # 4 = held
    assert sim.count("create") == 1
    r = run_cli(*_submit_args("cli-hang"), now=clock.now() + 10)
    assert (r.rc, r.stdout.split(":")[0]) == (0, "duplicate")
    r = run_cli("tick", now=clock.now() + 86_400)
    assert r.rc in (0, 4), r.stderr
    assert sim.count("create") == 1
    assert read_job(ledger_path, "cli-hang").state == "held"


def test_cli_503_is_held_with_one_post(
    sim: Simulator, ledger_path: Path, config_path: Path, clock: ManualClock, run_cli: Callable[..., Any]
) -> None:
    sim.add_fault("status", status=503, count=5)
    r = run_cli(*_submit_args("cli-503"), now=clock.now())
    assert r.rc == 4, (r.stdout, r.stderr)
    assert "held" in r.stdout
    assert sim.count("create") == 1


def test_cli_same_job_after_midnight_is_a_duplicate(
    sim: Simulator, ledger_path: Path, config_path: Path, cfg: Config, run_cli: Callable[..., Any]
) -> None:
    r = run_cli(*_submit_args("cli-night"), now="2026-12-01T23:59:50Z")
    assert r.rc == 0, r.stderr
    r = run_cli(*_submit_args("cli-night"), now="2026-12-02T00:00:10Z")
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("duplicate")
    assert sim.count("create") == 1
    fresh = connect(ledger_path, readonly=True)
    try:
        days = queries.quota_history(fresh, cfg, parse_time("2026-12-02T00:00:10Z"), days=2)[OP]
        assert jobs_store.find_job(fresh, JobKey("cli-night", OP)).quota_day == "2026-12-01"
    finally:
        fresh.close()
    assert [(d.day, d.used) for d in days] == [("2026-12-01", 1), ("2026-12-02", 0)]


def test_cli_quota_used_up_exits_3_and_writes_nothing(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    ledger_path: Path, clock: ManualClock, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    write_config(make_config(daily_quota=1))
    assert run_cli(*_submit_args("cli-q1"), now=clock.now()).rc == 0
    before = fingerprint(ledger_path)
    r = run_cli(*_submit_args("cli-q2"), now=clock.now())
    assert r.rc == 3, (r.stdout, r.stderr)
    assert "quota" in r.stdout
    assert sim.count("create") == 1
    assert fingerprint(ledger_path) == before
