"""Operator actions on held jobs: roles, four-eyes, the finding rule, remote state, quota; and what each does.

Every refusal must leave the ledger's fingerprint unchanged; every action is checked against the
simulator's count of create calls (a release sends exactly one more, reconcile/reject/remediate none).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import queries, triage
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.errors import BadInput, Refused
from ledger.model import JobKey, idem_key
from ledger.remotes import remote_for
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.worker import RemoteCache, submit_now, tick

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)


def _held_by_503(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, job_id: str = "held-1") -> JobKey:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _tick(conn: Any, cfg: Config, clock: ManualClock) -> Any:
    return tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="test-worker")


def _query(conn: Any, cfg: Config, key: JobKey, actor: str, clock: ManualClock) -> Any:
    return triage.query_job(conn, cfg, key, RemoteCache(cfg).for_operation(OP), actor=actor, clock=clock)


def _finding(conn: Any, cfg: Config, key: JobKey, actor: str, clock: ManualClock, category: str = "not_received") -> None:
    triage.record_finding(conn, cfg, key, category, f"{actor} checked the remote console", actor=actor, clock=clock)


def test_roles_triage_cannot_release_and_an_unknown_name_is_a_viewer(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    _query(conn, cfg, key, "bob", clock)
    _finding(conn, cfg, key, "bob", clock)
    before = fingerprint(ledger_path)

    with pytest.raises(Refused, match="alice lacks the approver role"):
        triage.release(conn, cfg, key, actor="alice", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before
    prev = triage.preview(conn, cfg, key, "release", "alice", clock)
    assert not prev.allowed and "approver" in (prev.reason or "")

    assert cfg.roles_of("dave") == {"viewer"}
    gets = sim.count("get")
    with pytest.raises(Refused, match="dave lacks the triage role"):
        _query(conn, cfg, key, "dave", clock)
    assert sim.count("get") == gets, "a refused query must not ask the remote"
    with pytest.raises(Refused, match="dave lacks the triage role"):
        triage.record_finding(conn, cfg, key, "not_received", "seen", actor="dave", clock=clock)
    with pytest.raises(Refused, match="dave lacks the approver role"):
        triage.reject(conn, cfg, key, actor="dave", clock=clock, reason="no")
    assert fingerprint(ledger_path) == before
    assert sim.count("create") == 1


def test_cli_release_by_triage_is_refused_with_exit_6(
    sim: Simulator, conn: Any, cfg: Config, config_path: Path, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str], run_cli: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    _finding(conn, cfg, key, "bob", clock)
    before = fingerprint(ledger_path)
    r = run_cli("release", key.job_id, "--operation", OP, "--reason", "retry", operator="alice", now=clock.now())
    assert r.rc == 6, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1
    assert "alice lacks the approver role" in r.stderr
    assert fingerprint(ledger_path) == before
    assert sim.count("create") == 1


def test_four_eyes_the_finding_author_cannot_release(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    status = _query(conn, cfg, key, "bob", clock)
    assert status.state == "error"  # no handle, and Gemini cannot be searched: the console must say so
    _finding(conn, cfg, key, "bob", clock)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="four-eyes"):
        triage.release(conn, cfg, key, actor="bob", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before

    triage.release(conn, cfg, key, actor="carol", clock=clock, reason="bob found nothing on the remote")
    job = read_job(ledger_path, key.job_id)
    assert (job.state, job.attempt) == ("reserving", 2)


def test_four_eyes_off_lets_the_author_release(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any, clock: ManualClock,
    ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    cfg = parse_config(make_config(policy={"four_eyes": False}), base_dir=tmp_path)
    key = _held_by_503(sim, conn, cfg, clock)
    _finding(conn, cfg, key, "bob", clock)
    triage.release(conn, cfg, key, actor="bob", clock=clock, reason="r")
    assert read_job(ledger_path, key.job_id).state == "reserving"


def test_release_requires_a_finding(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any, cfg: Config,
    clock: ManualClock, ledger_path: Path, fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="needs a finding"):
        triage.release(conn, cfg, key, actor="carol", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before

    lax = parse_config(make_config(policy={"release_requires_finding": False}), base_dir=tmp_path)
    triage.release(conn, lax, key, actor="carol", clock=clock, reason="policy allows it")
    assert read_job(ledger_path, key.job_id).state == "reserving"


@pytest.mark.parametrize("category", ["in_progress", "completed_reply_lost"])
def test_release_refused_when_the_finding_says_the_remote_ran_it(
    category: str, sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    _finding(conn, cfg, key, "alice", clock, category=category)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="reconcile instead"):
        triage.release(conn, cfg, key, actor="carol", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before


@pytest.mark.parametrize(("complete_after", "remote_state", "says"), [
    (0.0, "completed", "completed it"),
    (3600.0, "running", "is still running it"),
])
def test_release_refused_when_the_last_query_says_completed_or_running(
    complete_after: float, remote_state: str, says: str, sim: Simulator, conn: Any, cfg: Config,
    clock: ManualClock, ledger_path: Path, fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    # A real way to a held job with a handle: the remote answers one poll with 404 (handle unknown),
    # then a person's query finds the interaction after all.
    sim.configure(complete_after=complete_after)
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="flaky", remotes=RemoteCache(cfg))
    assert res.state == "submitted"
    sim.add_fault("status", status=404, method="get")
    _tick(conn, cfg, clock)
    job = read_job(ledger_path, "flaky")
    assert job.state == "held" and job.handle

    status = _query(conn, cfg, res.key, "alice", clock)
    assert status.state == remote_state
    _finding(conn, cfg, res.key, "alice", clock, category="cannot_determine")
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match=f"evidence from a query says the remote {says}"):
        triage.release(conn, cfg, res.key, actor="carol", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before
    assert not triage.preview(conn, cfg, res.key, "release", "carol", clock).allowed

    triage.reconcile(conn, cfg, res.key, job.handle, actor="carol", clock=clock, reason="the remote has it",
                     remote=remote_for(cfg, OP))
    assert read_job(ledger_path, "flaky").state == "submitted"
    assert sim.count("create") == 1


def test_release_refused_when_todays_quota_is_used_up(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any, clock: ManualClock,
    ledger_path: Path, fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    cfg = parse_config(make_config(daily_quota=1), base_dir=tmp_path)
    key = _held_by_503(sim, conn, cfg, clock)  # uses today's 1/1
    _finding(conn, cfg, key, "alice", clock)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="quota"):
        triage.release(conn, cfg, key, actor="carol", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before

    clock.set(parse_time("2026-12-02T09:00:00Z"))
    triage.release(conn, cfg, key, actor="carol", clock=clock, reason="r")
    assert read_job(ledger_path, key.job_id).state == "reserving"
    fresh = connect(ledger_path, readonly=True)
    try:
        days = queries.quota_history(fresh, cfg, clock.now(), days=2)[OP]
    finally:
        fresh.close()
    assert [(d.day, d.used) for d in days] == [("2026-12-01", 1), ("2026-12-02", 1)]


def test_release_sends_exactly_one_more_request_with_the_same_idem_key(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    idem = idem_key(key.job_id, OP)
    _finding(conn, cfg, key, "alice", clock)
    clock.advance(60)
    triage.release(conn, cfg, key, actor="carol", clock=clock, reason="the 503 was before acceptance")
    assert sim.count("create") == 1, "release itself must not send; the next pass does"

    _tick(conn, cfg, clock)
    assert sim.count("create") == 2
    assert sim.count("create", idem=idem) == 2
    (stored,) = sim.find_by_idem(idem)  # the 503 stored nothing; the release's send did
    assert stored["labels"] == {"idem": idem, "attempt": "2"}
    job = read_job(ledger_path, key.job_id)
    assert (job.state, job.attempt, job.idem_key) == ("consumed", 2, idem)

    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 2
    fresh = connect(ledger_path, readonly=True)
    try:
        kinds = [e.kind for e in events_store.job_events(fresh, key)]
    finally:
        fresh.close()
    # The old attempt stays in the history.
    assert kinds.index("send_unknown") < kinds.index("release") < kinds.index("accepted")


@pytest.mark.slow
def test_reconcile_attaches_the_handle_without_sending(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], tmp_path: Path, conn: Any, clock: ManualClock,
    ledger_path: Path, fingerprint: Callable[[Path], str], read_job: Callable[..., Any], cfg: Config,
) -> None:
    standard = cfg  # 5 s timeouts, for the poll after reconcile
    # 2 s: long enough that a loaded machine still sends the whole body before the remote hangs (a body cut short
    # is a send given up, still reserving, not the held outcome this test is about)
    cfg = parse_config(make_config(timeout_seconds=2.0), base_dir=tmp_path)
    sim.add_fault("accept_then_hang")
    res = submit_now(conn, cfg, OP, {"input": "slow"}, clock=clock, job_id="hung", remotes=RemoteCache(cfg))
    assert res.state == "held"
    # The person finds it in the remote's own console, by its idem label.
    (found,) = sim.find_by_idem(idem_key("hung", OP))
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="alice lacks the approver role"):
        triage.reconcile(conn, cfg, res.key, found["id"], actor="alice", clock=clock, reason="seen")
    with pytest.raises(BadInput, match="handle"):
        triage.reconcile(conn, cfg, res.key, "  ", actor="carol", clock=clock, reason="seen")
    assert fingerprint(ledger_path) == before

    triage.reconcile(conn, cfg, res.key, found["id"], actor="carol", clock=clock, reason="found in the console",
                     remote=remote_for(cfg, OP))
    job = read_job(ledger_path, "hung")
    assert (job.state, job.handle) == ("submitted", found["id"])
    _tick(conn, standard, clock)
    job = read_job(ledger_path, "hung")
    assert job.state == "consumed"
    assert job.result and "simulated reply" in job.result["text"]
    assert sim.count("create") == 1


def test_reject_needs_a_reason_and_an_approver(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    with pytest.raises(BadInput, match="reason"):
        triage.reject(conn, cfg, key, actor="carol", clock=clock, reason=" ")
    with pytest.raises(Refused, match="alice lacks the approver role"):
        triage.reject(conn, cfg, key, actor="alice", clock=clock, reason="not needed")
    assert fingerprint(ledger_path) == before

    triage.reject(conn, cfg, key, actor="carol", clock=clock, reason="the article was cancelled")
    assert read_job(ledger_path, key.job_id).state == "rejected"
    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 1


def test_remediate_needs_a_note(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    key = _held_by_503(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for blank in ("", "   "):
        with pytest.raises(BadInput, match="note"):
            triage.remediate(conn, cfg, key, blank, actor="carol", clock=clock)
    assert fingerprint(ledger_path) == before

    triage.remediate(conn, cfg, key, "written by hand, see ticket OPS-12", actor="carol", clock=clock)
    assert read_job(ledger_path, key.job_id).state == "remediated"
    fresh = connect(ledger_path, readonly=True)
    try:
        last = events_store.job_events(fresh, key)[-1]
    finally:
        fresh.close()
    assert (last.kind, last.actor, last.detail["note"]) == ("remediate", "carol", "written by hand, see ticket OPS-12")
    clock.advance(86_400)
    _tick(conn, cfg, clock)
    assert sim.count("create") == 1
