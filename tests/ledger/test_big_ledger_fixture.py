"""The benchmarks' big ledger (scripts/make_big_ledger.py) is a ledger reclaim itself could have written: `verify`
passes on it, and the counters its rows fired agree with a recount, so the figures measured on it are of a real
ledger."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

from ledger.audit import verify
from ledger.db import connect
from ledger.store import jobs as jobs_store
from ledger.store import verify as verify_store

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_big_ledger.py"


def test_a_generated_ledger_passes_verify_and_its_counters_agree_with_a_recount(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_big_ledger", SCRIPT)
    assert spec is not None and spec.loader is not None
    make_big_ledger = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_big_ledger)
    info = make_big_ledger.generate(tmp_path / "big.db", 3000, 60, 14, time.time(), 1, "full")
    conn = connect(tmp_path / "big.db", readonly=True)
    try:
        verdict = verify(conn)
        assert verdict.ok, (verdict.chain_break, verdict.job_mismatch, verdict.problems[:3])
        assert verdict.events == info["events"] and verdict.jobs == 3000
        counted = verify_store.jobs_counted(conn)
        assert jobs_store.operation_counts(conn) == {
            op: {s: n for (o, s), n in counted.items() if o == op} for op in {o for o, _ in counted}}
        assert {s for (_, s) in counted} >= {"rejected", "remediated", "held", "consumed"}
    finally:
        conn.close()
