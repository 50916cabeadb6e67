"""Figure 10: `reclaim verify` on a big ledger beside SQLite's own `PRAGMA integrity_check`, same run; and
`verify --since HEAD` after 1,000 events appended.

Each measurement is a new process, its wall time and peak RSS read when it is waited for (os.wait4: that child's
own rusage), `--rounds` times, the full verify and the baseline interleaved; min / median / max are reported.
The baseline is the integrity check alone in a fresh `python -c` process (what `verify` runs beside its walk).
Then, on a sparse copy of the ledger (the given one is never written), 1,000 jobs are reserved through
`ledger.reservation.reserve` (one event each) and `verify --since COUNT:HASH` is timed, the head taken from the
copy before the reserves (the head a nightly job would have kept).

Without --ledger a ledger is generated with scripts/make_big_ledger.py (-n jobs, default 100,000) in --dir.
The aims (issue 41): the full verify within 3x of the integrity check, under 200 MB peak RSS at 1,000,000 jobs;
`--since` under 5 s after 1,000 new events. Run-to-run noise on a shared machine is large: compare each figure
with its baseline from the same run (the load average is in the note).

    .venv/bin/python scripts/bench_verify.py [--ledger PATH [--config PATH]] [-n JOBS] [--rounds N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

Row = dict[str, Any]
APPENDED = 1000
INTEGRITY = ("import sqlite3, sys; c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True); "
             "print(c.execute('PRAGMA integrity_check').fetchall()[:1])")


def _env(folder: Path) -> dict[str, str]:
    """The children's environment: this checkout's code, a signing key file of the bench's own, no colour."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECLAIM_")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
               RECLAIM_SIGNING_KEY_FILE=str(folder / "signing-key"), NO_COLOR="1", COLUMNS="200")
    return env


def measure(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, int, str]:
    """Run `argv` once, as a new process: (wall seconds, its peak RSS in MB, exit code, the end of its output).
    Raises RuntimeError when it exits with a code not in `ok`."""
    t = time.perf_counter()
    with subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    text = out.decode("utf-8", "replace")
    if child.returncode not in ok:
        raise RuntimeError(f"{argv[2:5]} exited {child.returncode}: {text[-400:]}")
    return wall, usage.ru_maxrss / 1024, child.returncode, text


def spread(values: list[float], unit: str = "s") -> str:
    """"median (min–max)" of `values`."""
    return f"{statistics.median(values):.2f} {unit} ({min(values):.2f}–{max(values):.2f})"


def head_of(path: Path) -> str:
    """The ledger's head as verify prints it (COUNT:HASH), read straight from the file."""
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        count = c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        digest = c.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()[0]
    finally:
        c.close()
    return f"{count}:{digest}"


def append_reserves(path: Path, config: Path, n: int) -> float:
    """Reserve `n` new jobs on the ledger at `path` through the ledger's API (one event each): the seconds taken."""
    from ledger.clock import SystemClock
    from ledger.config import load_config
    from ledger.db import connect
    from ledger.reservation import reserve

    cfg = load_config(config)
    op = sorted(cfg.operations)[0]
    conn = connect(path)
    t = time.perf_counter()
    try:
        for i in range(n):
            reserve(conn, cfg, op, {"input": f"bench-verify-{i}"}, clock=SystemClock(), job_id=f"bench-verify-{i}",
                    actor="bench")
    finally:
        conn.close()
    return time.perf_counter() - t


