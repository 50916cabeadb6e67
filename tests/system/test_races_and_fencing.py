"""Races between processes and threads, and the epoch fence that refuses a stale worker's late write.

Counts are read from the simulator (HTTP level), the ledger from fresh connections.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import subprocess
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.leases import claim_for_send, claim_stale
from ledger.model import JobKey, idem_key
from ledger.remotes import remote_for
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, TickReport, record_send_outcome, submit_now, tick

OP = "article.generate"
RACE_JOBS = 5
BACKENDS = ("sqlite", "postgresql")  # the contract holds on both: each test runs on each (tests/conftest.py)


def _race_child(ledger: str, cfg_dict: dict[str, Any], base_dir: str, now: float, barrier: Any, out: Any) -> None:
    """One racer: for each job id, wait at the barrier with the other racer, then submit it."""
    try:
        cfg = parse_config(cfg_dict, base_dir=Path(base_dir))
        conn = connect(ledger)
        remotes = RemoteCache(cfg)
        clock = ManualClock(now)
        for i in range(RACE_JOBS):
            barrier.wait(timeout=60)
            res = submit_now(conn, cfg, OP, {"input": f"race {i}"}, clock=clock, job_id=f"race-{i}", remotes=remotes)
            out.put((i, res.outcome))
        conn.close()
    except BaseException:
        out.put((-1, traceback.format_exc()))
        barrier.abort()  # release the other racer at once instead of letting it wait out the timeout
        raise


def test_two_processes_racing_to_reserve_the_same_job(
    sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], tmp_path: Path, clock: ManualClock,
    read_job: Callable[..., Any],
) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_race_child, args=(str(ledger_path), config_dict, str(tmp_path), clock.now(), barrier, out))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    results: list[tuple[int, str]] = []
    deadline = time.monotonic() + 120
    while len(results) < 2 * RACE_JOBS:
        assert time.monotonic() < deadline, f"racers did not finish: {results}"
        try:
            item = out.get(timeout=0.5)
        except queue.Empty:
            assert all(p.exitcode in (None, 0) for p in procs), f"a racer died: {[p.exitcode for p in procs]}"
            continue
        assert item[0] >= 0, f"a racer failed:\n{item[1]}"
        results.append(item)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for i in range(RACE_JOBS):
        outcomes = sorted(o for j, o in results if j == i)
        assert outcomes == ["duplicate", "reserved"], f"race-{i}: {outcomes}"
        assert sim.count("create", idem=idem_key(f"race-{i}", OP)) == 1
        assert read_job(ledger_path, f"race-{i}").state == "submitted"
    assert sim.count("create") == RACE_JOBS


def test_two_cli_submits_started_together(
    sim: Simulator, ledger_path: Path, config_path: Path, clock: ManualClock,
    start_cli: Callable[..., subprocess.Popen[str]], read_job: Callable[..., Any],
) -> None:
    args = ["submit", OP, "--payload", json.dumps({"input": "cli race"}), "--job-id", "cli-race"]
    procs = [start_cli(*args, now=clock.now()) for _ in range(2)]
    results = [(p.communicate(timeout=60), p.returncode) for p in procs]
    assert [rc for _, rc in results] == [0, 0], results
    firsts = sorted(out.split(":")[0] for (out, _), _ in results)
    assert firsts == ["duplicate", "reserved"], results
    assert sim.count("create") == 1
    assert read_job(ledger_path, "cli-race").state == "submitted"


def test_stale_workers_late_write_is_fenced(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    key = JobKey("fence-me", OP)
    assert reserve(conn, cfg, OP, {"input": "fence"}, clock=clock, job_id=key.job_id).outcome == "reserved"

    # Worker A claims the job and its send really goes out (the remote accepts it) ...
    conn_a = connect(ledger_path)
    claim_a = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now())
    assert claim_a is not None and claim_a.epoch == 1
    outcome = remote_for(cfg, OP).send(claim_a.job.payload, claim_a.job.idem_key, claim_a.job.attempt)
    assert outcome.kind == "accepted" and outcome.handle
    assert sim.count("create") == 1

    # ... but A stalls before recording it. Its lease and the stale window pass; worker B recovers the job.
    clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + 1)
    conn_b = connect(ledger_path)
    report = tick(conn_b, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.orphans_held == 1  # Gemini cannot be searched by key: held for a person
    assert sim.count("create") == 1
    held = read_job(ledger_path, key.job_id)
    assert held.state == "held" and held.epoch == 2 and held.handle is None
    fresh = connect(ledger_path, readonly=True)
    events_before = [e.to_dict() for e in events_store.job_events(fresh, key)]
    fresh.close()

    # A wakes up and writes its outcome with its old epoch: refused, nothing changes, the clue is kept.
    applied = record_send_outcome(conn_a, cfg, claim_a, outcome, now=clock.now())
    assert applied.ok is False
    assert applied.refusal == "fenced"
    assert read_job(ledger_path, key.job_id) == held
    fresh = connect(ledger_path, readonly=True)
    try:
        assert [e.to_dict() for e in events_store.job_events(fresh, key)] == events_before
        assert jobs_store.fenced_write_count(fresh) == 1
        (fw,) = jobs_store.fenced_writes_for(fresh, key)
    finally:
        fresh.close()
    assert (fw["actor"], fw["event"], fw["epoch"]) == ("worker-A", "accepted", 1)
    assert fw["detail"]["handle"] == outcome.handle
    assert sim.count("create") == 1
    conn_a.close()
    conn_b.close()


def test_stale_write_is_fenced_by_epoch_while_the_state_still_matches(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    # B has taken the stale send over (epoch 2) but not yet decided: the job is still `reserving`, so only
    # the epoch tells A's late write apart from B's.
    key = JobKey("fence-epoch", OP)
    assert reserve(conn, cfg, OP, {"input": "fence"}, clock=clock, job_id=key.job_id).outcome == "reserved"
    conn_a, conn_b = connect(ledger_path), connect(ledger_path)
    claim_a = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now())
    assert claim_a is not None
    outcome = remote_for(cfg, OP).send(claim_a.job.payload, claim_a.job.idem_key, claim_a.job.attempt)
    assert outcome.kind == "accepted"
    clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + 1)
    claim_b = claim_stale(conn_b, cfg, key, owner="worker-B", now=clock.now())
    assert claim_b is not None and claim_b.epoch == claim_a.epoch + 1
    taken = read_job(ledger_path, key.job_id)
    assert taken.state == "reserving"

    applied = record_send_outcome(conn_a, cfg, claim_a, outcome, now=clock.now())
    assert (applied.ok, applied.refusal) == (False, "fenced")
    assert read_job(ledger_path, key.job_id) == taken
    fresh = connect(ledger_path, readonly=True)
    try:
        assert jobs_store.fenced_write_count(fresh) == 1
        assert jobs_store.fenced_writes_for(fresh, key)[0]["detail"]["handle"] == outcome.handle
    finally:
        fresh.close()
    assert sim.count("create") == 1
    conn_a.close()
    conn_b.close()


def _reserve_many(conn: Any, cfg: Config, clock: ManualClock, n: int) -> list[JobKey]:
    keys = []
    for i in range(n):
        res = reserve(conn, cfg, OP, {"input": f"bulk {i}"}, clock=clock, job_id=f"bulk-{i:02d}")
        assert res.outcome == "reserved"
        keys.append(res.key)
    return keys


def test_two_ticks_in_parallel_threads_send_each_job_once(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 50)
    sim.add_fault("slow", seconds=0.02, count=50)  # each create takes a moment, so the two passes overlap
    barrier = threading.Barrier(2)
    reports: dict[str, TickReport] = {}
    errors: list[BaseException] = []

    def run(owner: str) -> None:
        try:
            c = connect(ledger_path, check_same_thread=False)
            barrier.wait(timeout=30)
            reports[owner] = tick(c, cfg, clock=clock, remotes=RemoteCache(cfg), owner=owner)
            c.close()
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"worker-{n}",)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sum(r.sent for r in reports.values()) == 50
    assert all(r.sent > 0 for r in reports.values()), "the two passes did not overlap"
    assert sim.count("create") == 50
    for key in keys:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
        assert read_job(ledger_path, key.job_id).state == "consumed"


def test_two_tick_processes_send_each_job_once(
    sim: Simulator, conn: Any, cfg: Config, config_path: Path, clock: ManualClock, ledger_path: Path,
    start_cli: Callable[..., subprocess.Popen[str]],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 50)
    procs = [start_cli("tick", "--json", now=clock.now()) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sum(json.loads(out)["sent"] for out, _ in outs) == 50
    assert sim.count("create") == 50
    for key in keys:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
