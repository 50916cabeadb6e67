"""A remote that refuses every job is paused: no more sends until a probe passes or a person resumes it.

Through the real SDK against the simulator, counting POSTs there; the ledger read back fresh.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store.remote_pauses import paused_remotes
from ledger.worker import RemoteCache, tick

OP = "article.generate"
PROBE = 60.0


@pytest.fixture
def pause_cfg(make_config: Callable[..., dict[str, Any]], tmp_path: Path) -> Config:
    doc = make_config(policy={"remote_probe_seconds": PROBE})
    doc["notify"] = {"ops": {"kind": "webhook", "url": "http://127.0.0.1:9/unused", "events": ["paused", "held"]}}
    return parse_config(doc, base_dir=tmp_path)


def _reserve(conn: sqlite3.Connection, cfg: Config, clock: ManualClock, *ids: str) -> None:
    for job_id in ids:
        assert reserve(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id).outcome == "reserved"


def _pass(conn: sqlite3.Connection, cfg: Config, clock: ManualClock) -> Any:
    return tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w-test")


def _paused_outbox(ledger: Path) -> list[dict[str, Any]]:
    conn = connect(ledger, readonly=True)
    try:
        return [json.loads(r[0]) for r in conn.execute("SELECT body FROM outbox WHERE kind = 'paused'")]
    finally:
        conn.close()


@pytest.mark.parametrize("fault", ["api_key_invalid", "billing", "location", "permission_denied", "payment_required",
                                   "model_not_found"])
def test_a_remote_that_refuses_every_job_is_paused_and_nothing_more_is_sent(
    fault: str, sim: Simulator, ledger_path: Path, pause_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
) -> None:
    sim.add_fault(fault, count=10)
    _reserve(conn, pause_cfg, clock, "a", "b", "c")
    report = _pass(conn, pause_cfg, clock)
    # The first send met the refusal; the other two were not sent at all.
    assert sim.count("create") == 1 and report.remote_refused == 1 and report.sent == 1
    fresh = connect(ledger_path, readonly=True)
    try:
        pauses = paused_remotes(fresh)
        assert list(pauses) == ["gemini"] and pauses["gemini"].reason
        for job_id in ("a", "b", "c"):
            job = jobs_store.find_job(fresh, JobKey(job_id, OP))
            assert job is not None and job.state == "reserving"  # nothing was accepted
    finally:
        fresh.close()
    # Before the probe time, another pass sends nothing.
    clock.advance(PROBE / 2)
    _pass(conn, pause_cfg, clock)
    assert sim.count("create") == 1
    assert len(_paused_outbox(ledger_path)) == 1


def test_a_probe_is_one_send_per_pass_and_a_passing_probe_lifts_the_pause(
    sim: Simulator, ledger_path: Path, pause_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
) -> None:
    sim.add_fault("api_key_invalid", count=2)  # the first send and the first probe are refused
    _reserve(conn, pause_cfg, clock, "a", "b", "c")
    _pass(conn, pause_cfg, clock)
    assert sim.count("create") == 1
    clock.advance(PROBE + 1)
    _pass(conn, pause_cfg, clock)
    assert sim.count("create") == 2  # one probe, refused: still paused, no second notification
    assert "gemini" in paused_remotes(conn) and len(_paused_outbox(ledger_path)) == 1
    clock.advance(PROBE + 1)
    _pass(conn, pause_cfg, clock)  # the probe passes: the pause is lifted
    assert paused_remotes(conn) == {}
    _pass(conn, pause_cfg, clock)
    states = {j: jobs_store.find_job(conn, JobKey(j, OP)).state for j in "abc"}  # type: ignore[union-attr]
    assert set(states.values()) <= {"submitted", "done", "consumed"}, states
    assert sim.count("create") == 5  # 2 refused, then each of the three jobs once
    kinds = [e.kind for e in events_store.job_events(conn, JobKey("a", OP))]
    assert "remote_paused" in kinds and "remote_resumed" in kinds


def test_reclaim_resume_lifts_a_pause_only_for_an_approver_with_a_reason(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    sim.add_fault("api_key_invalid", count=5)
    assert run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", "r1").rc == 9
    status = run_cli("status")
    assert status.rc == 0 and "remote gemini is PAUSED" in status.stdout
    before = fingerprint(ledger_path)
    refused = run_cli("resume", "gemini", "--reason", "key rotated", operator="alice")
    assert refused.rc == 6 and "approver" in refused.stderr
    assert run_cli("resume", "gemini", operator="bob").rc == 2  # a reason is required
    assert run_cli("resume", "nope", "--reason", "x", operator="bob").rc == 2
    assert fingerprint(ledger_path) == before
    ok = run_cli("resume", "gemini", "--reason", "key rotated", operator="bob")
    assert ok.rc == 0, ok
    assert run_cli("resume", "gemini", "--reason", "again", operator="bob").rc == 6  # not paused any more
    sim.clear_faults()
    assert run_cli("tick").rc == 0
    assert sim.count("create") == 2
    assert "PAUSED" not in run_cli("status").stdout
