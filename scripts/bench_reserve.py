"""Benchmark ledger.reservation.reserve() against a raw sqlite3 loop doing the same statements.

Both sides run on their own fresh ledger file (created by ledger.db.create_ledger, so the schema,
indexes and triggers are the real ones), N distinct jobs each with its own target, one
BEGIN IMMEDIATE transaction per reservation:

    BEGIN IMMEDIATE; SELECT existing; SELECT quota; SELECT held on target; UPSERT quota;
    INSERT job; SELECT next seq and chain head; INSERT event; COMMIT

The raw side does the unavoidable per-job work too (idem key hash, payload and detail JSON, the
quota day) so the ratio measures what the library adds, not what any implementation must do.
Each round runs both sides on fresh files in alternating blocks of 250 reservations; medians are
reported, and the ratio is the median of the per-round ratios.

    .venv/bin/python scripts/bench_reserve.py [-n 5000] [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ledger.chain import event_hash
from ledger.clock import SystemClock, day_of
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger
from ledger.reservation import reserve
from ledger.signing import new_key, use_signer
from ledger.store import queries
from ledger.store.sqlite import BUSY_TIMEOUT_MS

OPERATION = "bench.op"


def bench_config() -> Config:
    """One gemini operation with an effectively unlimited quota (nothing is ever sent)."""
    return parse_config(
        {
            "remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
            "operations": {OPERATION: {"remote": "sim", "daily_quota": 10**9}},
        }
    )


def run_ledger(path: Path, n: int, synchronous: str, config: Config) -> float:
    """reserve() n distinct jobs on a fresh ledger at `path`; return reservations per second."""
    create_ledger(path)
    conn = connect(path, synchronous=synchronous)
    clock = SystemClock()
    t0 = time.perf_counter()
    ledger_block(conn, config, clock, 0, n)
    dt = time.perf_counter() - t0
    conn.close()
    return n / dt


def ledger_block(conn: sqlite3.Connection, config: Config, clock: SystemClock, start: int, stop: int) -> None:
    """reserve() jobs start..stop-1, each distinct with its own target."""
    for i in range(start, stop):
        res = reserve(
            conn, config, OPERATION, {"input": f"article {i}"}, clock=clock, job_id=f"job-{i}", target=f"target-{i}"
        )
        if res.outcome != "reserved":
            raise RuntimeError(f"reserve job-{i}: {res.outcome}")


def raw_block(conn: sqlite3.Connection, start: int, stop: int) -> None:
    """The raw loop's jobs start..stop-1, the same jobs ledger_block reserves."""
    for i in range(start, stop):
        raw_reserve(conn, f"job-{i}", f"target-{i}", {"input": f"article {i}"})


def _idem(job_id: str, operation: str) -> str:
    return hashlib.sha256(json.dumps([job_id, operation], separators=(",", ":")).encode()).hexdigest()[:32]


