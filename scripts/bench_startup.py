"""Figure 7: cold start of `reclaim status` and `reclaim show` beside `python -c pass`, same run.

Each command runs REPEAT times, interleaved with the baseline, in a fresh process with the bytecode cache
warm (as an installed CLI has it); the median and the worst are reported. Also checks that neither
command imports the Gemini SDK (google.genai): only commands that talk to a remote load it.

    .venv/bin/python scripts/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECLAIM = [sys.executable, "-m", "console"]


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECLAIM_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(RECLAIM_LEDGER=str(folder / "reclaim.db"), RECLAIM_CONFIG=str(folder / "reclaim.toml"),
               RECLAIM_SIGNING_KEY_FILE=str(folder / "signing-key"), NO_COLOR="1", COLUMNS="160")
    return env


def _time(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def imports_sdk(args: list[str], env: dict[str, str], cwd: Path) -> bool:
    """True when `reclaim ARGS` imports google.genai (read from -X importtime)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "console", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    return any(line.rstrip().endswith((" google.genai", "| google.genai")) for line in done.stderr.splitlines())


def prepare(folder: Path) -> str:
    """A ledger with one job in `folder` (reserved without sending: the remote is not reachable)."""
    env = _env(folder)
    subprocess.run([*RECLAIM, "init"], env=env, cwd=folder, check=True, capture_output=True)
    from ledger.clock import SystemClock
    from ledger.config import load_config
    from ledger.db import connect
    from ledger.reservation import reserve

    cfg = load_config(folder / "reclaim.toml")
    conn = connect(folder / "reclaim.db")
    try:
        reserve(conn, cfg, "article.generate", {"input": "bench"}, clock=SystemClock(), job_id="bench-job",
                actor="bench")
    finally:
        conn.close()
    return "bench-job"


def run(repeat: int = 15) -> list[dict[str, Any]]:
    """The figure's rows: status and show, each beside `python -c pass` from the same run."""
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-start-") as d:
        folder = Path(d)
        job = prepare(folder)
        env = _env(folder)
        commands = {"reclaim status": ["status"], "reclaim show": ["show", job]}
        for args in commands.values():  # warm the bytecode cache once
            subprocess.run([*RECLAIM, *args], env=env, cwd=folder, capture_output=True, check=True)
        base: list[float] = []
        took: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeat):
            base.append(_time([sys.executable, "-c", "pass"], env, folder))
            for name, args in commands.items():
                took[name].append(_time([*RECLAIM, *args], env, folder))
        b = statistics.median(base)
        rows = []
        for name, args in commands.items():
            m = statistics.median(took[name])
            rows.append({
                "figure": f"{name}: cold start, median of {repeat} (aim < 0.3 s)",
                "value": f"{m * 1000:.0f} ms (worst {max(took[name]) * 1000:.0f})",
                "baseline": f"python -c pass {b * 1000:.0f} ms",
                "ratio": m / b if b else None,
                "note": "imports google.genai: " + ("YES" if imports_sdk(args, env, folder) else "no"),
            })
        return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    rows = run(ap.parse_args().repeat)
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
