"""Where the time goes when many processes write one SQLite ledger: transactions vs hand-overs.

K writer processes reserve() at once through the writers' queue (ledger/writers.py). Each records, on
the system-wide monotonic clock, when its turn began (WriterQueue.take returned) and when it let the
next writer go (WriterQueue.release). Merged and sorted, those give:

  hold  the time a writer held its turn (BEGIN IMMEDIATE to COMMIT, and the work between): with one
        writer this is the transaction alone; with many, each connection also re-reads the pages another
        connection's commit changed;
  gap   from one writer letting go to the next one's turn beginning: the hand-over.

    .venv/bin/python scripts/bench_handover.py [--writers 16] [--per-writer 200] [--synchronous NORMAL]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ledger import writers
from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.reserve import parse_payload, reserve

OPERATION = "bench.op"


def _config() -> Any:
    return parse_config(
        {
            "remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
            "operations": {OPERATION: {"remote": "sim", "daily_quota": 10**9}},
        }
    )


def _record_turns(log: list[tuple[str, float]]) -> None:
    """Wrap the queue's take/release so each turn's start and end land in `log` (this process only)."""
    take, release = writers.WriterQueue.take, writers.WriterQueue.release

    def timed_take(self: writers.WriterQueue, deadline: float) -> bool:
        got = take(self, deadline)
        log.append(("begin", time.monotonic()))
        return got

    def timed_release(self: writers.WriterQueue) -> None:
        log.append(("end", time.monotonic()))
        release(self)

    writers.WriterQueue.take = timed_take  # type: ignore[method-assign]
    writers.WriterQueue.release = timed_release  # type: ignore[method-assign]


def writer(
    path: str, wid: int, count: int, synchronous: str, ready: Any, start: Any, out: str, done: Any, leave: Any
) -> None:
    """One writer process: `count` reservations once `start` is set; its turns written to `out`/<wid>.json.
    It then stays until `leave` is set, so no writer's exit takes the CPU from those still writing."""
    log: list[tuple[str, float]] = []
    config = _config()
    parse_payload(config, OPERATION, {"input": "warm up"})  # the SDK's import, before the start
    conn = connect(path, synchronous=synchronous)
    clock = SystemClock()
    _record_turns(log)
    ready.release()
    start.wait()
    for i in range(count):
        reserve(conn, config, OPERATION, {"input": f"{wid} {i}"}, clock=clock, job_id=f"{wid}-{i}",
                target=f"{wid}-t{i}")
    done.release()
    leave.wait(timeout=600)
    conn.close()
    turns, begun = [], None
    for kind, t in log:
        if kind == "begin":
            begun = t
        elif begun is not None:  # an "end" with no turn begun is release() after a turn already let go
            turns.append((begun, t))
            begun = None
    Path(out, f"{wid}.json").write_text(json.dumps(turns))


def measure(writers_n: int, per_writer: int, synchronous: str) -> dict[str, float]:
    """Run the writers; return the throughput, the mean hold and the gap percentiles (µs)."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-handover-") as d:
        path = Path(d) / "ledger.db"
        create_ledger(path)
        ready, start, done, leave = ctx.Semaphore(0), ctx.Event(), ctx.Semaphore(0), ctx.Event()
        procs = [ctx.Process(target=writer, args=(str(path), w, per_writer, synchronous, ready, start, d, done, leave))
                 for w in range(writers_n)]
        for p in procs:
            p.start()
        for _ in procs:  # every writer has imported and connected: they start together
            if not ready.acquire(timeout=300):
                raise RuntimeError("a writer did not start within 300 s")
        start.set()
        for _ in procs:  # every writer done writing before any closes and exits
            while not done.acquire(timeout=1.0):
                if any(q.exitcode not in (None, 0) for q in procs):
                    raise RuntimeError("a writer failed; see its traceback above")
        leave.set()
        for p in procs:
            p.join(timeout=300)
            if p.exitcode != 0:
                raise RuntimeError(f"a writer failed (exit {p.exitcode}); see its traceback above")
        turns = sorted(tuple(t) for w in range(writers_n) for t in json.loads(Path(d, f"{w}.json").read_text()))
    holds = [e - b for b, e in turns]
    gaps = sorted(turns[i + 1][0] - turns[i][1] for i in range(len(turns) - 1))
    span = turns[-1][1] - turns[0][0]
    return {
        "turns": len(turns),
        "per_s": len(turns) / span,
        "hold_us": sum(holds) / len(holds) * 1e6,
        "gap_p50_us": gaps[len(gaps) // 2] * 1e6,
        "gap_p90_us": gaps[int(len(gaps) * 0.9)] * 1e6,
        "gap_share": sum(max(g, 0.0) for g in gaps) / span,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--per-writer", type=int, default=200)
    ap.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="NORMAL")
    args = ap.parse_args(argv)
    for n, per in ((1, args.writers * args.per_writer), (args.writers, args.per_writer)):
        m = measure(n, per, args.synchronous)
        print(
            f"{n:>2} writer(s), {args.synchronous}: {m['turns']} turns, {m['per_s']:,.0f} /s; mean hold "
            f"{m['hold_us']:,.0f} µs; hand-over gap p50 {m['gap_p50_us']:,.0f} µs, p90 {m['gap_p90_us']:,.0f} µs; "
            f"gaps {m['gap_share']:.0%} of the run"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
