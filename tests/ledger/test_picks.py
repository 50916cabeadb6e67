"""Workers take due jobs in batches by picks (ledger.picks: a table of their own, not job state) and claim
each job only right before its send; a dead or stopped worker's picks lapse within the pick window.

Creates are counted at the simulator (HTTP level); the ledger is read from fresh connections. Every test
runs on SQLite and on PostgreSQL (tests/conftest.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ledger_reads import QmarkSql, held_picks
from process_state import process_state

from ledger import audit
from ledger.clock import ManualClock, SystemClock
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger
from ledger.errors import LedgerLocked
from ledger.leases import claim_for_send
from ledger.model import JobKey, idem_key
from ledger.picks import pick_due, pick_window, release_picks
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, record_send_outcome, submit_now, tick

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)


def _reserve_many(conn: Any, cfg: Config, clock: Any, n: int, prefix: str = "batch") -> list[JobKey]:
    keys = []
    for i in range(n):
        res = reserve(conn, cfg, OP, {"input": f"{prefix} {i}"}, clock=clock, job_id=f"{prefix}-{i:02d}")
        assert res.outcome == "reserved"
        keys.append(res.key)
    return keys


def _fresh(ledger: Any) -> Any:
    return QmarkSql(connect(ledger))


def _picks(ledger: Any) -> list[tuple[JobKey, str, float]]:
    c = _fresh(ledger)
    try:
        return held_picks(c)
    finally:
        c.close()


def _events(ledger: Any, key: JobKey) -> list[tuple[Any, ...]]:
    """The job's events as (kind, from_state, to_state, epoch), in order."""
    c = _fresh(ledger)
    try:
        return [tuple(r) for r in c.execute(
            "SELECT kind, from_state, to_state, epoch FROM events WHERE job_id = ? AND operation = ? ORDER BY seq",
            (key.job_id, key.operation),
        ).fetchall()]
    finally:
        c.close()


def _verified(ledger: Any) -> None:
    c = _fresh(ledger)
    try:
        verdict = audit.verify(c)
        assert verdict.ok, verdict
    finally:
        c.close()


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


