"""`reclaim worker` as a process: a signal mid-send finishes and records that send; a second signal
leaves at once and the job stays findable by the recovery pass; `events --follow` sees new events."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger import connect, reserve
from ledger.config import Config
from ledger.simulator import Simulator

OP = "article.generate"


def _reserve(ledger_path: Path, cfg: Config, clock: Any, job_id: str) -> None:
    conn = connect(ledger_path)
    try:
        assert reserve(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id).outcome == "reserved"
    finally:
        conn.close()


def test_sigterm_mid_send_finishes_and_records_the_send(
    sim: Simulator, cfg: Config, clock: Any, ledger_path: Path, config_path: Path,
    start_cli: Callable[..., Any], wait_for: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    _reserve(ledger_path, cfg, clock, "slow-1")
    sim.add_fault("slow", seconds=1.5)
    proc = start_cli("worker", "--interval", "0.1")
    wait_for(lambda: sim.count("create") == 1, timeout=20, what="the send to reach the simulator")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    job = read_job(ledger_path, "slow-1")
    assert job is not None and job.state in ("submitted", "done", "consumed") and job.handle
    assert sim.count("create") == 1


def test_second_signal_leaves_at_once_and_the_job_stays_findable(
    sim: Simulator, cfg: Config, clock: Any, ledger_path: Path, config_path: Path,
    start_cli: Callable[..., Any], run_cli: Callable[..., Any], wait_for: Callable[..., Any],
    read_job: Callable[..., Any],
) -> None:
    _reserve(ledger_path, cfg, clock, "hang-1")
    sim.add_fault("accept_then_hang")
    proc = start_cli("worker", "--interval", "0.1")
    wait_for(lambda: sim.count("create") == 1, timeout=20, what="the send to reach the simulator")
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    assert "stopping after the job under way" in proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode != 0
    job = read_job(ledger_path, "hang-1")
    assert job is not None and job.state == "reserving" and job.send_started_at is not None
    # Much later, the recovery pass finds the begun send without an outcome and holds it: no resend.
    res = run_cli("tick", now=job.send_started_at + 3600)
    assert res.rc == 4, res.stderr
    job = read_job(ledger_path, "hang-1")
    assert job.state == "held" and "no handle recorded" in (job.held_reason or "")
    assert sim.count("create") == 1


def test_events_follow_prints_events_committed_later(
    sim: Simulator, cfg: Config, clock: Any, ledger_path: Path, config_path: Path,
    start_cli: Callable[..., Any], wait_for: Callable[..., Any],
) -> None:
    _reserve(ledger_path, cfg, clock, "before")
    proc = start_cli("events", "--follow", "--json", "--after", "0")
    seen: list[dict[str, Any]] = []
    assert proc.stdout is not None
    seen.append(json.loads(proc.stdout.readline()))
    assert seen[0]["job_id"] == "before" and seen[0]["kind"] == "reserve"
    _reserve(ledger_path, cfg, clock, "after")
    line = proc.stdout.readline()  # blocks until the follower prints; the fixture kills it on a hang
    seen.append(json.loads(line))
    assert seen[1]["job_id"] == "after" and seen[1]["id"] > seen[0]["id"]
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=10)
