"""Figure 11: the commands an on-call person runs first, on a big ledger, warm and cold, beside `reclaim --help`.

Each command is a new process (`python -m console ...`, the installed CLI's code path), run ROUNDS times with
the rounds interleaved (warm, cold, baseline, ...), and reported as min / median / max:

  warm  the ledger's pages are in the OS page cache (the command ran just before);
  cold  the ledger file, its -wal and -shm were dropped from the OS page cache first (fsync, then
        posix_fadvise(POSIX_FADV_DONTNEED) on each: the kernel drops a file's clean cached pages), so every page
        the command reads comes from the disk. The Python modules stay cached, as on a host where the CLI ran
        before;
  baseline  `reclaim --help` warm (imports the CLI, reads nothing): the aim is each warm figure within 1.5x of
        it, and each cold figure under 1 s.

The ledger is used as it is (a copy when --copy: the first command of a newer reclaim migrates it).

    .venv/bin/python scripts/bench_commands.py --ledger big.db --config big.toml [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

RECLAIM = [sys.executable, "-m", "console"]
COMMANDS: dict[str, list[str]] = {
    "status": ["status"],
    "metrics": ["metrics"],
    "report --since 1d": ["report", "--since", "1d"],
    "jobs held": ["jobs", "held"],
}
"""What is measured, by the name each figure carries."""


def drop_files(paths: Iterable[Path]) -> None:
    """Drop each file's clean pages from the OS page cache (fsync first, then posix_fadvise DONTNEED); a file that
    is not there is passed by."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def drop_from_cache(ledger: Path) -> None:
    """Drop the ledger's file, -wal and -shm from the OS page cache."""
    drop_files((ledger, Path(f"{ledger}-wal"), Path(f"{ledger}-shm")))


def _env(ledger: str | Path, config: Path, folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECLAIM_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(RECLAIM_LEDGER=str(ledger), RECLAIM_CONFIG=str(config), RECLAIM_OPERATOR="alice",
               RECLAIM_SIGNING_KEY_FILE=str(folder / "signing-key"), NO_COLOR="1", COLUMNS="160")
    return env


def _time(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:])} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return took


def _spread(xs: list[float]) -> str:
    return f"{min(xs):.2f} / {statistics.median(xs):.2f} / {max(xs):.2f} s"


def run(ledger: str | Path, config: Path, rounds: int = 5, commands: dict[str, list[str]] | None = None,
        drop: Callable[[], None] | None = None, backend: str = "") -> list[dict[str, Any]]:
    """Measure every command warm and cold beside `reclaim --help`; rows for scripts/bench.py. `drop` empties the
    caches before a cold run (default: the SQLite file's pages, `drop_from_cache`); `backend` names it in the rows."""
    commands = commands or COMMANDS
    if drop is None:
        path = Path(ledger)

        def drop() -> None:
            drop_from_cache(path)

    with tempfile.TemporaryDirectory(prefix="reclaim-bench-cmd-") as d:
        env = _env(ledger, config, Path(d))
        for argv in commands.values():  # a first run: migrates an older ledger, warms the cache
            _time([*RECLAIM, *argv], env)
        help_s: list[float] = []
        warm: dict[str, list[float]] = {name: [] for name in commands}
        cold: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            help_s.append(_time([*RECLAIM, "--help"], env))
            for name, argv in commands.items():
                _time([*RECLAIM, *argv], env)  # warms what the cold run before it dropped
                warm[name].append(_time([*RECLAIM, *argv], env))
                drop()
                cold[name].append(_time([*RECLAIM, *argv], env))
    base = statistics.median(help_s)
    load = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    for name in commands:
        rows.append({"figure": f"{backend}`reclaim {name}` warm, min / median / max of {rounds}",
                     "value": _spread(warm[name]), "baseline": f"`reclaim --help` {_spread(help_s)}",
                     "ratio": statistics.median(warm[name]) / base, "note": f"aim 1.5x; load {load:.1f}"})
        rows.append({"figure": f"{backend}`reclaim {name}` cold (ledger dropped from the page cache)",
                     "value": _spread(cold[name]), "baseline": "aim < 1 s", "ratio": None,
                     "note": f"load {load:.1f}"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledger", type=Path, required=True)
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", action="append", choices=sorted(COMMANDS), help="measure only this command")
    args = ap.parse_args(argv)
    chosen = {k: v for k, v in COMMANDS.items() if not args.only or k in args.only}
    for row in run(args.ledger.resolve(), args.config.resolve(), args.rounds, chosen):
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']}  | {row['baseline']}{ratio}  ({row['note']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
