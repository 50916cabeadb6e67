"""Benchmark the worker's poll rate: one ledger.worker.tick over N submitted jobs that stay running.

Fixture (timed separately, not part of the figure): an in-process ledger.simulator.Simulator with a
huge complete_after, a fresh ledger, N jobs reserved with ledger.reservation.reserve, then each claimed
with ledger.leases.claim_for_send and marked accepted with ledger.worker.record_send_outcome.
The first --real-posts jobs are sent for real (ledger.worker.send_one: the google-genai SDK POSTs
to the simulator); if N real POSTs would take more than 60 s at that rate, the remaining
interactions are created through the simulator's own constructor (Simulator._new_interaction_locked,
the same record a POST makes) and only the SDK call is skipped.

Figure: polls per second of one tick (recover, send, poll, deliver; only the poll has work), beside
the same number of GETs through the SDK from one thread (client.interactions.get, no ledger).

The shipped simulator does not set TCP_NODELAY: a keep-alive request then waits ~40 ms for a delayed
ACK (Nagle), capping one connection at ~20 requests/s, which would measure the simulator, not the
SDK or the ledger. Unless --as-shipped is given, this script sets
`_Handler.disable_nagle_algorithm = True` in-process (a no-op once the simulator sets it itself)
and reports the as-shipped single-thread GET rate on a small sample as its own row.

    .venv/bin/python scripts/bench_tick.py [-n 10000] [--real-posts 200] [--as-shipped]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from google import genai
from google.genai import types

from ledger import simulator as simulator_module
from ledger.clock import SystemClock
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger
from ledger.leases import claim_for_send
from ledger.model import JobKey
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, record_send_outcome, send_one, tick

OPERATION = "article.summarize"
MODEL = "gemini-sim"
REAL_POST_BUDGET_S = 60.0


def tick_config(url: str) -> Config:
    """One gemini operation against the simulator at `url`."""
    return parse_config(
        {
            "remotes": {"sim": {"kind": "gemini", "base_url": url, "model": MODEL, "timeout_seconds": 30}},
            "operations": {OPERATION: {"remote": "sim", "daily_quota": 10**9}},
        }
    )


def sdk_client(url: str) -> genai.Client:
    """A read client configured like GeminiRemote's (3 attempts, 30 s timeout)."""
    return genai.Client(
        api_key="simulator",
        http_options=types.HttpOptions(
            base_url=url, timeout=30_000, retry_options=types.HttpRetryOptions(attempts=3)
        ),
    )


def build_fixture(path: Path, sim: Simulator, config: Config, n: int, real_posts: int) -> dict[str, Any]:
    """N submitted jobs in a fresh ledger, each with a live interaction in `sim`; returns timings."""
    create_ledger(path)
    conn = connect(path, synchronous="NORMAL")  # fixture only; the tick below uses FULL
    clock = SystemClock()
    remotes = RemoteCache(config)
    remote = remotes.for_operation(OPERATION)
    t0 = time.perf_counter()
    keys: list[JobKey] = []
    for i in range(n):
        res = reserve(conn, config, OPERATION, {"input": f"summarise article {i}"}, clock=clock,
                      job_id=f"article-{i}", target=f"article-{i}")
        keys.append(res.key)
    t_reserve = time.perf_counter() - t0

    real = min(real_posts, n)
    t1 = time.perf_counter()
    for key in keys[:real]:
        outcome, applied = send_one(conn, config, key, remote, clock=clock, owner="bench-fixture")
        if outcome is None or outcome.kind != "accepted" or applied is None or not applied.ok:
            raise RuntimeError(f"real send of {key} did not end accepted: {outcome}")
    t_real = time.perf_counter() - t1
    per_post = t_real / real if real else 0.0
    use_real = per_post * n <= REAL_POST_BUDGET_S
    t2 = time.perf_counter()
    for key in keys[real:]:
        claim = claim_for_send(conn, config, key, owner="bench-fixture", now=clock.now())
        if claim is None:
            raise RuntimeError(f"{key}: not due")
        if use_real:
            outcome = remote.send(claim.job.payload, claim.job.idem_key, claim.job.attempt)
        else:
            body = {"model": MODEL, "input": claim.job.payload["input"], "background": True,
                    "labels": {"idem": claim.job.idem_key, "attempt": str(claim.job.attempt)}}
            with sim._lock:
                rec = sim._new_interaction_locked(body, claim.job.idem_key, claim.job.attempt, False)
            outcome = SendOutcome("accepted", handle=rec.id)
        applied = record_send_outcome(conn, config, claim, outcome, now=clock.now())
        if not applied.ok:
            raise RuntimeError(f"{key}: accept not recorded ({applied.refusal})")
    t_rest = time.perf_counter() - t2
    submitted = conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'submitted'").fetchone()[0]
    handles = [r[0] for r in conn.execute("SELECT handle FROM jobs WHERE state = 'submitted' ORDER BY created_at")]
    conn.close()
    if submitted != n:
        raise RuntimeError(f"fixture: {submitted} submitted jobs, expected {n}")
    return {
        "reserve_s": t_reserve,
        "real_posts": real,
        "per_post_s": per_post,
        "use_real": use_real,
        "rest_s": t_rest,
        "total_s": time.perf_counter() - t0,
        "handles": handles,
    }


