"""Evidence lag: from a webhook delivery's 2xx to the held job it names being reconciled, beside the poll interval.

A looping worker waits `interval` seconds between passes, but wakes as soon as another process records
new webhook evidence (ledger.worker.wait_for_evidence). This measures that on a SQLite ledger: N held
jobs (their create ran at the simulator, the reply was lost); for each, a delivery in the documented
envelope is POSTed to the receiver and the time from its answer to the job's `reconcile` event is taken.
The worker and the receiver run in this process on their own connections; the simulator answers the
worker's GETs over loopback through the real SDK. Without the wake-up the lag would be up to the poll
interval (half of it on average).

    .venv/bin/python scripts/bench_evidence_lag.py [N] [INTERVAL]
"""

from __future__ import annotations

import base64
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from gemini_deliveries import delivery, post

from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.model import JobKey
from ledger.receiver import make_server
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, run_worker, tick

Row = dict[str, Any]
OP = "article.generate"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(n: int = 30, interval: float = 2.0, workdir: Path | None = None) -> list[Row]:
    """The figure rows: delivery-to-reconciled p50 / p95 / max in ms, beside the worker's poll interval."""
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    os.environ["RECLAIM_BENCH_WHSEC"] = secret
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-lag-", dir=workdir) as d, Simulator() as sim:
        ledger = Path(d) / "lag.db"
        create_ledger(ledger)
        cfg = parse_config({
            "timezone": "UTC", "identity": {"source": "declared"},
            "operators": {"bench": ["sender"]},
            "remotes": {"gemini": {"kind": "gemini", "base_url": sim.url, "model": "gemini-sim",
                                   "timeout_seconds": 5, "webhook_secret_env": "RECLAIM_BENCH_WHSEC"}},
            "operations": {OP: {"remote": "gemini", "daily_quota": 10 * n, "sink": str(Path(d) / "out")}},
        }, base_dir=Path(d))
        clock = SystemClock()
        conn = connect(ledger)
        interactions: dict[str, str] = {}
        for i in range(n):
            res = reserve(conn, cfg, OP, {"input": f"lag {i}"}, clock=clock, job_id=f"lag-{i}")
            assert res.job is not None
            sim.add_fault("complete_lose_reply", match_idem=res.job.idem_key)
        tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="setup")
        for i in range(n):
            job = jobs_store.find_job(conn, JobKey(f"lag-{i}", OP))
            assert job is not None and job.state == "held", job
            interactions[job.job_id] = str(sim.find_by_idem(job.idem_key)[0]["id"])
        server = make_server(ledger, cfg, clock=clock)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        stop = threading.Event()
        worker_conn = connect(ledger, check_same_thread=False)
        worker = threading.Thread(target=run_worker, args=(worker_conn, cfg),
                                  kwargs={"clock": clock, "stop": stop, "interval": interval}, daemon=True)
        worker.start()
        lags: list[float] = []
        try:
            for job_id, interaction in interactions.items():
                status, _ = post(url, *delivery(interaction, secret))
                answered = time.time()
                assert status == 202, status
                deadline = time.monotonic() + 10 * interval + 30
                while True:
                    events = [e for e in events_store.job_events(conn, JobKey(job_id, OP)) if e.kind == "reconcile"]
                    if events:
                        lags.append(events[0].at - answered)
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{job_id} was not reconciled within {10 * interval + 30:.0f} s")
                    time.sleep(0.005)
        finally:
            stop.set()
            worker.join(timeout=60)
            server.shutdown()
            server.server_close()
            worker_conn.close()
            conn.close()
    ms = [x * 1000 for x in lags]
    return [{
        "figure": f"evidence lag: delivery 2xx -> held job reconciled ({n} jobs, SQLite, woken worker)",
        "value": f"p50 {statistics.median(ms):.0f} ms, p95 {_pct(ms, 0.95):.0f} ms",
        "baseline": f"poll interval {interval * 1000:.0f} ms",
        "ratio": statistics.median(ms) / (interval * 1000),
        "note": f"max {max(ms):.0f} ms; without the wake-up up to the interval",
    }]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    every = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    for row in run(count, every):
        print(f"{row['figure']}: {row['value']} (baseline {row['baseline']}; ratio {row['ratio']:.3f}; {row['note']})")
