"""`reclaim worker` outlives ledger outages: it backs off and tries again, and exits only on a signal.

SQLite: another connection holds BEGIN IMMEDIATE past the busy timeout, then lets go. PostgreSQL: the
worker's session is killed (pg_terminate_backend), then the server is stopped and started again. Each time
the worker is still running afterwards and sends a job reserved after the outage (one POST, counted at the
simulator; the job read back from a fresh connection).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect, create_ledger
from ledger.heartbeat import read_board
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store.jobs import find_job
from ledger.worker import OUTAGE_BACKOFF_MAX, outage_backoff, run_worker

OP = "article.generate"
WAITING = "the ledger is not usable now"


class Lines:
    """A background reader of a process's stderr, so a test can wait for a line without blocking."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        self._t = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._t.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def count(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))


def _reserve(ledger: str | Path, config: Path, job_id: str) -> None:
    conn = connect(ledger)
    try:
        res = reserve(conn, load_config(config), OP, {"input": f"text for {job_id}"}, clock=SystemClock(),
                      job_id=job_id)
        assert res.outcome == "reserved"
    finally:
        conn.close()


def _state(ledger: str | Path, job_id: str) -> str | None:
    conn = connect(ledger, readonly=True)
    try:
        job = find_job(conn, JobKey(job_id, OP))
        return job.state if job else None
    finally:
        conn.close()


def _sent(ledger: str | Path, job_id: str) -> bool:
    """The job was accepted by the remote (the simulator may complete it, and the pass deliver it, at once)."""
    return _state(ledger, job_id) in ("submitted", "done", "consumed")


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    return proc.returncode


def test_backoff_doubles_from_the_interval_and_is_capped() -> None:
    assert [outage_backoff(0.5, n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert outage_backoff(0.01, 1) == 0.1
    assert outage_backoff(1.0, 40) == OUTAGE_BACKOFF_MAX


def test_a_worker_outlives_a_sqlite_lock_held_past_the_busy_timeout(
    sim: Simulator, ledger_path: Path, config_path: Path, start_cli: Callable[..., subprocess.Popen[str]],
    wait_for: Callable[..., Any],
) -> None:
    _reserve(ledger_path, config_path, "o-before")
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        proc = start_cli("worker", "--interval", "0.1")
        err = Lines(proc)
        wait_for(lambda: err.count(WAITING), timeout=60, what="the worker to meet the lock and say it waits")
        assert proc.poll() is None, err.lines
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    wait_for(lambda: _sent(ledger_path, "o-before"), timeout=60,
             what="the worker to send the job once the lock was gone")
    _reserve(ledger_path, config_path, "o-after")
    wait_for(lambda: _sent(ledger_path, "o-after"), timeout=60, what="the worker to carry on")
    assert proc.poll() is None, err.lines
    assert sim.count("create") == 2
    assert _stop(proc) == 0, err.lines
    assert "locked" in "".join(err.lines)


def test_the_heartbeat_says_the_worker_waits_when_the_ledger_takes_it(
    sim: Simulator, ledger_path: Path, config_path: Path, wait_for: Callable[..., Any],
) -> None:
    cfg = load_config(config_path)
    _reserve(ledger_path, config_path, "o-beat")
    holder = sqlite3.connect(ledger_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    seen: list[tuple[str, float]] = []

    def on_outage(error: BaseException, wait: float) -> None:
        seen.append((type(error).__name__, wait))
        if holder.in_transaction:
            holder.execute("ROLLBACK")  # the lock goes before the heartbeat is written: it says "waiting"

    conn = connect(ledger_path, check_same_thread=False)
    stop = threading.Event()
    box: dict[str, int] = {}
    t = threading.Thread(target=lambda: box.update(passes=run_worker(
        conn, cfg, clock=SystemClock(), stop=stop, interval=3.0, on_outage=on_outage)), daemon=True)
    t.start()
    try:
        def waiting_beat() -> Any:
            reader = connect(ledger_path, readonly=True)
            try:
                rows = read_board(reader).running
            finally:
                reader.close()
            return rows and rows[0].error and rows[0].error.startswith("waiting for the ledger") and rows[0]

        beat = wait_for(waiting_beat, timeout=60, what="the heartbeat to say the worker waits")
        assert "LedgerLocked" in beat.error and beat.running
        assert seen == [("LedgerLocked", 3.0)]
        wait_for(lambda: _sent(ledger_path, "o-beat"), timeout=60, what="the next pass to send")
        wait_for(lambda: not waiting_beat(), timeout=60, what="the heartbeat to clear once a pass went through")
    finally:
        stop.set()
        t.join(timeout=60)
        holder.close()
        conn.close()
    assert not t.is_alive() and box["passes"] >= 1
    assert sim.count("create") == 1


def test_a_worker_outlives_a_killed_session_and_a_postgresql_restart(
    sim: Simulator, private_pg_server: Any, config_path: Path, tmp_path: Path,
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    import psycopg

    pg_server = private_pg_server  # this test stops it
    pg_ledger = str(pg_server.new_database())
    create_ledger(pg_ledger)

    proc = start_cli("worker", "--interval", "0.1", ledger=pg_ledger,  # type: ignore[arg-type]
                     env={"RECLAIM_JOURNAL_DIR": str(tmp_path)})
    err = Lines(proc)
    _reserve(pg_ledger, config_path, "pg-first")
    wait_for(lambda: _sent(pg_ledger, "pg-first") or proc.poll() is not None, timeout=60, what="the first send")
    assert proc.poll() is None, err.lines

    # 1. Its session is killed: the statement that meets it fails (a pass waits, or a best-effort heartbeat
    # write is skipped), the next one opens a new session, and the worker carries on.
    with psycopg.connect(pg_ledger, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    assert killed is not None and killed[0] >= 1
    _reserve(pg_ledger, config_path, "pg-killed")
    wait_for(lambda: _sent(pg_ledger, "pg-killed"), timeout=60, what="a send after the kill")
    assert proc.poll() is None, err.lines

    # 2. The server stops and starts again.
    before = err.count(WAITING)
    pg_server.halt()
    try:
        wait_for(lambda: err.count(WAITING) > before, timeout=60, what="the worker to notice the server is down")
        assert proc.poll() is None, err.lines
    finally:
        pg_server.resume()
    _reserve(pg_ledger, config_path, "pg-restarted")
    wait_for(lambda: _sent(pg_ledger, "pg-restarted") or proc.poll() is not None, timeout=60,
             what=f"a send after the restart ({err.lines[-3:]})")
    assert proc.poll() is None, err.lines
    assert sim.count("create") == 3
    assert _stop(proc) == 0, err.lines
