"""The send window's residual gap: from the last check before a create is written to its arrival.

`SendWindow.check()` runs in the HTTP client's request hook, right before the request is written. A
process stopped inside that gap can still send after its lease ran out: the gap is what the send window
cannot close. This measures it on loopback, through the real google-genai SDK against the simulator in
the same process (one monotonic clock): from `check()` returning to the simulator storing the
interaction (which includes reading and parsing the request, so it bounds the gap from above).
Baseline from the same run: one raw `http.client` POST of the same body, connect to arrival.

    .venv/bin/python scripts/bench_send_window.py [N]
"""

from __future__ import annotations

import http.client
import json
import statistics
import sys
import time
from typing import Any

from ledger.config import RemoteConfig
from ledger.remotes.gemini import GeminiRemote
from ledger.send_window import SendWindow
from ledger.simulator import Simulator

Row = dict[str, Any]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(n: int = 300) -> list[Row]:
    """Return the figure rows: the gap's p50 / p99 / max in ms, beside a raw POST's."""
    with Simulator() as sim:
        remote = GeminiRemote(RemoteConfig("sim", "gemini", base_url=sim.url, model="gemini-sim", timeout_seconds=5))
        gaps: list[float] = []
        for i in range(n):
            window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=2)
            out = remote.send({"input": f"bench {i}"}, f"idem-{i}", 1, window)
            assert out.kind == "accepted" and out.handle and window.checked_at is not None, out
            arrived = sim.interaction_arrival(out.handle)
            gaps.append(arrived - window.checked_at)
        raw: list[float] = []
        body = json.dumps({"model": "gemini-sim", "input": "raw", "background": True,
                           "labels": {"idem": "raw", "attempt": "1"}}).encode()
        for _ in range(n):
            conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
            conn.connect()
            t0 = time.monotonic()
            conn.request("POST", "/v1beta/interactions", body=body,
                         headers={"Content-Type": "application/json", "x-goog-api-key": "simulator"})
            handle = json.loads(conn.getresponse().read())["id"]
            conn.close()
            raw.append(sim.interaction_arrival(handle) - t0)
    ms = [g * 1000 for g in gaps]
    raw_ms = [g * 1000 for g in raw]
    return [{
        "figure": f"send window residual gap: check() -> create stored at the simulator, {n} sends (SDK)",
        "value": f"p50 {statistics.median(ms):.2f} ms, p99 {_pct(ms, 0.99):.2f}, max {max(ms):.2f}",
        "baseline": f"raw POST write -> stored: p50 {statistics.median(raw_ms):.2f} ms, p99 {_pct(raw_ms, 0.99):.2f}",
        "ratio": statistics.median(ms) / statistics.median(raw_ms),
        "note": "a pause longer than this gap, inside it, is the one a lease cannot fence",
    }]


if __name__ == "__main__":
    for row in run(int(sys.argv[1]) if len(sys.argv) > 1 else 300):
        print(f"{row['figure']}\n  {row['value']}\n  baseline {row['baseline']}  ratio {row['ratio']:.2f}")