def run(ledger: Path, config: Path, rounds: int, workdir: Path | None) -> list[Row]:
    """Figure 10's rows (see the module): the full verify beside the integrity check, and --since after 1,000."""
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-verify-", dir=workdir) as d:
        folder = Path(d)
        env = _env(folder)
        reclaim = [sys.executable, "-m", "console"]
        verify = [*reclaim, "verify", "--ledger", str(ledger), "--config", str(config)]
        full: list[tuple[float, float, int, str]] = []
        base: list[tuple[float, float, int, str]] = []
        for _ in range(rounds):
            base.append(measure([sys.executable, "-c", INTEGRITY, str(ledger)], env))
            full.append(measure(verify, env, ok=(0, 11)))
        first = full[0][3].splitlines()[0] if full[0][3] else ""
        events = int(first.split("events ", 1)[1].split(",")[0]) if first.startswith("events ") else 0
        verdict = "holds" if full[0][2] == 0 else "exit 11: the ledger has breaks (listed, bounded)"
        v_med, b_med = statistics.median(f[0] for f in full), statistics.median(b[0] for b in base)
        rows: list[Row] = [{
            "figure": f"verify, full: {events:,} events ({ledger.name}), wall",
            "value": spread([f[0] for f in full]),
            "baseline": f"integrity_check {spread([b[0] for b in base])}",
            "ratio": v_med / b_med if b_med else None,
            "note": f"aim <= 3x; {verdict}; load {load[0]:.2f}",
        }, {
            "figure": "verify, full: peak RSS",
            "value": spread([f[1] for f in full], "MB"),
            "baseline": f"integrity_check {spread([b[1] for b in base], 'MB')}",
            "ratio": None,
            "note": "aim < 200 MB at 1M jobs",
        }]
        copy = folder / "copy.db"
        subprocess.run(["cp", "--sparse=always", str(ledger), str(copy)], check=True)
        for suffix in ("-wal", "-shm"):
            if Path(f"{ledger}{suffix}").exists():
                shutil.copyfile(f"{ledger}{suffix}", f"{copy}{suffix}")
        head = head_of(copy)
        # the reserves in a child of their own: a child forked from this process after it imported the ledger
        # would start with its resident pages, and its peak RSS would count them
        took, _, _, _ = measure([sys.executable, str(Path(__file__).resolve()), "--append-to", str(copy), "--config",
                                 str(config)], env)
        since = [measure([*reclaim, "verify", "--ledger", str(copy), "--config", str(config), "--since", head], env,
                         ok=(0, 11)) for _ in range(rounds)]
        said = next((line for line in since[0][3].splitlines() if line.startswith("checked since")), "")
        rows.append({
            "figure": f"verify --since HEAD after {APPENDED:,} reserves (on a copy)",
            "value": spread([s[0] for s in since]),
            "baseline": "aim < 5 s",
            "ratio": statistics.median(s[0] for s in since) / v_med if v_med else None,
            "note": f"ratio: to the full verify; peak {spread([s[1] for s in since], 'MB')}; exit {since[0][2]}; "
                    f"the reserves' process took {took:.1f} s; {said[:60]}",
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledger", type=Path, default=None, help="an existing ledger (never written: --since runs on a "
                                                              "copy); default: generate one")
    ap.add_argument("--config", type=Path, default=None, help="its config (default: the .toml beside it, else one "
                                                              "make_big_ledger.py's operations)")
    ap.add_argument("-n", "--jobs", type=int, default=100_000, help="jobs of the generated ledger (default 100,000)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each measurement (default 3)")
    ap.add_argument("--dir", type=Path, default=None, help="folder for temporary files (default: $TMPDIR)")
    ap.add_argument("--append-to", type=Path, default=None, help=argparse.SUPPRESS)  # the reserves' own process
    args = ap.parse_args(argv)
    if args.append_to is not None:
        append_reserves(args.append_to, args.config, APPENDED)
        return 0
    import make_big_ledger

    with tempfile.TemporaryDirectory(prefix="reclaim-bench-verify-ledger-", dir=args.dir) as d:
        ledger, config = args.ledger, args.config
        if ledger is None:
            ledger = Path(d) / "big.db"
            info = make_big_ledger.generate(ledger, args.jobs, min(3000, args.jobs // 10), 14, time.time(), 1, "full")
            config = Path(d) / "big.toml"
            config.write_text(make_big_ledger.config_toml(max(info["max_per_day"] * 2, 1000)), encoding="utf-8")
        elif config is None:
            config = ledger.with_suffix(".toml")
            if not config.exists():
                config = Path(d) / "big.toml"
                config.write_text(make_big_ledger.config_toml(10**7), encoding="utf-8")
        rows = run(ledger.resolve(), config.resolve(), args.rounds, args.dir)
    width = max(len(r["figure"]) for r in rows)
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if isinstance(r["ratio"], float) else ""
        print(f"{r['figure']:<{width}}  {r['value']:>28}  {r['baseline']:>40}  {ratio:>7}  {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
