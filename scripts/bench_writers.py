"""Benchmark concurrent writers: K processes reserving at once into one ledger (synchronous=FULL, or NORMAL).

Each writer is its own process (multiprocessing, spawn) with its own connection from ledger.db.connect;
all wait on one start event, then call ledger.reserve.reserve for distinct jobs as fast as they can.
Reported: total reservations per second over the whole run (first start to last finish), the
longest single reserve() call (call to return, lock waits included), p99, and the count of
"database is locked" / LedgerLocked errors (must be 0). The baseline is one writer doing the same
total number of reservations.

The same writers are run once more without the writers' queue (ledger/writers.py), for comparison.
With --raw, plain sqlite3 processes run the same statements (bench_reserve.raw_reserve), 1 and K of
them: what SQLite itself does with K writers on this machine, with no library at all; and K connections
used in turn by one process: what SQLite's re-reading of pages another connection changed costs alone.

    .venv/bin/python scripts/bench_writers.py [--writers 16] [--per-writer 300] [--no-compare] [--raw]
        [--synchronous FULL|NORMAL] [--rounds 3]

Each pair (1 writer, K writers) runs in alternating rounds on fresh ledgers, since the disk's fsync time
drifts by 2-3x within minutes on a shared machine; the ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_reserve import raw_connect, raw_reserve

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


def _disable_queue() -> None:
    """Comparison (--unqueued): write as before the writers' queue, racing on BEGIN IMMEDIATE alone."""
    from ledger import writers

    writers.attach = lambda conn, ledger: None  # connect() then gives no queue


def _warm_up(config: Any) -> None:
    """Import and build what the first reserve() would (the Gemini SDK's request validator), before the start.

    Without it the first call of each process carries a one-off import of about a second (16 processes on
    two cores: several seconds), which is start-up cost, not waiting for the ledger.
    """
    from ledger.reserve import parse_payload

    parse_payload(config, OPERATION, {"input": "warm up"})


def writer(
    path: str, wid: int, count: int, ready: Any, start: Any, results: Any, mode: str = "queued",
    synchronous: str = "FULL", leave: Any = None,
) -> None:
    """One writer process: connect, wait for the start signal, reserve `count` distinct jobs, answer, then
    stay until `leave` is set (every writer done), so no writer's exit takes the CPU from those still writing.

    Always answers on `results`: an unexpected exception becomes {"fatal": ...} instead of a silent death.
    """
    try:
        _writer(path, wid, count, ready, start, results, mode, synchronous, leave)
    except BaseException as e:
        ready.release()
        results.put({"wid": wid, "fatal": f"{type(e).__name__}: {e}"})
        raise


def _writer(
    path: str, wid: int, count: int, ready: Any, start: Any, results: Any, mode: str, synchronous: str,
    leave: Any = None,
) -> None:
    if mode == "unqueued":
        _disable_queue()
    config = _config()
    _warm_up(config)
    raw = mode == "raw"
    conn = raw_connect(Path(path), synchronous) if raw else connect(path, synchronous=synchronous)
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
            if raw:
                raw_reserve(conn, f"w{wid}-job-{i}", f"w{wid}-target-{i}", {"input": f"w{wid} job {i}"})
                ok += 1
            else:
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
    results.put({"wid": wid, "ok": ok, "locked": locked, "errors": other_errors, "waits": waits,
                 "start": t_start, "end": t_end})
    # Closing and exiting (an interpreter with the SDK loaded) take tens of ms of CPU: on a small machine,
    # done while others still write, that would be measured as their wait for the ledger.
    if leave is not None:
        leave.wait(timeout=600)
    conn.close()


def run_writers(
    path: Path, writers: int, per_writer: int, timeout: float = 300.0, mode: str = "queued",
    synchronous: str = "FULL",
) -> dict[str, Any]:
    """Run `writers` processes of `per_writer` reservations each; return the merged figures."""
    ctx = mp.get_context("spawn")
    ready = ctx.Semaphore(0)
    start = ctx.Event()
    leave = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=writer, args=(str(path), w, per_writer, ready, start, results, mode, synchronous, leave),
                    daemon=True)
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 300  # 16 spawned interpreters importing the SDK on a loaded machine
    started = 0
    while started < len(procs):  # every writer connected before anyone starts
        if ready.acquire(timeout=0.5):
            started += 1
        elif any(p.exitcode is not None for p in procs) or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            raise RuntimeError("a writer process died or did not start within 300 s (see its traceback above)")
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
    leave.set()
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