def test_four_worker_processes_send_every_job_once_and_picks_never_show_as_job_changes(
    sim: Simulator, conn: Any, cfg: Config, config_dict: dict[str, Any], tmp_path: Path, clock: ManualClock,
    ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    # A job sent the unbatched way (reserve, then send at once) is what every batched job must look like.
    control = submit_now(conn, cfg, OP, {"input": "control"}, clock=clock, job_id="control")
    assert control.state == "submitted"
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
    assert sim.count("create") == 61
    expected = _events(ledger_path, control.key)
    assert [e[0] for e in expected] == ["reserve", "send_started", "accepted", "completed", "delivered"], expected
    for key in keys:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
        job = read_job(ledger_path, key.job_id)
        assert job.state == "consumed" and job.epoch == 1 and job.tries == 1, job
        assert _events(ledger_path, key) == expected, key  # a pick wrote no event and changed no epoch
    assert _picks(ledger_path) == []  # every pick ended by its claim or given back
    _verified(ledger_path)  # the jobs are still exactly the replay of their events


def test_a_pick_writes_nothing_to_the_job_and_passes_other_workers_by(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    key, other = _reserve_many(conn, cfg, clock, 2, prefix="pick")
    before = [read_job(ledger_path, k.job_id) for k in (key, other)]
    events = [_events(ledger_path, k) for k in (key, other)]
    conn_a, conn_b = connect(ledger_path), connect(ledger_path)
    try:
        picked = pick_due(conn_a, cfg, owner="worker-A", now=clock.now(), limit=10)
        assert [j.key for j in picked] == [key, other]
        window = pick_window(cfg.policy)
        assert [(k, w, until) for k, w, until in _picks(ledger_path)] == [
            (key, "worker-A", clock.now() + window), (other, "worker-A", clock.now() + window)]
        # The jobs are untouched: same rows, same events; `verify` holds.
        assert [read_job(ledger_path, k.job_id) for k in (key, other)] == before
        assert [_events(ledger_path, k) for k in (key, other)] == events
        _verified(ledger_path)
        # Another worker passes A's live picks by, and cannot claim them either.
        assert pick_due(conn_b, cfg, owner="worker-B", now=clock.now(), limit=10) == []
        assert claim_for_send(conn_b, cfg, key, owner="worker-B", now=clock.now()) is None
        # A's claim ends its pick of that job in the same transaction.
        claim = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now(), expected_epoch=picked[0].epoch)
        assert claim is not None and claim.epoch == 1
        assert [k for k, _, _ in _picks(ledger_path)] == [other]
        # Once A's pick lapsed (one window, not a lease), B takes the job over; A's late claim is refused.
        clock.advance(window)
        assert window < cfg.policy.lease_seconds
        assert [j.key for j in pick_due(conn_b, cfg, owner="worker-B", now=clock.now(), limit=10)] == [other]
        assert claim_for_send(conn_a, cfg, other, owner="worker-A", now=clock.now()) is None
        # A claim that finds the job changed since its pick (another epoch) passes it by.
        assert claim_for_send(conn_b, cfg, other, owner="worker-B", now=clock.now(), expected_epoch=7) is None
        assert claim_for_send(conn_b, cfg, other, owner="worker-B", now=clock.now(), expected_epoch=0) is not None
        assert _picks(ledger_path) == []
        assert release_picks(conn_a, "worker-A", now=clock.now()) == 0  # nothing of A's is left picked
        assert sim.count("create") == 0
    finally:
        conn_a.close()
        conn_b.close()


def test_a_worker_killed_mid_batch_leaves_only_the_job_it_was_sending_uncertain(
    sim: Simulator, conn: Any, cfg: Config, config_path: Path, clock: ManualClock, ledger_path: Path,
    run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 6)
    # The worker picks all six, sends two, and dies when the remote accepted the third (not yet recorded).
    done = run_cli("tick", now=clock.now(), env={"RECLAIM_CRASH_AT": "after_remote_accept#3"})
    assert done.rc == -signal.SIGKILL, done
    jobs = [read_job(ledger_path, k.job_id) for k in keys]
    assert [j.state for j in jobs[:2]] == ["submitted", "submitted"]
    sending = jobs[2]
    assert sending.state == "reserving" and sending.send_started_at is not None and sending.epoch == 1
    for job in jobs[3:]:  # picked, never claimed: the job rows show nothing of it
        assert (job.state, job.send_started_at, job.epoch, job.tries, job.lease_owner) == (
            "reserving", None, 0, 0, None), job
    dead = {w for _, w, _ in _picks(ledger_path)}
    assert [k for k, _, _ in _picks(ledger_path)] == keys[3:] and len(dead) == 1
    assert sim.count("create") == 3
    verified = run_cli("verify")  # the picks left behind are no change to any job
    assert verified.rc == 0 and "the chain holds" in verified.stdout, verified

    # While the dead worker's picks last, another worker leaves those jobs alone ...
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 0 and sim.count("create") == 3
    # ... once they lapsed (one pick window: far less than a lease) it sends each of them once; the job
    # the dead worker was sending is claimed and its lease not out, so it is not touched.
    assert pick_window(cfg.policy) < cfg.policy.lease_seconds
    clock.advance(pick_window(cfg.policy))
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 3 and report.orphans_held == 0
    assert sim.count("create") == 6
    for key in keys:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
    for key in keys[3:]:
        assert read_job(ledger_path, key.job_id).state == "consumed"
    assert _picks(ledger_path) == []
    # The one it was sending is the only uncertain job: recovery holds it (Gemini cannot be searched by key).
    clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + cfg.policy.send_margin_seconds)
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.orphans_held == 1 and report.sent == 0
    assert read_job(ledger_path, keys[2].job_id).state == "held"
    assert [read_job(ledger_path, k.job_id).state for k in keys[:2]] == ["consumed", "consumed"]
    assert sim.count("create") == 6
    _verified(ledger_path)




LEASE, TIMEOUT, MARGIN, PICK = 4.0, 1.0, 0.5, 1.0


