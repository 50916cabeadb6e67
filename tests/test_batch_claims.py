"""Workers take due jobs in batches (ledger.leases.pick_due) and claim each one only right before its send.

Creates are counted at the simulator (HTTP level); the ledger is read from fresh connections.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.leases import claim_for_send, pick_due, release_picks
from ledger.model import JobKey, idem_key
from ledger.reserve import reserve
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, record_send_outcome, tick

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)


def _reserve_many(conn: Any, cfg: Config, clock: ManualClock, n: int, prefix: str = "batch") -> list[JobKey]:
    keys = []
    for i in range(n):
        res = reserve(conn, cfg, OP, {"input": f"{prefix} {i}"}, clock=clock, job_id=f"{prefix}-{i:02d}")
        assert res.outcome == "reserved"
        keys.append(res.key)
    return keys


def _worker_child(ledger: str, cfg_dict: dict[str, Any], base_dir: str, now: float, barrier: Any, out: Any) -> None:
    """One worker process: ready its adapter and connection, wait for the others, run one pass."""
    try:
        cfg = parse_config(cfg_dict, base_dir=Path(base_dir))
        conn = connect(ledger)
        remotes = RemoteCache(cfg)
        remotes.for_operation(OP)
        barrier.wait(timeout=120)
        report = tick(conn, cfg, clock=ManualClock(now), remotes=remotes, owner=f"w{mp.current_process().pid}")
        out.put(("ok", report.sent, report.accepted))
        conn.close()
    except BaseException:
        out.put(("error", traceback.format_exc(), 0))
        barrier.abort()
        raise


def test_four_worker_processes_send_every_job_once(
    sim: Simulator, conn: Any, cfg: Config, config_dict: dict[str, Any], tmp_path: Path, clock: ManualClock,
    ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 60)
    sim.add_fault("slow", seconds=0.05, count=60)  # each create takes a moment, so the passes overlap
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_worker_child, args=(str(ledger_path), config_dict, str(tmp_path), clock.now(),
                                                     barrier, out)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in results), results
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert sum(r[1] for r in results) == 60
    assert sum(r[2] for r in results) == 60
    assert sum(1 for r in results if r[1] > 0) >= 2, f"the passes did not share the jobs: {results}"
    assert sim.count("create") == 60
    for key in keys:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
        job = read_job(ledger_path, key.job_id)
        assert job.state == "consumed" and job.epoch == 1 and job.tries == 1, job


def test_a_worker_killed_mid_batch_leaves_only_the_job_it_was_sending_uncertain(
    sim: Simulator, conn: Any, cfg: Config, config_path: Path, clock: ManualClock, ledger_path: Path,
    run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 5)
    # The worker picks all five, claims the first and dies right after that claim, before its send.
    done = run_cli("tick", now=clock.now(), env={"RECLAIM_CRASH_AT": "after_send_claim"})
    assert done.rc == -signal.SIGKILL, done
    first, *others = (read_job(ledger_path, k.job_id) for k in keys)
    assert first.state == "reserving" and first.send_started_at is not None and first.epoch == 1
    for job in others:  # picked, not claimed: no send start, no epoch bump, nothing that says "may be sent"
        assert job.state == "reserving" and job.send_started_at is None and job.epoch == 0 and job.tries == 0, job
        assert job.lease_owner == first.lease_owner
    assert sim.count("create") == 0

    # While the dead worker's picks last, another worker leaves those jobs alone ...
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 0 and sim.count("create") == 0
    # ... once they ran out it sends each of them once; the claimed one is not yet stale, so not touched.
    clock.advance(cfg.policy.lease_seconds + 1)
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 4 and report.orphans_held == 0
    assert sim.count("create") == 4
    assert sim.count("create", idem=idem_key(keys[0].job_id, OP)) == 0
    for key in keys[1:]:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
        assert read_job(ledger_path, key.job_id).state == "consumed"
    # The one it was sending is the only uncertain job: recovery holds it (Gemini cannot be searched by key).
    clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + cfg.policy.send_margin_seconds)
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.orphans_held == 1 and report.sent == 0
    assert read_job(ledger_path, keys[0].job_id).state == "held"
    assert sim.count("create") == 4


def test_a_pick_is_not_a_claim_and_a_stale_epochs_write_is_still_fenced(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    key, other = _reserve_many(conn, cfg, clock, 2, prefix="fence")
    conn_a, conn_b = connect(ledger_path), connect(ledger_path)
    try:
        picked = pick_due(conn_a, cfg, owner="worker-A", now=clock.now(), limit=10)
        assert [j.key for j in picked] == [key, other]
        assert pick_due(conn_b, cfg, owner="worker-B", now=clock.now(), limit=10) == []  # A's picks are passed by
        assert claim_for_send(conn_b, cfg, key, owner="worker-B", now=clock.now()) is None
        row = read_job(ledger_path, key.job_id)
        assert (row.epoch, row.send_started_at, row.lease_owner) == (0, None, "worker-A")

        # A claims and sends its first job, then stalls before recording the outcome.
        claim_a = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now())
        assert claim_a is not None and claim_a.epoch == 1
        outcome = RemoteCache(cfg).for_operation(OP).send(claim_a.job.payload, claim_a.job.idem_key,
                                                          claim_a.job.attempt)
        assert outcome.kind == "accepted"
        # Long after, B finds A's other pick run out and A's send stale: B sends the other job once and
        # holds A's uncertain one (epoch 2).
        clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + cfg.policy.send_margin_seconds)
        report = tick(conn_b, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
        assert (report.sent, report.orphans_held) == (1, 1)
        held = read_job(ledger_path, key.job_id)
        assert held.state == "held" and held.epoch == 2

        # A wakes: its late write with epoch 1 is refused, and its stale pick of the other job claims nothing.
        applied = record_send_outcome(conn_a, cfg, claim_a, outcome, now=clock.now())
        assert (applied.ok, applied.refusal) == (False, "fenced")
        assert read_job(ledger_path, key.job_id) == held
        assert claim_for_send(conn_a, cfg, other, owner="worker-A", now=clock.now()) is None
        assert release_picks(conn_a, "worker-A") == 0  # nothing of A's is left picked
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1
        assert sim.count("create", idem=idem_key(other.job_id, OP)) == 1
    finally:
        conn_a.close()
        conn_b.close()


def test_a_stopped_pass_gives_back_the_picks_it_did_not_send(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    import threading

    keys = _reserve_many(conn, cfg, clock, 5, prefix="stop")
    stop = threading.Event()

    def progress(step: str, done: int, total: int) -> None:
        if step == "send":
            stop.set()  # stop after the first send of the batch

    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-A", stop=stop, progress=progress)
    assert report.sent == 1 and sim.count("create") == 1
    for key in keys[1:]:
        job = read_job(ledger_path, key.job_id)
        assert (job.state, job.lease_owner, job.lease_until, job.epoch) == ("reserving", None, None, 0), job
    # No pick left behind: another worker sends the rest at once, without waiting for a lease to run out.
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 4 and sim.count("create") == 5