def run_in_turn(path: Path, connections: int, total: int, synchronous: str) -> float:
    """Reservations per second when one process reserves `total` jobs through `connections` connections to the
    ledger at `path`, used in turn: each one then follows the commits of the others (SQLite re-reads the pages
    they changed), with no second process, no waiting and no switching between processes."""
    config = _config()
    _warm_up(config)
    conns = [connect(path, synchronous=synchronous) for _ in range(connections)]
    clock = SystemClock()
    t0 = time.perf_counter()
    for i in range(total):
        res = reserve(
            conns[i % connections], config, OPERATION, {"input": f"job {i}"}, clock=clock,
            job_id=f"turn-job-{i}", target=f"turn-target-{i}",
        )
        if res.outcome != "reserved":
            raise RuntimeError(f"reserve turn-job-{i}: {res.outcome}")
    rate = total / (time.perf_counter() - t0)
    for c in conns:
        c.close()
    return rate


def verify(path: Path, expected: int) -> int:
    """Count reserved jobs from a fresh connection (each job must be in the ledger exactly once)."""
    conn = connect(path, readonly=True)
    n = int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
    ev = int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'reserve'").fetchone()[0])
    conn.close()
    if n != expected or ev != expected:
        raise RuntimeError(f"ledger has {n} jobs / {ev} reserve events, expected {expected}")
    return n


