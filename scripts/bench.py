"""reclaim benchmarks: every figure beside a baseline measured in the same run, in one table.

  1. reserve() per second vs a raw sqlite3 loop doing the same statements (synchronous FULL, NORMAL)
                                                                   scripts/bench_reserve.py   ~25 s
  3. one worker tick polling 10,000 running jobs vs the same GETs through the SDK, one thread
                                                                   scripts/bench_tick.py      ~2 min
  4. make_big_ledger.py: 1,000,000 jobs (time, size)             scripts/make_big_ledger.py  ~35 s
  5. `reclaim console` itself, started in tmux on that ledger, vs the same on a 1,000-job ledger: first paint
     and first key (warm and cold), settled switch, peak RSS, live lag; `reclaim --help` to exit
                                                                   scripts/bench_console.py  ~6.5 min
  6. the send window's residual gap: check() to the create stored at the simulator, vs a raw POST
                                                                   scripts/bench_send_window.py ~5 s
  7. cold start of `reclaim status` and `reclaim show` vs `python -c pass` (and: no SDK import)
                                                                   scripts/bench_startup.py   ~15 s
  8. PostgreSQL: reserve() vs a raw psycopg loop; 16 processes on 16 operations vs one; claims per
     second with 4 workers vs 1; live lag by NOTIFY vs polling (p95)  scripts/bench_pg.py     ~1.5 min
     (a throwaway server from tests/support/pg_server.py, or $RECLAIM_BENCH_PG; --no-pg skips it)
  9. evidence lag: a webhook delivery's 2xx to the held job reconciled, vs the worker's poll interval
                                                                   scripts/bench_evidence_lag.py ~5 s
 10. `reclaim verify` on figure 4's ledger vs SQLite's PRAGMA integrity_check alone (wall, peak RSS), and
     `verify --since HEAD` after 1,000 reserves on a copy          scripts/bench_verify.py    ~5 min
 11. on that ledger: `reclaim status`, `metrics`, `report --since 1d`, `jobs held`, each a new process, warm and
     cold (the file dropped from the page cache), vs `reclaim --help`   scripts/bench_commands.py ~1 min
     the same on PostgreSQL, the big ledger copied into a throwaway server   scripts/bench_commands_pg.py ~4 min

Figures 1, 3, 6 and 7 always run; there is no figure 2 any more (16 SQLite writer processes: many writer
processes are PostgreSQL's job, figure 8). Figures 4-5 together take about 8 minutes on the 2-core machine they were
written on (figure 5 starts `reclaim console` 40 times, warm and cold, on two ledgers); they run by default
(--console asks for them explicitly, which is the default); --quick skips them and figures 10-11, which read
figure 4's ledger. The whole default run takes about 20 minutes, figures 4, 5, 10 and 11 most of it.
Run-to-run noise on a shared VM is large (fsync latency, CPU steal, other processes): compare a
figure with its baseline from the same run, not across runs.

    .venv/bin/python scripts/bench.py [--quick | --console] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console
from rich.table import Table

Row = dict[str, Any]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def fs_type(path: Path) -> str:
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def machine(workdir: Path) -> str:
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"nproc {nproc} · {cpu_model()} · Python {platform.python_version()} · SQLite {sqlite3.sqlite_version} · "
        f"temp files on {fs_type(workdir)} ({workdir})"
    )


def section(name: str, fn: Callable[[], list[Row]], log: Console) -> tuple[list[Row], float]:
    """Run one benchmark; a failure becomes a row saying so, never a crash of the whole run."""
    log.print(f"[bold]running[/] {name} …")
    t0 = time.perf_counter()
    try:
        rows = fn()
    except Exception as e:  # a broken figure must not hide the others
        traceback.print_exc()
        rows = [{"figure": name, "value": "FAILED", "baseline": "-", "ratio": None,
                 "note": f"{type(e).__name__}: {e}"[:100]}]
    dt = time.perf_counter() - t0
    log.print(f"  done in {dt:.0f} s")
    return rows, dt


def fmt_ratio(r: Any) -> str:
    if r is None:
        return ""
    if isinstance(r, float):
        return f"{r:.2f}"
    return str(r)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="skip figures 4, 5, 10 and 11 (the 1M ledger, the console, verify and the commands on it)")
    mode.add_argument("--console", action="store_true",
                      help="also run figures 4-5 (the default, as they take < 5 min); overrides nothing")
    ap.add_argument("--jobs", type=int, default=1_000_000, help="figure 4/5 ledger size (default 1,000,000)")
    ap.add_argument("--tick-jobs", type=int, default=10_000, help="figure 3 submitted jobs (default 10,000)")
    ap.add_argument("--dir", type=Path, default=None, help="folder for temporary files (default: $TMPDIR)")
    ap.add_argument("--no-pg", action="store_true", help="skip figure 8 (PostgreSQL)")
    args = ap.parse_args(argv)

    import bench_commands
    import bench_commands_pg
    import bench_console
    import bench_evidence_lag
    import bench_pg
    import bench_reserve
    import bench_send_window
    import bench_startup
    import bench_tick
    import bench_verify
    import make_big_ledger

    log = Console(stderr=True)
    workdir = (args.dir or Path(tempfile.gettempdir())).resolve()
    load_before = os.getloadavg()
    started = time.perf_counter()
    sections: list[tuple[str, list[Row], float]] = []

    def add(num: str, name: str, fn: Callable[[], list[Row]]) -> None:
        rows, dt = section(f"{num}. {name}", fn, log)
        for i, row in enumerate(rows):
            row["num"] = num if i == 0 else ""
        sections.append((name, rows, dt))

    # figures 1, 3, 6 and 7 always run
    add("1", "reserve() vs raw sqlite3", lambda: bench_reserve.run(5000, 5, args.dir))
    add("3", "tick poll rate", lambda: bench_tick.run(args.tick_jobs, 200, args.dir))
    add("6", "send window gap", lambda: bench_send_window.run(300))
    add("7", "CLI cold start", lambda: bench_startup.run(15))
    add("9", "evidence lag", lambda: bench_evidence_lag.run(30, 2.0, args.dir))
    if not args.no_pg:
        add("8", "PostgreSQL", lambda: bench_pg.run(1000, 3))
    if not args.quick:
        with tempfile.TemporaryDirectory(prefix="reclaim-bench-big-", dir=args.dir) as d:
            big, cfg = Path(d) / "big.db", Path(d) / "big.toml"

            def big_ledger() -> list[Row]:
                info = make_big_ledger.generate(big, args.jobs, 3000, 14, time.time(), 1, "full")
                cfg.write_text(make_big_ledger.config_toml(max(info["max_per_day"] * 2, 1000)), encoding="utf-8")
                return [{
                    "figure": f"make_big_ledger.py: {info['jobs']:,} jobs, {info['events']:,} events, "
                              f"{info['quota_rows']} quota rows",
                    "value": f"{info['seconds']:.1f} s, {info['bytes'] / 1e6:,.0f} MB",
                    "baseline": "target < 180 s",
                    "ratio": None,
                    "note": f"jobs {info['jobs_s']:.0f} s, events {info['events_s']:.0f} s; "
                            f"held {info['by_state'].get('held', 0):,}",
                }]

            add("4", "big ledger", big_ledger)
            if big.exists() and cfg.exists():
                add("11", "commands on the big ledger", lambda: bench_commands.run(big, cfg, 5))
                if not args.no_pg:
                    add("11", "the same on PostgreSQL", lambda: bench_commands_pg.run(big, cfg, 3))
                add("10", "verify at scale", lambda: bench_verify.run(big, cfg, 3, args.dir))
            if big.exists() and cfg.exists():
                add("5", "console", lambda: bench_console.run(big, cfg, args.jobs, 5, 20, 1_000, args.dir))
            else:
                add("5", "console", lambda: [{"figure": "console", "value": "not run", "baseline": "-",
                                              "ratio": None, "note": "no big ledger (figure 4 failed)"}])

    total = time.perf_counter() - started
    load_after = os.getloadavg()
    table = Table(
        title="reclaim benchmarks — each figure beside its baseline from the same run",
        caption=f"{machine(workdir)}\nload average {load_before[0]:.2f} before, {load_after[0]:.2f} after · "
                f"total {total / 60:.1f} min · " + " · ".join(f"{n} {dt:.0f} s" for n, _, dt in sections),
        show_lines=False,
        expand=False,
    )
    table.add_column("#", justify="right", style="bold")
    table.add_column("figure", overflow="fold", max_width=58)
    table.add_column("value", justify="right", overflow="fold", max_width=30)
    table.add_column("baseline (same run)", justify="right", overflow="fold", max_width=38)
    table.add_column("ratio", justify="right")
    table.add_column("note", overflow="fold", max_width=48)
    for i, (_, rows, _) in enumerate(sections):
        for j, row in enumerate(rows):
            table.add_row(row["num"], row["figure"], row["value"], row["baseline"], fmt_ratio(row["ratio"]),
                          row.get("note", ""), end_section=(j == len(rows) - 1 and i < len(sections) - 1))
    Console(width=max(Console().width, 200)).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
