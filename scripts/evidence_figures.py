"""Held jobs with and without webhook evidence, over the demo's fault mix: one run, two halves.

Each half reserves N article jobs on a fresh ledger, runs worker passes against the loopback simulator
(the demo's random create faults, the same seed) until nothing is in flight, and counts:

- held: jobs that were held at some point;
- resolved by evidence with no person: held jobs reclaim reconciled itself from a signed webhook;
- left for a person: jobs still held at the end, each with why (no interaction at the remote: nothing
  ran, a person decides; an interaction whose delivery never arrived; or a delivery that arrived and was
  not enough, which would be a defect);
- double sends: idem keys with more than one create at the simulator, plus duplicates reclaim detected
  (no person releases anything here, so this must be 0).

With webhooks on, the simulator delivers deliveries in the documented envelope (no `user_metadata`) to an
in-process `reclaim receiver`, fails the demo's share of first attempts, and retries with Gemini's backoff
over its 24 h window compressed by COMPRESSION. The jobs are reserved over ten passes; from the sixth on,
the receiver is unreachable for OUTAGE real seconds (OUTAGE x COMPRESSION of the remote's time), so the
second half's deliveries arrive only on a retry. With webhooks off it sends none.

    .venv/bin/python scripts/evidence_figures.py [N] [OUTAGE_SECONDS]
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from console.demo import WEBHOOK_FIRST_ATTEMPT_FAIL_RATE
from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.receiver import make_server
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.worker import RemoteCache, tick

FAULTS = {"accept_then_hang": 0.04, "complete_lose_reply": 0.03, "status": 0.02, "drop_before_accept": 0.01,
          "status:400": 0.02}
SECRET_ENV = "RECLAIM_FIGURES_WEBHOOK_SECRET"
COMPRESSION = 144.0
"""Gemini's 24 h retry window passes in 10 minutes here."""


def _config(url: str, webhooks: bool, sink: Path) -> Any:
    gemini: dict[str, Any] = {"kind": "gemini", "base_url": url, "model": "gemini-sim", "timeout_seconds": 1.5}
    if webhooks:
        gemini["webhook_secret_env"] = SECRET_ENV
    return parse_config({
        "policy": {"lease_seconds": 10, "stale_reserving_seconds": 5, "retry_backoff_seconds": 0.2},
        "remotes": {"gemini": gemini},
        "operations": {"article.generate": {"remote": "gemini", "daily_quota": 100_000, "sink": str(sink)}},
    }, base_dir=sink.parent)


def run_half(n: int, webhooks: bool, folder: Path, outage: float = 0.0, seed: int = 7) -> dict[str, Any]:
    """One half: N jobs, passes until settled; the figures."""
    ledger = folder / ("on.db" if webhooks else "off.db")
    create_ledger(ledger)
    clock = SystemClock()
    with Simulator(complete_after=0.0) as sim:
        sim.set_fault_rates(FAULTS, seed=seed)
        cfg = _config(sim.url, webhooks, folder / "results")
        server = None
        if webhooks:
            server = make_server(ledger, cfg, clock=clock)
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
            sim.configure(webhook_url=f"http://127.0.0.1:{server.server_address[1]}/",
                          webhook_secret=os.environ[SECRET_ENV],
                          webhook_first_attempt_fail_rate=WEBHOOK_FIRST_ATTEMPT_FAIL_RATE,
                          webhook_time_compression=COMPRESSION)
        conn = connect(ledger, check_same_thread=False)
        remotes = RemoteCache(cfg)
        deadline = time.monotonic() + 900 + outage
        outage_started, reserved, batch = False, 0, max(n // 10, 1)
        while time.monotonic() < deadline:
            for i in range(reserved, min(reserved + batch, n)):  # the jobs arrive over ten passes
                reserve(conn, cfg, "article.generate", {"input": f"figure job {i}"}, clock=clock, job_id=f"fig-{i}")
            reserved = min(reserved + batch, n)
            if webhooks and outage and not outage_started and reserved >= n // 2:
                sim.receiver_down(outage)  # the second half is sent while the receiver is unreachable
                outage_started = True
            tick(conn, cfg, clock=clock, remotes=remotes, owner="figures")
            if reserved < n:
                continue
            busy = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE state IN ('reserving', 'submitted', 'done')").fetchone()[0]
            pending = sim.pending_webhooks() if webhooks else 0
            unhandled = sum(1 for _ in evidence_store.unhandled(conn)) + len(evidence_store.unattributed(conn))
            if busy == 0 and pending == 0 and unhandled == 0:
                break
            time.sleep(0.1)
        if server is not None:
            server.shutdown()
        creates: dict[str, int] = {}
        for i in sim.interactions():
            creates[i["labels"].get("idem", "")] = creates.get(i["labels"].get("idem", ""), 0) + 1
        held_ever = conn.execute("SELECT COUNT(DISTINCT job_id) FROM events WHERE to_state = 'held'").fetchone()[0]
        by_evidence = conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'reconcile' AND actor = 'reclaim'").fetchone()[0]
        left = conn.execute("SELECT COUNT(*) FROM jobs WHERE state = 'held'").fetchone()[0]
        states = dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        doubles = sum(1 for c in creates.values() if c > 1) + events_store.duplicate_count(conn)
        log = sim.webhook_deliveries() if webhooks else []
        delivered = {d["interaction_id"] for d in log if d["ok"]}
        why: dict[str, int] = {}
        for (idem,) in conn.execute("SELECT idem_key FROM jobs WHERE state = 'held'").fetchall():
            ran = sim.find_by_idem(idem)
            if not ran:
                reason = "no interaction at the remote (nothing ran)"
            elif not webhooks:
                reason = "an interaction ran; no webhooks"
            elif not any(i["id"] in delivered for i in ran):
                reason = "an interaction ran; its delivery never arrived (given up or not due)"
            else:
                reason = "an interaction ran and its delivery arrived (a defect)"
            why[reason] = why.get(reason, 0) + 1
        retried = sum(1 for d in log if d["ok"] and d["attempt"] > 1)
        deliveries = len(log)
        conn.close()
    return {"webhooks": "on" if webhooks else "off", "jobs": n, "held": held_ever, "resolved_by_evidence": by_evidence,
            "left_for_a_person": left, "left_why": why, "double_sends": doubles,
            "webhook_deliveries_logged": deliveries, "delivered_on_a_retry": retried, "states": states,
            "outage_seconds": outage if webhooks else 0.0}


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 500
    outage = float(argv[2]) if len(argv) > 2 else 120.0
    os.environ.setdefault(SECRET_ENV, "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode())
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="reclaim-evidence-") as d:
        rows = [run_half(n, True, Path(d), outage), run_half(n, False, Path(d))]
    for r in rows:
        print(f"webhooks {r['webhooks']}: {r['jobs']} jobs, held {r['held']}, resolved by evidence with no person "
              f"{r['resolved_by_evidence']}, left for a person {r['left_for_a_person']} {r['left_why']}, "
              f"double sends {r['double_sends']}; end states {r['states']}; delivery attempts logged "
              f"{r['webhook_deliveries_logged']}, delivered on a retry {r['delivered_on_a_retry']}; receiver "
              f"outage {r['outage_seconds']:.0f} s (x{COMPRESSION:.0f} of the remote's time)")
    print(f"run took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
