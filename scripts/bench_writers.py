"""Benchmark concurrent writers: K processes reserving at once into one ledger (synchronous=FULL).

Each writer is its own process (multiprocessing, spawn) with its own connection from ledger.db.connect;
all wait on one start event, then call ledger.reserve.reserve for distinct jobs as fast as they can.
Reported: total reservations per second over the whole run (first start to last finish), the
longest single reserve() call (call to return, lock waits included), p99, and the count of
"database is locked" / LedgerLocked errors (must be 0). The baseline is one writer doing the same
total number of reservations.

    .venv/bin/python scripts/bench_writers.py [--writers 16] [--per-writer 300]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.errors import LedgerLocked
from ledger.reserve import reserve

OPERATION = "bench.op"


def _config() -> Any:
    return parse_config(
        {
            "remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
            "operations": {OPERATION: {"remote": "sim", "daily_quota": 10**9}},
        }
    )


def _install_fair_lock(path: str) -> None:
    """Experiment (--fair-lock): serialise reserve()'s write transaction behind an flock on a sidecar file.

    A waiter then blocks in the kernel and is woken when the lock is released, instead of SQLite's
    busy handler polling with sleeps of up to 100 ms (which lets a waiter starve). This is the fix
    the report proposes for ledger/db.py write_tx; it is not part of the ledger today.
    """
    import contextlib
    import fcntl
    import importlib

    reserve_module = importlib.import_module("ledger.reserve")  # `ledger.reserve` is shadowed by the function
    original = reserve_module.write_tx
    lockfile = open(f"{path}.writelock", "a+")  # held open for the writer process's life

    @contextlib.contextmanager
    def fair_write_tx(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> Any:
        fcntl.flock(lockfile, fcntl.LOCK_EX)
        try:
            with original(conn, *args, **kwargs) as c:
                yield c
        finally:
            fcntl.flock(lockfile, fcntl.LOCK_UN)

    reserve_module.write_tx = fair_write_tx


def writer(path: str, wid: int, count: int, ready: Any, start: Any, results: Any, fair_lock: bool = False) -> None:
    """One writer process: connect, wait for the start signal, reserve `count` distinct jobs.

    Always answers on `results`: an unexpected exception becomes {"fatal": ...} instead of a silent death.
    """
    try:
        _writer(path, wid, count, ready, start, results, fair_lock)
    except BaseException as e:
        ready.release()
        results.put({"wid": wid, "fatal": f"{type(e).__name__}: {e}"})
        raise


def _writer(path: str, wid: int, count: int, ready: Any, start: Any, results: Any, fair_lock: bool) -> None:
    if fair_lock:
        _install_fair_lock(path)
    config = _config()
    conn = connect(path)
    clock = SystemClock()
    ready.release()
    start.wait()
    locked = 0
    other_errors: list[str] = []
    waits: list[float] = []
    ok = 0
    t_start = time.time()
    for i in range(count):
        t0 = time.perf_counter()
        try:
            res = reserve(
                conn, config, OPERATION, {"input": f"w{wid} job {i}"}, clock=clock,
                job_id=f"w{wid}-job-{i}", target=f"w{wid}-target-{i}",
            )
            ok += res.outcome == "reserved"
        except LedgerLocked:
            locked += 1
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                locked += 1
            else:
                other_errors.append(str(e))
        waits.append(time.perf_counter() - t0)
    t_end = time.time()
    conn.close()
    results.put({"wid": wid, "ok": ok, "locked": locked, "errors": other_errors, "waits": waits,
                 "start": t_start, "end": t_end})


def run_writers(
    path: Path, writers: int, per_writer: int, timeout: float = 300.0, fair_lock: bool = False
) -> dict[str, Any]:
    """Run `writers` processes of `per_writer` reservations each; return the merged figures."""
    ctx = mp.get_context("spawn")
    ready = ctx.Semaphore(0)
    start = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=writer, args=(str(path), w, per_writer, ready, start, results, fair_lock), daemon=True)
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 60
    started = 0
    while started < len(procs):  # every writer connected before anyone starts
        if ready.acquire(timeout=0.5):
            started += 1
        elif any(p.exitcode is not None for p in procs) or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            raise RuntimeError("a writer process died or did not start within 60 s (see its traceback above)")
    start.set()
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            got.append(results.get(timeout=1.0))
        except queue.Empty:
            if time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                raise RuntimeError(f"only {len(got)} of {len(procs)} writers finished within {timeout:.0f} s") from None
    for p in procs:
        p.join(timeout=10)
    fatal = [r["fatal"] for r in got if "fatal" in r]
    if fatal:
        raise RuntimeError(f"{len(fatal)} writer(s) crashed: {fatal[0]}")
    waits = sorted(w for r in got for w in r["waits"])
    span = max(r["end"] for r in got) - min(r["start"] for r in got)
    ok = sum(r["ok"] for r in got)
    return {
        "writers": writers,
        "ok": ok,
        "locked": sum(r["locked"] for r in got),
        "errors": [e for r in got for e in r["errors"]],
        "throughput": ok / span,
        "max_wait": waits[-1],
        "p50_wait": waits[len(waits) // 2],
        "p99_wait": waits[min(len(waits) - 1, int(len(waits) * 0.99))],
        "span": span,
    }


def verify(path: Path, expected: int) -> int:
    """Count reserved jobs from a fresh connection (each job must be in the ledger exactly once)."""
    conn = connect(path, readonly=True)
    n = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
    ev = int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'reserve'").fetchone()[0])
    conn.close()
    if n != expected or ev != expected:
        raise RuntimeError(f"ledger has {n} jobs / {ev} reserve events, expected {expected}")
    return n


def run(
    writers: int = 16, per_writer: int = 300, workdir: Path | None = None, fair_lock: bool = False
) -> list[dict[str, Any]]:
    """Figure rows for bench.py (with `fair_lock`, one more row: the same run behind an flock)."""
    total = writers * per_writer
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-writers-", dir=workdir) as d:
        one_path, many_path = Path(d) / "one.db", Path(d) / "many.db"
        create_ledger(one_path)
        create_ledger(many_path)
        one = run_writers(one_path, 1, total)
        many = run_writers(many_path, writers, per_writer)
        verify(one_path, one["ok"])
        verify(many_path, many["ok"])
        fair = None
        if fair_lock:
            fair_path = Path(d) / "fair.db"
            create_ledger(fair_path)
            fair = run_writers(fair_path, writers, per_writer, fair_lock=True)
            verify(fair_path, fair["ok"])
    bad = many["locked"] + len(many["errors"])
    rows = [
        {
            "figure": f"{writers} writer processes x {per_writer} reserve() (FULL), total throughput",
            "value": f"{many['throughput']:,.0f} /s",
            "baseline": f"{one['throughput']:,.0f} /s (1 writer x {total})",
            "ratio": many["throughput"] / one["throughput"],
            "note": f"{many['ok']} reserved in {many['span']:.1f} s",
        },
        {
            "figure": f"{writers} writers: wait per reserve() max (p50 / p99)",
            "value": f"{many['max_wait'] * 1000:,.0f} ms ({many['p50_wait'] * 1000:.1f} / {many['p99_wait'] * 1000:.0f})",
            "baseline": f"{one['max_wait'] * 1000:,.1f} ms ({one['p50_wait'] * 1000:.2f} / {one['p99_wait'] * 1000:.1f}) 1 writer",
            "ratio": None,
            "note": "busy_timeout 5000 ms",
        },
        {
            "figure": f"{writers} writers: 'database is locked' / LedgerLocked errors",
            "value": f"{many['locked']}" + (f" (+{len(many['errors'])} other)" if many["errors"] else ""),
            "baseline": f"{one['locked']} (1 writer)",
            "ratio": None,
            "note": "must be 0" + ("" if bad == 0 else f"  FAILED: {(many['errors'] or ['locked'])[0][:60]}"),
        },
    ]
    if fair is not None:
        rows.append(
            {
                "figure": f"{writers} writers behind an flock (proposed write_tx fix): throughput, max wait",
                "value": f"{fair['throughput']:,.0f} /s, max {fair['max_wait'] * 1000:,.0f} ms",
                "baseline": f"{many['throughput']:,.0f} /s, max {many['max_wait'] * 1000:,.0f} ms (as is)",
                "ratio": fair["throughput"] / many["throughput"],
                "note": f"locked errors {fair['locked']}; p99 {fair['p99_wait'] * 1000:.0f} ms",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--per-writer", type=int, default=300)
    ap.add_argument("--dir", type=Path, default=None, help="folder for the temporary ledgers (default: $TMPDIR)")
    ap.add_argument("--fair-lock", action="store_true", help="also run the writers behind an flock (proposed fix)")
    args = ap.parse_args(argv)
    for row in run(args.writers, args.per_writer, args.dir, args.fair_lock):
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}{ratio}  {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