def _merged(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of the same writers as one: medians of the rates and typical waits, the worst wait of all."""
    return {
        "writers": runs[0]["writers"],
        "ok": sum(r["ok"] for r in runs) // len(runs),
        "locked": sum(r["locked"] for r in runs),
        "errors": [e for r in runs for e in r["errors"]],
        "throughput": statistics.median(r["throughput"] for r in runs),
        "max_wait": max(r["max_wait"] for r in runs),
        "p50_wait": statistics.median(r["p50_wait"] for r in runs),
        "p99_wait": statistics.median(r["p99_wait"] for r in runs),
        "span": statistics.median(r["span"] for r in runs),
    }


def _pair(
    folder: Path, name: str, writers: int, per_writer: int, rounds: int, mode: str, synchronous: str
) -> tuple[dict[str, Any], dict[str, Any], float]:
    """1 writer and `writers` writers of `mode`, in `rounds` alternating rounds on fresh ledgers (the disk's
    fsync time drifts by 2-3x within minutes here): (one, many, median of the per-round ratios)."""
    ones: list[dict[str, Any]] = []
    manys: list[dict[str, Any]] = []
    for r in range(rounds):
        for side in ("one", "many") if r % 2 == 0 else ("many", "one"):
            path = folder / f"{name}-{side}-{r}.db"
            create_ledger(path)
            if side == "one":
                ones.append(run_writers(path, 1, writers * per_writer, mode=mode, synchronous=synchronous))
                verify(path, ones[-1]["ok"])
            else:
                manys.append(run_writers(path, writers, per_writer, mode=mode, synchronous=synchronous))
                verify(path, manys[-1]["ok"])
    ratio = statistics.median(m["throughput"] / o["throughput"] for o, m in zip(ones, manys, strict=True))
    return _merged(ones), _merged(manys), ratio


def run(
    writers: int = 16, per_writer: int = 300, workdir: Path | None = None, compare: bool = True,
    synchronous: str = "FULL", raw: bool = False, rounds: int = 3,
) -> list[dict[str, Any]]:
    """Figure rows for bench.py; with `compare`, one more row: the same writers without the writers' queue;
    with `raw`, two more: plain sqlite3 processes running the same statements, 1 and `writers` of them, and
    `writers` connections used in turn by one process. Each pair runs in `rounds` alternating rounds."""
    total = writers * per_writer
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-writers-", dir=workdir) as d:
        folder = Path(d)
        one, many, ratio = _pair(folder, "queued", writers, per_writer, rounds, "queued", synchronous)
        bare = None
        if compare:
            bare_one, bare, bare_ratio = _pair(
                folder, "unqueued", writers, per_writer, rounds, "unqueued", synchronous
            )
        plain = None
        in_turn = (0.0, 0.0)
        if raw:
            plain = _pair(folder, "plain", writers, per_writer, rounds, "raw", synchronous)
            turn_one_path, turn_many_path = folder / "turn-one.db", folder / "turn-many.db"
            for p in (turn_one_path, turn_many_path):
                create_ledger(p)
            in_turn = (
                run_in_turn(turn_one_path, 1, total, synchronous),
                run_in_turn(turn_many_path, writers, total, synchronous),
            )
    bad = many["locked"] + len(many["errors"])
    rows = [
        {
            "figure": f"{writers} writer processes x {per_writer} reserve() ({synchronous}), total throughput",
            "value": f"{many['throughput']:,.0f} /s",
            "baseline": f"{one['throughput']:,.0f} /s (1 writer x {total})",
            "ratio": ratio,
            "note": f"median of {rounds} alternating rounds (ratio: of the per-round ratios); aim >= 0.80",
        },
        {
            "figure": f"{writers} writers: wait per reserve() max (p50 / p99)",
            "value": f"{many['max_wait'] * 1000:,.0f} ms ({many['p50_wait'] * 1000:.1f} / {many['p99_wait'] * 1000:.0f})",
            "baseline": f"{one['max_wait'] * 1000:,.1f} ms ({one['p50_wait'] * 1000:.2f} / {one['p99_wait'] * 1000:.1f}) 1 writer",
            "ratio": None,
            "note": f"worst of {rounds} rounds, p50 / p99: medians; aim < 100 ms",
        },
        {
            "figure": f"{writers} writers: 'database is locked' / LedgerLocked errors",
            "value": f"{many['locked']}" + (f" (+{len(many['errors'])} other)" if many["errors"] else ""),
            "baseline": f"{one['locked']} (1 writer)",
            "ratio": None,
            "note": "must be 0" + ("" if bad == 0 else f"  FAILED: {(many['errors'] or ['locked'])[0][:60]}"),
        },
    ]
    if bare is not None:
        rows.append(
            {
                "figure": f"{writers} writers without the writers' queue (racing on BEGIN IMMEDIATE): throughput, max wait",
                "value": f"{bare['throughput']:,.0f} /s, max {bare['max_wait'] * 1000:,.0f} ms",
                "baseline": f"{many['throughput']:,.0f} /s, max {many['max_wait'] * 1000:,.0f} ms (queued)",
                "ratio": bare["throughput"] / many["throughput"],
                "note": f"p99 {bare['p99_wait'] * 1000:.0f} ms; locked errors {bare['locked']}; "
                f"vs 1 writer {bare_ratio:.2f} (per-round ratios' median, 1 writer {bare_one['throughput']:,.0f} /s)",
            }
        )
    if plain is not None:
        p1, pn, plain_ratio = plain
        rows.append(
            {
                "figure": f"plain sqlite3, no library: {writers} processes vs 1, the same statements: throughput, max wait",
                "value": f"{pn['throughput']:,.0f} /s, max {pn['max_wait'] * 1000:,.0f} ms (p99 {pn['p99_wait'] * 1000:.0f})",
                "baseline": f"{p1['throughput']:,.0f} /s, max {p1['max_wait'] * 1000:,.0f} ms (1 process)",
                "ratio": plain_ratio,
                "note": f"SQLite's own floor on this machine; locked errors {pn['locked']}",
            }
        )
        rows.append(
            {
                "figure": f"{writers} connections in one process, used in turn: reserve() throughput",
                "value": f"{in_turn[1]:,.0f} /s",
                "baseline": f"{in_turn[0]:,.0f} /s (1 connection)",
                "ratio": in_turn[1] / in_turn[0],
                "note": "what following other connections' commits costs SQLite, without processes",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--per-writer", type=int, default=300)
    ap.add_argument("--dir", type=Path, default=None, help="folder for the temporary ledgers (default: $TMPDIR)")
    ap.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL",
                    help="the writers' synchronous setting (default FULL, every commit fsynced)")
    ap.add_argument("--raw", action="store_true",
                    help="also run plain sqlite3 writers (the same statements, no library): SQLite's own floor")
    ap.add_argument("--no-compare", action="store_true", help="skip the run without the writers' queue")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of 1 and K writers (default 3)")
    args = ap.parse_args(argv)
    rows = run(args.writers, args.per_writer, args.dir, not args.no_compare, args.synchronous, args.raw, args.rounds)
    for row in rows:
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}{ratio}  {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