def raw_connect(path: Path, synchronous: str) -> sqlite3.Connection:
    """A plain sqlite3 connection to an existing ledger, with the pragmas ledger.db.connect sets."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    return conn


def run_raw(path: Path, n: int, synchronous: str) -> float:
    """The same transaction with plain sqlite3 on a fresh ledger at `path`; reservations per second."""
    create_ledger(path)
    conn = raw_connect(path, synchronous)
    t0 = time.perf_counter()
    raw_block(conn, 0, n)
    dt = time.perf_counter() - t0
    conn.close()
    return n / dt


def raw_reserve(conn: sqlite3.Connection, jid: str, target: str, value: dict[str, Any], quota: int = 10**9) -> None:
    """One reservation as a raw sqlite3 transaction: the statements reserve() runs, nothing else."""
    tz = "UTC"
    op = OPERATION
    ex = conn.execute
    payload = json.dumps(value, sort_keys=True, separators=(",", ":"))
    ex("BEGIN IMMEDIATE")
    now = time.time()
    day = day_of(now, tz)
    if ex("SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (jid, op)).fetchone() is not None:
        raise RuntimeError("duplicate")
    row = ex("SELECT used FROM quota_usage WHERE operation = ? AND day = ?", (op, day)).fetchone()
    used = row[0] if row else 0
    if used >= quota:
        raise RuntimeError("quota")
    held = ex(queries.load("sqlite")["jobs.held_on_target"], (target,)).fetchone()
    if held is not None:
        raise RuntimeError("held")
    ikey = _idem(jid, op)
    ex(
        "INSERT INTO quota_usage (operation, day, used) VALUES (?, ?, 1) "
        "ON CONFLICT (operation, day) DO UPDATE SET used = quota_usage.used + 1",
        (op, day),
    )
    ex(
        "INSERT INTO jobs (job_id, operation, idem_key, target, payload, state, quota_day, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, 'reserving', ?, ?, ?)",
        (jid, op, ikey, target, payload, day, now, now),
    )
    detail = json.dumps({"idem_key": ikey, "quota_day": day, "quota_used": used + 1, "quota_limit": quota},
                        sort_keys=True)
    seq, prev = ex(
        "SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = ? AND operation = ?), "
        "(SELECT hash FROM events ORDER BY id DESC LIMIT 1)",
        (jid, op),
    ).fetchone()
    digest = event_hash(prev, now, jid, op, seq, "reclaim", "reserve", None, "reserving", 0, detail)
    ex(
        "INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
        "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (now, jid, op, seq, "reclaim", "reserve", None, "reserving", 0, detail, prev, digest),
    )
    ex("COMMIT")


BLOCK = 250
"""Reservations per block: a round alternates blocks of the two sides, so drift (the disk, a neighbour) hits both."""


def measure(n: int, synchronous: str, rounds: int, workdir: Path) -> tuple[float, float, float]:
    """(median ledger /s, median raw /s, median of per-round ratios) over `rounds` rounds.

    Each round opens a fresh ledger for each side and runs them in alternating blocks of BLOCK
    reservations (which side goes first rotating every block), timing each side's blocks only; a slow
    moment of the disk or a busy neighbour then falls on every side alike, and the per-round ratio is
    the robust figure. One reservation on a scratch ledger first loads what reserve() imports once.
    """
    config = bench_config()
    warm = workdir / f"warm-up-{synchronous}.db"
    run_ledger(warm, 1, synchronous, config)
    for f in (warm, Path(f"{warm}-wal"), Path(f"{warm}-shm")):
        f.unlink(missing_ok=True)
    clock = SystemClock()
    led: list[float] = []
    raw: list[float] = []
    for r in range(rounds):
        paths = [workdir / f"{side}-{synchronous}-{r}.db" for side in ("ledger", "raw")]
        for p in paths:
            create_ledger(p)
        lconn, rconn = connect(paths[0], synchronous=synchronous), raw_connect(paths[1], synchronous)
        spent = [0.0, 0.0]
        for b, start in enumerate(range(0, n, BLOCK)):
            stop = min(n, start + BLOCK)
            for side in ((0, 1), (1, 0))[b % 2]:
                t0 = time.perf_counter()
                if side == 0:
                    ledger_block(lconn, config, clock, start, stop)
                else:
                    raw_block(rconn, start, stop)
                spent[side] += time.perf_counter() - t0
        lconn.close()
        rconn.close()
        led.append(n / spent[0])
        raw.append(n / spent[1])
        for path in paths:
            for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                f.unlink(missing_ok=True)
    ratios = [a / b for a, b in zip(led, raw, strict=True)]
    return statistics.median(led), statistics.median(raw), statistics.median(ratios)


def profile(n: int, synchronous: str, workdir: Path, top: int = 25) -> str:
    """cProfile of n reserve() calls: the top functions by own time, as text."""
    config = bench_config()
    path = workdir / f"profile-{synchronous}.db"
    prof = cProfile.Profile()
    prof.enable()
    run_ledger(path, n, synchronous, config)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def run(n: int = 5000, rounds: int = 5, workdir: Path | None = None) -> list[dict[str, Any]]:
    """Figure rows for bench.py: reserve()/s beside the raw loop, at FULL and NORMAL, and at NORMAL with every
    event signed (a process holding its signing key, ledger.signing: the raw loop signs nothing)."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-reserve-", dir=workdir) as d:
        for sync, signed in (("FULL", False), ("NORMAL", False), ("NORMAL", True)):
            use_signer(new_key(Path(d) / f"key-{sync}", "bench") if signed else None)
            try:
                led, raw, ratio = measure(n, sync, rounds, Path(d))
            finally:
                use_signer(None)
            rows.append(
                {
                    "figure": f"reserve() per s, synchronous={sync}{', signed' if signed else ''} "
                              f"(N={n}, median of {rounds})",
                    "value": f"{led:,.0f} /s",
                    "baseline": f"{raw:,.0f} /s raw sqlite3 loop",
                    "ratio": ratio,
                    "note": "ratio = median of per-round ratios; aim >= 0.90"
                    + ("" if ratio >= 0.9 else "; BELOW AIM (bench_reserve.py --profile)"),
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=5000, help="reservations per round (default 5000)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per side (default 5)")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of reserve() (NORMAL and FULL)")
    ap.add_argument("--dir", type=Path, default=None, help="folder for the temporary ledgers (default: $TMPDIR)")
    args = ap.parse_args(argv)
    for row in run(args.n, args.rounds, args.dir):
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}  ratio {row['ratio']:.2f}")
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="reclaim-bench-profile-", dir=args.dir) as d:
            for sync in ("NORMAL", "FULL"):
                print(f"\n=== cProfile, reserve() x {args.n}, synchronous={sync} ===")
                print(profile(args.n, sync, Path(d)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