def test_a_stopped_worker_holding_picks_loses_them_and_its_stale_claim_is_fenced(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], tmp_path: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    doc = make_config(timeout_seconds=TIMEOUT, policy={
        "lease_seconds": LEASE, "send_margin_seconds": MARGIN, "stale_reserving_seconds": 0,
        "retry_backoff_seconds": 0, "pick_seconds": PICK,
    })
    write_config(doc)
    cfg = parse_config(doc, base_dir=tmp_path)
    conn = connect(ledger_path)
    try:
        keys = _reserve_many(conn, cfg, SystemClock(), 5, prefix="stop")
    finally:
        conn.close()
    # Worker A picks all five, sends the first, claims the second and is stopped (SIGSTOP) right there.
    a = start_cli("tick", "--json", env={"RECLAIM_PAUSE_AT": "after_send_claim#2"})
    wait_for(lambda: process_state(a.pid) == "T", timeout=60, what="worker A to stop after its second claim")
    assert sim.count("create") == 1
    assert {w for _, w, _ in _picks(ledger_path)} and [k for k, _, _ in _picks(ledger_path)] == keys[2:]

    # Others run passes (real time): once A's picks lapse (PICK s) one sends the three A picked; once A's
    # lease and margin are out, recovery holds the job A claimed (epoch 2).
    def others_done() -> bool:
        done = run_cli("tick")
        assert done.rc in (0, 4), done
        states = [read_job(ledger_path, k.job_id).state for k in keys]
        return states[1] == "held" and all(s == "consumed" for s in states[2:])

    wait_for(others_done, timeout=90, step=0.2, what="the other workers to take A's lapsed picks and hold its claim")
    assert read_job(ledger_path, keys[1].job_id).epoch == 2

    # A resumes: its window is closed (its lease ran out while it was stopped), so nothing is sent, and its
    # write with epoch 1 is refused by the fence; its stale picks claim nothing.
    os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=60)
    assert a.returncode in (0, 4), (out, err)
    assert sim.count("create", idem=idem_key(keys[1].job_id, OP)) == 0
    for key in (keys[0], *keys[2:]):
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1, key
    assert sim.count("create") == 4
    c = _fresh(ledger_path)
    try:
        fenced = c.execute("SELECT event, epoch FROM fenced_writes WHERE job_id = ?", (keys[1].job_id,)).fetchall()
        assert [tuple(r) for r in fenced] == [("send_abandoned", 1)]
    finally:
        c.close()
    assert read_job(ledger_path, keys[1].job_id).state == "held"
    assert _picks(ledger_path) == []
    _verified(ledger_path)


