"""How long the job and triage screens take to open on a big ledger, in a fresh process each time.

Each run is a child process (this script with --child), so the remote's adapter has not been built yet, as on the
first triage of an on-call shift. The child drives the console headless (`app.run_test(size=(120, 40))`), waits for
the overview, then times from `open_job` / `open_triage` (push_screen) until

  read landed     the screen drew the job's ledger read (`screen.loaded`): its keys work from here on;
  remote filled   "What the remote can answer" is drawn (the first build of the remote's adapter imports its SDK).

Each run is a pair of children from the same moment: one with the console's warm-up of the remotes (started once
the overview has drawn) and one without it (`make_app(warm=False)`: the adapter is built on first use), in
alternating order. `--think S` waits S seconds between the overview's first draw and the opening (the operator
reading the overview); 0 opens at once. With the warm-up, the child also says when it finished (from the overview's
draw).

Prints one line per child with the 1-minute load average at its end (the machine is shared: say it with the figure).

    .venv/bin/python scripts/make_big_ledger.py big.db -n 300000 --config-out big.toml
    .venv/bin/python scripts/bench_open_triage.py big.db big.toml [--screen triage|job] [--runs 3] [--think 0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path


async def child(ledger: str, config_path: str, screen_name: str, warm: bool, think: float) -> None:
    """One measurement: print 'read_ms remote_ms warmed_ms load' on stdout (warmed_ms: '-' without the warm-up,
    or when it had not finished by the time the remote section was filled)."""
    from console.app import make_app
    from console.screens.job import JobScreen
    from console.screens.overview import OverviewScreen
    from console.screens.triage import TriageScreen
    from ledger.config import load_config
    from ledger.db import connect
    from ledger.model import JobKey

    cfg = load_config(config_path)
    conn = connect(ledger, readonly=True)
    row = conn.execute("SELECT job_id, operation FROM jobs WHERE state = 'held' LIMIT 1").fetchone()
    conn.close()
    key = JobKey(row[0], row[1])
    app = make_app(ledger, cfg, "alice", warm=warm)
    kind: type = TriageScreen if screen_name == "triage" else JobScreen
    section = "#triage-remote" if screen_name == "triage" else "#job-remote"  # triage leaves out the first line
    async with app.run_test(size=(120, 40)) as pilot:
        while not (isinstance(app.screen, OverviewScreen) and app.screen.loaded and app.counts is not None):
            await pilot.pause(0.01)
        drawn = time.perf_counter()
        warmed: list[float] = []

        def warm_done() -> None:
            if not warmed and app.warming is not None and app.warming.is_finished:
                warmed.append(time.perf_counter())

        app.set_interval(0.001, warm_done)
        if think:
            await pilot.pause(think)  # the operator reading the overview (a bench, not a test: no condition to wait on)
        t0 = time.perf_counter()
        (app.open_triage if screen_name == "triage" else app.open_job)(key)
        while not (isinstance(app.screen, kind) and app.screen.loaded):
            await pilot.pause(0.001)
        t1 = time.perf_counter()
        screen = app.screen
        while not getattr(screen, "remote_read", True) and time.perf_counter() - t0 < 120:
            await pilot.pause(0.001)  # (a console without the attribute draws the remote with the read)
        assert str(screen.query_one(section).content).startswith("remote") or screen_name == "triage"
        t2 = time.perf_counter()
        warm_done()
    shown = f"{1000 * (warmed[0] - drawn):.0f}" if warmed else "-"
    print(f"{1000 * (t1 - t0):.0f} {1000 * (t2 - t0):.0f} {shown} {os.getloadavg()[0]:.2f}")


def main() -> None:
    """Run --runs children and print their figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ledger", type=Path)
    ap.add_argument("config", type=Path)
    ap.add_argument("--screen", choices=("triage", "job"), default="triage")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--think", type=float, default=0.0, help="seconds between the overview's draw and the opening")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-warm", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        asyncio.run(child(str(a.ledger), str(a.config), a.screen, not a.no_warm, a.think))
        return
    print(f"{a.screen} screen, fresh process per child, opened {a.think:g} s after the overview drew: push_screen -> "
          "read landed (keys work) / remote section filled; with and without the warm-up of the remotes")
    for i in range(a.runs):
        for warm in (True, False) if i % 2 == 0 else (False, True):
            argv = [sys.executable, __file__, str(a.ledger), str(a.config), "--screen", a.screen, "--think",
                    str(a.think), "--child", *([] if warm else ["--no-warm"])]
            out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
            read_ms, remote_ms, warmed_ms, load = out.stdout.split()[-4:]
            said = f", warm-up done {warmed_ms} ms after the overview drew" if warm and warmed_ms != "-" else ""
            print(f"  run {i + 1} {'warm-up' if warm else 'no warm-up':>10}: read landed {read_ms:>5} ms, remote section "
                  f"{remote_ms:>5} ms{said} (load average {load})")


if __name__ == "__main__":
    main()
