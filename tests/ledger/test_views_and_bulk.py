"""Saved views live in the ledger per operator; bulk assign previews a count and never releases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger import connect, reserve
from ledger.config import Config
from ledger.simulator import Simulator
from ledger.worker import submit_now

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)


def test_saved_view_round_trip_and_errors(ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
                                          fingerprint: Callable[[Path], str]) -> None:
    res = run_cli("views", "--save", "mine", "--group", "held", "--filter", "owner:me op:article.*",
                  "--json", operator="alice")
    assert res.rc == 0 and json.loads(res.stdout) == [{"name": "mine", "group": "held",
                                                       "filter": "owner:me op:article.*"}]
    # Views are per operator.
    assert json.loads(run_cli("views", "--json", operator="bob").stdout) == []
    before = fingerprint(ledger_path)
    bad = run_cli("views", "--save", "x", "--group", "nope", operator="alice")
    assert bad.rc == 2 and "group 'nope'" in bad.stderr
    missing = run_cli("jobs", "--view", "nope", operator="alice")
    assert missing.rc == 2 and "view 'nope'" in missing.stderr
    assert fingerprint(ledger_path) == before


def test_bulk_assign_previews_then_assigns_only_matching_held_jobs(
    sim: Simulator, cfg: Config, clock: Any, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    conn = connect(ledger_path)
    for i in range(3):
        sim.add_fault("status", status=503)
        assert submit_now(conn, cfg, OP, {"input": f"h{i}"}, clock=clock, job_id=f"held-{i}",
                          target=f"bucket-{i}").state == "held"
    assert reserve(conn, cfg, OP, {"input": "r"}, clock=clock, job_id="other").outcome == "reserved"
    conn.close()
    creates = sim.count("create")
    before = fingerprint(ledger_path)
    preview = run_cli("bulk-assign", "--owner", "alice", "--due", "2026-12-02T09:00Z", "--filter", "bucket-1",
                      "--reason", "alice is on call", "--json", operator="bob")
    assert preview.rc == 0 and json.loads(preview.stdout)["matched"] == 1
    assert fingerprint(ledger_path) == before  # a preview writes nothing
    done = run_cli("bulk-assign", "--owner", "alice", "--due", "2026-12-02T09:00Z", "--yes", "--json",
                   "--reason", "alice is on call", operator="bob")
    assert json.loads(done.stdout)["assigned"] == 3
    assert {read_job(ledger_path, f"held-{i}").owner for i in range(3)} == {"alice"}
    assert read_job(ledger_path, "other").owner is None and read_job(ledger_path, "other").state == "reserving"
    assert sim.count("create") == creates  # assigning never sends
    refused = run_cli("bulk-assign", "--owner", "x", "--due", "2026-12-02T09:00Z", "--yes", "--reason", "r",
                      operator="carol")
    assert refused.rc == 6 and "triage role" in refused.stderr