def test_a_stopped_pass_gives_back_the_picks_it_did_not_send(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    keys = _reserve_many(conn, cfg, clock, 5, prefix="stop")
    stop = threading.Event()

    def progress(step: str, done: int, total: int) -> None:
        if step == "send":
            stop.set()  # stop after the first send of the batch

    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-A", stop=stop, progress=progress)
    assert report.sent == 1 and sim.count("create") == 1
    assert _picks(ledger_path) == []
    for key in keys[1:]:
        job = read_job(ledger_path, key.job_id)
        assert (job.state, job.lease_owner, job.lease_until, job.epoch) == ("reserving", None, None, 0), job
    # No pick left behind: another worker sends the rest at once, without waiting for a window to lapse.
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 4 and sim.count("create") == 5


@pytest.mark.parametrize("error", [RuntimeError("the adapter broke"), LedgerLocked("ledger x: locked")])
def test_a_pass_that_fails_gives_back_its_picks_unless_the_ledger_is_locked(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:
    import ledger.worker.send as worker  # where the pass looks send_one up

    keys = _reserve_many(conn, cfg, clock, 4, prefix="err")
    real = worker.send_one
    calls: list[JobKey] = []

    def failing(*args: Any, **kw: Any) -> Any:
        calls.append(args[2])
        if len(calls) == 2:
            raise error
        return real(*args, **kw)

    monkeypatch.setattr(worker, "send_one", failing)
    with pytest.raises(type(error), match=str(error)):  # the pass's own error, not one from giving back
        tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-A")
    assert sim.count("create") == 1
    left = [k for k, _, _ in _picks(ledger_path)]
    if isinstance(error, LedgerLocked):
        assert left == keys[1:]  # not another locked write on the way out: they lapse within the window
        clock.advance(pick_window(cfg.policy))
    else:
        assert left == []
    monkeypatch.setattr(worker, "send_one", real)
    report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
    assert report.sent == 3 and sim.count("create") == 4


def test_a_stale_epochs_write_after_a_pick_is_still_fenced(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, read_job: Callable[..., Any],
) -> None:
    key, other = _reserve_many(conn, cfg, clock, 2, prefix="fence")
    conn_a, conn_b = connect(ledger_path), connect(ledger_path)
    try:
        picked = pick_due(conn_a, cfg, owner="worker-A", now=clock.now(), limit=10)
        claim_a = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now(), expected_epoch=picked[0].epoch)
        assert claim_a is not None and claim_a.epoch == 1
        outcome = RemoteCache(cfg).for_operation(OP).send(claim_a.job.payload, claim_a.job.idem_key,
                                                          claim_a.job.attempt)
        assert outcome.kind == "accepted"
        # A stalls before recording. Long after, B finds A's other pick lapsed and A's send stale: B sends
        # the other job once and holds A's uncertain one (epoch 2).
        clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + cfg.policy.send_margin_seconds)
        report = tick(conn_b, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B")
        assert (report.sent, report.orphans_held) == (1, 1)
        held = read_job(ledger_path, key.job_id)
        assert held.state == "held" and held.epoch == 2
        # A wakes: its late write with epoch 1 is refused, and its stale pick of the other job claims nothing.
        applied = record_send_outcome(conn_a, cfg, claim_a, outcome, now=clock.now())
        assert (applied.ok, applied.refusal) == (False, "fenced")
        assert read_job(ledger_path, key.job_id) == held
        assert claim_for_send(conn_a, cfg, other, owner="worker-A", now=clock.now(), expected_epoch=0) is None
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 1
        assert sim.count("create", idem=idem_key(other.job_id, OP)) == 1
        _verified(ledger_path)
    finally:
        conn_a.close()
        conn_b.close()


def test_on_postgresql_a_pass_whose_whole_batch_is_lost_to_a_renewed_pick_goes_on_to_the_next_due_job(
    sim: Simulator, pg_url: str, config_dict: dict[str, Any], write_config: Callable[..., Path], tmp_path: Path,
    clock: ManualClock, start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    """On PostgreSQL a pick writes no job row, so a pick committed after another picker read the rows can
    win every job of that picker's batch. The loser reads again and takes the next due job; its pass does
    not end as if nothing were due. (On SQLite the picker's write transaction keeps others out.)

    Worker B reads a batch of 20 that are all A's lapsed picks and is stopped there; A renews them; B,
    resumed, loses all 20 and sends the 21st job in the same pass."""
    from ledger.picks import renew_picks

    create_ledger(pg_url)
    ledger: Any = pg_url  # the URL goes where a ledger's path goes
    write_config(config_dict)
    cfg = parse_config(config_dict, base_dir=tmp_path)
    conn_a = connect(ledger)
    try:
        keys = _reserve_many(conn_a, cfg, clock, 21, prefix="lost")
        window = pick_window(cfg.policy)
        assert [j.key for j in pick_due(conn_a, cfg, owner="worker-A", now=clock.now(), limit=20)] == keys[:20]
        later = clock.now() + window + 1  # A's picks have lapsed: B may pick them
        b = start_cli("tick", "--json", ledger=ledger, now=later, env={"RECLAIM_PAUSE_AT": "after_pick_read"})
        wait_for(lambda: process_state(b.pid) == "T", timeout=60, what="worker B to stop after reading its batch")
        assert renew_picks(conn_a, cfg, "worker-A", now=later) == 20  # A, still alive, keeps its batch
        os.kill(b.pid, signal.SIGCONT)
        out, err = b.communicate(timeout=60)
        assert b.returncode == 0, (out, err)
    finally:
        conn_a.close()
    for key in keys[:20]:
        assert sim.count("create", idem=idem_key(key.job_id, OP)) == 0, key
    assert sim.count("create", idem=idem_key(keys[20].job_id, OP)) == 1
    assert sim.count("create") == 1
    assert [(k, w) for k, w, _ in _picks(ledger)] == [(k, "worker-A") for k in keys[:20]]
    _verified(ledger)
