"""How long the job and triage screens take to open on a big ledger, in a fresh process each time.

Each run is a child process (this script with --child), so the remote's adapter has not been built yet, as on the
first triage of an on-call shift. The child drives the console headless (`app.run_test(size=(120, 40))`), waits for
the overview, then times from `open_job` / `open_triage` (push_screen) until

  read landed     the screen drew the job's ledger read (`screen.loaded`): its keys work from here on;
  remote filled   "What the remote can answer" is drawn (the first build of the remote's adapter imports its SDK).

Prints one line per run with the 1-minute load average at its end (the machine is shared: say it with the figure).

    .venv/bin/python scripts/make_big_ledger.py big.db -n 300000 --config-out big.toml
    .venv/bin/python scripts/bench_open_triage.py big.db big.toml [--screen triage|job] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path


async def child(ledger: str, config_path: str, screen_name: str) -> None:
    """One measurement: print 'read_ms remote_ms load' on stdout."""
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
    app = make_app(ledger, cfg, "alice")
    kind: type = TriageScreen if screen_name == "triage" else JobScreen
    section = "#triage-remote" if screen_name == "triage" else "#job-remote"  # triage leaves out the first line
    async with app.run_test(size=(120, 40)) as pilot:
        while not (isinstance(app.screen, OverviewScreen) and app.screen.loaded and app.counts is not None):
            await pilot.pause(0.01)
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
    print(f"{1000 * (t1 - t0):.0f} {1000 * (t2 - t0):.0f} {os.getloadavg()[0]:.2f}")


def main() -> None:
    """Run --runs children and print their figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ledger", type=Path)
    ap.add_argument("config", type=Path)
    ap.add_argument("--screen", choices=("triage", "job"), default="triage")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        asyncio.run(child(str(a.ledger), str(a.config), a.screen))
        return
    print(f"{a.screen} screen, fresh process per run: push_screen -> read landed (keys work) / remote section filled")
    for i in range(a.runs):
        out = subprocess.run([sys.executable, __file__, str(a.ledger), str(a.config), "--screen", a.screen, "--child"],
                             capture_output=True, text=True, check=True, timeout=300)
        read_ms, remote_ms, load = out.stdout.split()[-3:]
        print(f"  run {i + 1}: read landed {read_ms} ms, remote section {remote_ms} ms (load average {load})")


if __name__ == "__main__":
    main()