def raw_gets(url: str, handles: list[str]) -> float:
    """GETs per second through the SDK from one thread, no ledger."""
    client = sdk_client(url)
    client.interactions.get(id=handles[0])  # warm the connection and the SDK's lazy imports
    t0 = time.perf_counter()
    for h in handles:
        got = client.interactions.get(id=h)
        if got.status != "in_progress":
            raise RuntimeError(f"interaction {h} is {got.status}, expected in_progress")
    return len(handles) / (time.perf_counter() - t0)


def as_shipped_gets(sample: int) -> tuple[float, bool]:
    """Single-thread SDK GET rate against a simulator with the shipped socket options; (rate, had_nodelay)."""
    handler = simulator_module._Handler
    saved = handler.__dict__.get("disable_nagle_algorithm", None)
    if saved is not None:
        del handler.disable_nagle_algorithm  # back to the class default the simulator ships with
    try:
        with Simulator(complete_after=1e9).start() as sim:
            client = sdk_client(sim.url)
            created = client.interactions.create(model=MODEL, input="x", background=True, labels={"idem": "x"})
            assert created.id
            return raw_gets(sim.url, [created.id] * sample), bool(handler.disable_nagle_algorithm)
    finally:
        if saved is not None:
            handler.disable_nagle_algorithm = saved


def run(n: int = 10_000, real_posts: int = 200, workdir: Path | None = None, as_shipped: bool = False,
        shipped_sample: int = 100) -> list[dict[str, Any]]:
    """Figure rows for bench.py."""
    handler = simulator_module._Handler
    patched = False
    if not as_shipped and not handler.disable_nagle_algorithm:
        handler.disable_nagle_algorithm = True  # type: ignore[misc]
        patched = True
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="reclaim-bench-tick-", dir=workdir) as d, \
                Simulator(complete_after=1e9).start() as sim:
            config = tick_config(sim.url)
            path = Path(d) / "tick.db"
            fx = build_fixture(path, sim, config, n, real_posts)
            gets_before = sim.count("get")
            conn = connect(path)  # FULL, as a worker opens it
            t0 = time.perf_counter()
            report = tick(conn, config, clock=SystemClock(), remotes=RemoteCache(config), owner="bench-tick")
            dt = time.perf_counter() - t0
            conn.close()
            gets = sim.count("get") - gets_before
            if report.polled != n or gets != n or report.completed or report.held:
                raise RuntimeError(f"tick polled {report.polled}, simulator saw {gets} GETs, report {report}")
            tick_rate = n / dt
            base = raw_gets(sim.url, fx["handles"])
        how = "real SDK POSTs" if fx["use_real"] else (
            f"{fx['real_posts']} real SDK POSTs ({fx['per_post_s'] * 1000:.0f} ms each: {n} would take "
            f"{fx['per_post_s'] * n:.0f} s > 60 s), the rest via Simulator._new_interaction_locked"
        )
        rows.append({
            "figure": f"tick poll rate, {n:,} submitted jobs running (poll_concurrency={config.policy.poll_concurrency})",
            "value": f"{tick_rate:,.0f} polls/s ({dt:.1f} s)",
            "baseline": f"{base:,.0f} GET/s raw SDK, 1 thread",
            "ratio": tick_rate / base,
            "note": "simulator patched in-process: TCP_NODELAY" if patched else "simulator as shipped",
        })
        rows.append({
            "figure": f"tick fixture: {n:,} submitted jobs (reserve, claim_for_send, record_send_outcome)",
            "value": f"{fx['total_s']:.1f} s",
            "baseline": f"reserve {fx['reserve_s']:.1f} s, claim+accept {fx['rest_s']:.1f} s",
            "ratio": None,
            "note": how,
        })
        if patched and shipped_sample:
            rate, had = as_shipped_gets(shipped_sample)
            rows.append({
                "figure": f"simulator as shipped (no TCP_NODELAY): raw SDK GET/s, 1 thread, {shipped_sample} GETs",
                "value": f"{rate:,.0f} GET/s",
                "baseline": f"{base:,.0f} GET/s with TCP_NODELAY",
                "ratio": rate / base,
                "note": "Nagle + delayed ACK: ~40 ms per keep-alive request" if not had else "",
            })
    finally:
        if patched:
            del handler.disable_nagle_algorithm
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=10_000, help="submitted jobs (default 10000)")
    ap.add_argument("--real-posts", type=int, default=200, help="jobs sent through the real SDK first (default 200)")
    ap.add_argument("--as-shipped", action="store_true", help="do not set TCP_NODELAY on the simulator")
    ap.add_argument("--dir", type=Path, default=None, help="folder for the temporary ledger (default: $TMPDIR)")
    args = ap.parse_args(argv)
    for row in run(args.n, args.real_posts, args.dir, args.as_shipped):
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}{ratio}  {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
