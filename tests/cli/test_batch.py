"""`reclaim batch`: one finding or decision for many held jobs, in one reviewed plan, each job its own event.

A storm of 503s holds 20 jobs. One finding is recorded for all (20 finding events); the approver who wrote it is
refused every release by four-eyes, in the plan and with nothing written; another approver releases the 20 in one
run (20 release events, one per job, read back from a fresh connection; the quota counts 20 more; nothing is sent
until a worker pass). A plan never writes; a release beyond today's quota is refused in the plan; bad input is one
line, exit 2, and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import batch as batch_ledger
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.model import JobFilter, JobKey
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
FINDING = ["--category", "not_received", "--note", "503 storm: the remote never got them (status page)"]


def _storm(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, n: int = 20) -> list[JobKey]:
    """`n` jobs held by a 503 on their create (each a timeout the remote may or may not have run)."""
    sim.add_fault("status", status=503, count=n)
    keys = []
    for i in range(n):
        res = submit_now(conn, cfg, OP, {"input": f"storm-{i}"}, clock=clock, job_id=f"storm-{i:02d}",
                         remotes=RemoteCache(cfg))
        assert res.state == "held", res
        keys.append(res.key)
    return keys


def _kinds(ledger_path: Path, keys: list[JobKey], kind: str) -> list[int]:
    """How many `kind` events each job has, read from a fresh connection."""
    fresh = connect(ledger_path, readonly=True)
    try:
        return [sum(1 for e in events_store.job_events(fresh, k) if e.kind == kind) for k in keys]
    finally:
        fresh.close()


@pytest.mark.slow
@pytest.mark.both_backends
def test_a_storm_of_holds_gets_one_finding_and_one_release(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    config_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    keys = _storm(sim, conn, cfg, clock)
    creates = sim.count("create")

    r = run_cli("batch", "finding", "--filter", f"op:{OP}", *FINDING, "--yes", operator="bob", now=clock.now())
    assert r.rc == 0, (r.stdout, r.stderr)
    assert "recorded the finding on 20 of 20 jobs as bob" in r.stdout
    assert _kinds(ledger_path, keys, "finding") == [1] * 20

    # bob wrote the finding: four-eyes refuses him every release, in the plan, and nothing is written
    before = fingerprint(ledger_path)
    dry = run_cli("batch", "release", "--filter", f"op:{OP}", "--reason", "the finding says not received",
                  "--json", operator="bob", now=clock.now())
    assert dry.rc == 6, (dry.stdout, dry.stderr)
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] is True and len(doc["jobs"]) == 20
    assert all(not j["allowed"] and j["refusal"].startswith("four-eyes: bob wrote a finding") for j in doc["jobs"])
    mine = run_cli("batch", "release", "--filter", f"op:{OP}", "--reason", "x", "--yes", operator="bob",
                   now=clock.now())
    assert mine.rc == 6 and "released 0 of 20 jobs" in mine.stdout
    assert fingerprint(ledger_path) == before

    # carol did not: her plan allows all 20 and says what it costs the quota; then one run releases them
    plan = run_cli("batch", "release", "--filter", f"op:{OP}", "--reason", "not received", "--dry-run",
                   operator="carol", now=clock.now())
    assert plan.rc == 0, (plan.stdout, plan.stderr)
    assert f"{OP} quota today 20/100 -> 40/100" in plan.stdout
    assert "would release 20 of 20 jobs, each its own event" in plan.stdout
    assert fingerprint(ledger_path) == before
    done = run_cli("batch", "release", "--filter", f"op:{OP}", "--reason", "not received", "--yes", "--json",
                   operator="carol", now=clock.now())
    assert done.rc == 0, (done.stdout, done.stderr)
    assert len(json.loads(done.stdout)["done"]) == 20
    assert _kinds(ledger_path, keys, "release") == [1] * 20
    fresh = connect(ledger_path, readonly=True)
    try:
        assert [jobs_store.find_job(fresh, k).state for k in keys] == ["reserving"] * 20  # type: ignore[union-attr]
        assert all(e.actor == "carol" for k in keys for e in events_store.job_events(fresh, k) if e.kind == "release")
    finally:
        fresh.close()
    assert sim.count("create") == creates  # a release sends nothing itself: the next worker pass does


def test_four_eyes_refuses_only_the_jobs_whose_finding_the_approver_wrote(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    config_path: Path, run_cli: Callable[..., Any],
) -> None:
    keys = _storm(sim, conn, cfg, clock, n=6)
    bobs = [k.job_id for k in keys[:2]]
    jobs = [a for j in bobs for a in ("--job", j)]
    assert run_cli("batch", "finding", *jobs, *FINDING, "--yes", operator="bob", now=clock.now()).rc == 0
    others = [a for k in keys[2:] for a in ("--job", k.job_id)]
    assert run_cli("batch", "finding", *others, *FINDING, "--yes", operator="alice", now=clock.now()).rc == 0
    r = run_cli("batch", "release", "--filter", f"op:{OP}", "--reason", "not received", "--yes", operator="bob",
                now=clock.now())
    assert r.rc == 6, (r.stdout, r.stderr)
    for j in bobs:
        assert f"refused  {j} / {OP}: four-eyes: bob wrote a finding" in r.stdout
    assert "released 4 of 6 jobs as bob" in r.stdout and "2 refused" in r.stdout
    assert _kinds(ledger_path, keys, "release") == [0, 0, 1, 1, 1, 1]


def test_a_plan_refuses_the_releases_beyond_todays_quota(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, config_dict: dict[str, Any],
) -> None:
    keys = _storm(sim, conn, cfg, clock, n=5)
    for k in keys:
        triage.record_finding(conn, cfg, k, "not_received", "503 storm", actor="alice", clock=clock)
    tight = dict(config_dict)
    tight["operations"] = {OP: {**config_dict["operations"][OP], "daily_quota": 7}}
    small = parse_config(tight)
    jobs = batch_ledger.select(conn, JobFilter(operation=OP))
    plan = batch_ledger.plan(conn, small, "release", jobs, {"reason": "storm"}, actor="carol", clock=clock)
    assert [i.allowed for i in plan.items] == [True, True, False, False, False]
    assert "quota today would be used up by the releases listed before it (7/7)" in str(plan.items[2].refusal)
    assert [(q.used, q.after, q.limit) for q in plan.quota] == [(5, 7, 7)]


@pytest.mark.both_backends
def test_a_time_window_selects_the_holds_of_one_burst(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    early = _storm(sim, conn, cfg, clock, n=2)
    clock.advance(3600)
    sim.add_fault("status", status=503, count=1)
    late = submit_now(conn, cfg, OP, {"input": "late"}, clock=clock, job_id="late-0", remotes=RemoteCache(cfg))
    assert late.state == "held"
    r = run_cli("batch", "reject", "--filter", "since:30m", "--reason", "duplicate of a manual run", "--json",
                operator="carol", now=clock.now())
    assert r.rc == 0, (r.stdout, r.stderr)
    assert [j["job_id"] for j in json.loads(r.stdout)["jobs"]] == ["late-0"]
    r = run_cli("batch", "reject", "--filter", "until:30m", "--reason", "x", "--json", operator="carol",
                now=clock.now())
    assert [j["job_id"] for j in json.loads(r.stdout)["jobs"]] == [k.job_id for k in early]


@pytest.mark.parametrize("args, says", [
    (["release", "--note", "x", "--reason", "y"], "--note: batch release does not take it; it takes --reason"),
    (["query", "--reason", "y"], "batch 'query': not a batch action"),
    (["release", "--reason", "y", "--dry-run", "--yes"], "--dry-run and --yes: give one"),
    (["release"], "--reason"),
    (["release", "--reason", "y", "--filter", "since:soon"], "filter since: 'soon': not a time"),
    (["release", "--reason", "y", "--filter", "op:nothing.*"], "no held job matches the filter"),
])
def test_bad_input_is_one_line_and_changes_nothing(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, args: list[str], says: str,
    config_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    _storm(sim, conn, cfg, clock, n=2)
    before = fingerprint(ledger_path)
    r = run_cli("batch", *args, operator="carol", now=clock.now())
    assert r.rc in (2, 6), (r.rc, r.stdout, r.stderr)
    assert r.rc == (6 if "no held job" in says else 2)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.stderr
    assert fingerprint(ledger_path) == before
