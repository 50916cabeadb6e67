"""Worker liveness: `worker` and `tick` upsert a heartbeat row (not an event); `status` says how many workers
are passing and flags silence past policy.worker_silence_seconds; a v8 ledger migrates to the heartbeat table."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.audit import verify
from ledger.clock import ManualClock, SystemClock
from ledger.config import Config
from ledger.db import connect
from ledger.heartbeat import HEARTBEAT_SECONDS, WorkerBeat, read_board
from ledger.reservation import reserve
from ledger.store import events as events_store
from ledger.store.sqlite import AFTER_SCRIPT, APPLICATION_ID, MIGRATIONS, _statements
from ledger.worker import TickReport, tick

OP = "article.generate"
T0 = 1_796_126_400.0  # 2026-12-01T12:00:00Z


def _status(run_cli: Callable[..., Any], **kw: Any) -> dict[str, Any]:
    res = run_cli("status", "--json", **kw)
    assert res.rc == 0, res.stderr
    workers: dict[str, Any] = json.loads(res.stdout)["workers"]
    return workers


def _board(ledger: Path) -> Any:
    conn = connect(ledger, readonly=True)
    try:
        return read_board(conn)
    finally:
        conn.close()


def test_a_running_worker_is_counted_then_shown_stopped_after_sigterm(
    sim: Any, ledger_path: Path, config_path: Path, start_cli: Callable[..., subprocess.Popen[str]],
    run_cli: Callable[..., Any], wait_for: Callable[..., Any],
) -> None:
    proc = start_cli("worker", "--interval", "0.2")
    board = wait_for(lambda: (b := _board(ledger_path)).running and b, timeout=30,
                     what="the worker's first recorded pass")
    [beat] = board.running
    assert (beat.kind, beat.pid, beat.interval) == ("worker", proc.pid, 0.2) and beat.version
    workers = _status(run_cli)
    assert (workers["running"], workers["silent"], workers["unresponsive"]) == (1, False, 0), workers
    assert workers["last_pass_age_seconds"] < 30 and workers["summary"].startswith("1 worker, last pass ")
    text = run_cli("status")
    assert text.rc == 0 and "workers: 1 worker, last pass " in text.stdout, text

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    workers = _status(run_cli)
    assert workers["running"] == 0 and not workers["silent"], workers
    [row] = workers["recent"]
    assert row["state"] == "stopped" and row["stopped_at"] and row["error"] is None and row["worker_id"] == beat.worker_id
    text = run_cli("status")
    assert "no worker running, last pass" in text.stdout and "stopped" in text.stdout, text.stdout


def test_status_says_no_worker_pass_once_the_clock_passes_the_threshold(
    sim: Any, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    run_cli: Callable[..., Any],
) -> None:
    write_config(make_config())
    never = run_cli("status")
    assert never.rc == 0 and "WORKERS: no worker pass recorded yet" in never.stdout, never.stdout
    assert run_cli("tick").rc == 0
    passed = time.time()
    assert not _status(run_cli, now=passed + 60)["silent"]
    late = run_cli("status", now=passed + 400)  # 6 min 40 s later, on the test launcher's clock
    assert late.rc == 0 and "WORKERS: no worker pass for 6 min" in late.stdout, late.stdout
    assert "policy.worker_silence_seconds = 300 s" in late.stdout
    workers = _status(run_cli, now=passed + 400)
    assert workers["silent"] and workers["summary"].startswith("no worker pass for 6 min"), workers
    # The threshold is the config's: at 900 s the same silence is not flagged.
    write_config(make_config(policy={"worker_silence_seconds": 900}))
    workers = _status(run_cli, now=passed + 400)
    assert not workers["silent"] and workers["silence_seconds"] == 900, workers


def test_a_tick_records_its_counters_on_its_heartbeat_and_no_event(
    sim: Any, ledger_path: Path, config_path: Path, cfg: Config, run_cli: Callable[..., Any],
) -> None:
    conn = connect(ledger_path)
    try:
        assert reserve(conn, cfg, OP, {"input": "x"}, clock=SystemClock(), job_id="hb-1").outcome == "reserved"
        events_before = events_store.last_event_id(conn)
    finally:
        conn.close()
    assert run_cli("tick").rc == 0
    [row] = _status(run_cli)["recent"]
    assert row["kind"] == "tick" and row["state"] == "stopped" and row["passes"] == 1
    assert row["last_report"]["sent"] == 1 and row["last_report"]["accepted"] == 1, row
    assert row["pass_started_at"] and row["pass_ended_at"] and row["host"] and row["pid"] > 0
    conn = connect(ledger_path, readonly=True)
    try:
        kinds = [e.kind for e in events_store.events_after(conn, events_before)]
        assert kinds and all("heartbeat" not in k for k in kinds)  # the pass's own events only
        assert verify(conn).ok
    finally:
        conn.close()


def test_an_idle_worker_writes_now_and_then_a_busy_pass_always_and_a_stop_always(ledger_path: Path) -> None:
    clock = ManualClock(T0)
    conn = connect(ledger_path)
    try:
        beat = WorkerBeat(conn, clock, "w-1", kind="worker", interval=1.0)
        idle = TickReport().as_dict()
        assert beat.pass_started() and not beat.pass_ended(idle)  # first write; the idle end follows too soon
        clock.advance(1)
        assert not beat.pass_started() and not beat.pass_ended(idle)
        clock.advance(1)
        assert beat.pass_ended({**idle, "sent": 1})  # a pass that did something is always recorded
        clock.advance(HEARTBEAT_SECONDS)
        assert beat.pass_started()  # quiet for a while: written again
        assert beat.stopped()
        [row] = read_board(conn).recent
        assert (row.running, row.passes, row.stopped_at, row.report["sent"]) == (False, 3, T0 + 2 + HEARTBEAT_SECONDS, 1)
        assert row.pass_started_at == T0 + 2 + HEARTBEAT_SECONDS and row.pass_ended_at == T0 + 2
    finally:
        conn.close()


def test_a_heartbeat_is_skipped_not_waited_for_when_the_ledger_is_locked(ledger_path: Path) -> None:
    conn = connect(ledger_path)
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        assert not WorkerBeat(conn, ManualClock(T0), "w-locked", kind="tick").pass_started()
        assert time.monotonic() - started < 4, "a heartbeat waited like a job write (5 s) for the lock"
        holder.execute("ROLLBACK")
        assert read_board(conn).recent == ()
    finally:
        holder.close()
        conn.close()


def test_liveness_counts_live_and_unresponsive_workers_and_stopped_rows_are_pruned(ledger_path: Path) -> None:
    clock = ManualClock(T0)
    conn = connect(ledger_path)
    try:
        old_tick = WorkerBeat(conn, clock, "tick-old", kind="tick")
        assert old_tick.pass_started() and old_tick.stopped()
        killed = WorkerBeat(conn, clock, "w-killed", kind="worker")
        assert killed.pass_started()  # and never heard from again
        clock.advance(2 * 86_400)
        alive = WorkerBeat(conn, clock, "w-alive", kind="worker")
        assert alive.pass_started() and alive.pass_ended({"sent": 2})
        live = read_board(conn).liveness(clock.now(), 300)
        assert (live.workers, live.unresponsive, live.silent) == (1, 1, False)
        assert live.summary() == "1 worker, last pass 0 s ago; 1 marked running but silent"
        assert live.short() == "1 worker · 0s"
        later = read_board(conn).liveness(clock.now() + 360, 300)
        assert later.silent and later.summary().startswith("no worker pass for 6 min") and later.short() == "no worker pass 6m"
        stopper = WorkerBeat(conn, clock, "tick-new", kind="tick")
        assert stopper.stopped()  # a stop prunes rows stopped more than a day ago
        assert {h.worker_id for h in read_board(conn).recent} == {"w-alive", "w-killed", "tick-new"}
    finally:
        conn.close()


def test_a_v8_ledger_migrates_forward_and_keeps_its_chain(
    tmp_path: Path, sim: Any, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    path = tmp_path / "v8.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for script in MIGRATIONS[:7]:
        for stmt in _statements(script):
            raw.execute(stmt)
    raw.execute("INSERT INTO jobs (job_id, operation, idem_key, payload, state, epoch, quota_day, created_at, "
                "updated_at) VALUES ('old', 'op', 'k-old', '{}', 'held', 1, '2026-12-01', 1, 2)")
    for seq, (kind, to) in enumerate([("reserve", "reserving"), ("send_unknown", "held")], start=1):
        raw.execute("INSERT INTO events (at, job_id, operation, seq, actor, kind, to_state, epoch) "
                    "VALUES (?, 'old', 'op', ?, 'w', ?, ?, 1)", (seq, seq, kind, to))
    for stmt in _statements(MIGRATIONS[7]):
        raw.execute(stmt)
    AFTER_SCRIPT[8](raw)  # version 8's Python step: chain the events there, then the guarding triggers
    raw.execute("PRAGMA user_version = 8")
    raw.close()

    conn = connect(path)  # migrates to the current version (v9 made the heartbeat table)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        verdict = verify(conn)
        assert verdict.ok and verdict.events == 2, verdict
        assert read_board(conn).recent == ()
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"events_chain", "events_no_update", "events_no_replace", "events_no_delete"} <= triggers
    finally:
        conn.close()
    assert run_cli("tick", ledger=path).rc in (0, 4)
    workers = _status(run_cli, ledger=path)
    assert workers["recent"][0]["kind"] == "tick" and not workers["silent"], workers


def test_tick_in_process_marks_itself_stopped_even_when_the_pass_raises(
    ledger_path: Path, cfg: Config, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ledger.worker.loop as worker  # where the pass looks replay_journal up

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the pass died")

    monkeypatch.setattr(worker, "replay_journal", boom)
    conn = connect(ledger_path)
    try:
        with pytest.raises(RuntimeError, match="the pass died"):
            tick(conn, cfg, clock=ManualClock(T0), owner="t-1")
        [row] = read_board(conn).recent
        assert (row.worker_id, row.running, row.error, row.passes) == ("t-1", False, "RuntimeError", 0)
    finally:
        conn.close()
