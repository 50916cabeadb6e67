"""End to end: the simulator delivers signed webhooks to a `reclaim receiver` process; workers act.

Nothing is crafted here: the simulator signs and sends as Gemini's project webhook does, the receiver is
the shipped command on a free port, the sends go through the real SDK, and the ledger is read back
from a fresh connection.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from process_state import process_state

from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect
from ledger.errors import EXIT_VERIFY_FAILED
from ledger.model import JobKey, idem_key
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

OP = "article.generate"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()




@pytest.fixture
def slow_sim() -> Iterator[Simulator]:
    """Interactions stay running for an hour, so a duplicate can still be cancelled."""
    with Simulator(complete_after=3600) as s:
        yield s


def _setup(sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
           start_cli: Callable[..., subprocess.Popen[str]], timeout: float = 5.0,
           **policy: Any) -> tuple[Path, subprocess.Popen[str]]:
    doc = make_config(base_url=sim.url, policy=policy or None, timeout_seconds=timeout)
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    config = write_config(doc)
    receiver = start_cli("receiver", "--port", "0", env={"RECLAIM_TEST_WHSEC": SECRET})
    assert receiver.stdout is not None
    line = receiver.stdout.readline()
    if "receiver listening on" not in line:
        receiver.kill()
        pytest.fail(f"the receiver did not start: {receiver.communicate(timeout=10)[1]}")
    sim.configure(webhook_url=line.strip().rsplit(" ", 1)[-1], webhook_secret=SECRET)
    return config, receiver


def _job(ledger: Path, job_id: str) -> Any:
    conn = connect(ledger, readonly=True)
    try:
        return jobs_store.find_job(conn, JobKey(job_id, OP)), events_store.job_events(conn, JobKey(job_id, OP))
    finally:
        conn.close()


def _diagnosis(ledger: Path, job_id: str, ticks: list[Any]) -> str:
    """What the ledger holds for a job, its evidence and how each was handled, and the last tick's output."""
    conn = connect(ledger, readonly=True)
    try:
        job, events = _job(ledger, job_id)
        rows = conn.execute("SELECT e.id, e.source, e.attempt, e.handle, e.remote_state, h.outcome FROM evidence e "
                            "LEFT JOIN evidence_handled h ON h.evidence_id = e.id ORDER BY e.id").fetchall()
    finally:
        conn.close()
    last = ticks[-1] if ticks else None
    return (f"job: {job}\nevents: {[(e.kind, e.actor, e.detail) for e in events]}\nevidence: {[tuple(r) for r in rows]}"
            f"\n{len(ticks)} ticks; the last: {last}")


def test_a_lost_reply_ends_consumed_through_the_webhook_and_a_dropped_webhook_leaves_it_held(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], start_cli: Callable[..., subprocess.Popen[str]],
    run_cli: Callable[..., Any], wait_for: Callable[..., Any],
) -> None:
    _setup(sim, make_config, write_config, start_cli)
    env = {"RECLAIM_TEST_WHSEC": SECRET}
    sim.add_fault("complete_lose_reply", match_idem=idem_key("heard", OP))
    sim.add_fault("complete_lose_reply", match_idem=idem_key("unheard", OP))
    sim.add_webhook_fault("drop", match_idem=idem_key("unheard", OP))
    for job_id in ("heard", "unheard"):
        assert run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", job_id, env=env).rc == 4
    wait_for(lambda: sim.pending_webhooks() == 0 and len(sim.webhook_deliveries()) >= 2, timeout=30,
             what="the simulator to deliver (or drop) both webhooks")

    def consumed() -> bool:
        run_cli("tick", env=env)
        return bool(_job(ledger_path, "heard")[0].state == "consumed")

    wait_for(consumed, timeout=60, what="the heard job to be consumed through its webhook")
    _, events = _job(ledger_path, "heard")
    assert [e.actor for e in events if e.kind == "reconcile"] == ["reclaim"]
    assert "release" not in [e.kind for e in events]
    assert sim.count("create", idem_key("heard", OP)) == 1
    unheard, _ = _job(ledger_path, "unheard")
    assert unheard.state == "held" and unheard.handle is None  # no webhook, no evidence: a person decides
    assert sim.count("create", idem_key("unheard", OP)) == 1
    # The reconcile names the evidence it acted on: deleting that evidence's handled row (so that the next pass
    # would act on it again) is named by verify.
    assert run_cli("verify").rc == 0
    handled = next(e.detail["handled_evidence"] for e in events if e.kind == "reconcile")
    with sqlite3.connect(ledger_path) as raw:
        assert raw.execute("DELETE FROM evidence_handled WHERE evidence_id = ?", (handled,)).rowcount == 1
    raw.close()
    verdict = run_cli("verify", "--json")
    assert verdict.rc == EXIT_VERIFY_FAILED, verdict
    assert any(f"evidence_handled row of evidence {handled} it acted on is gone" in p
               for p in json.loads(verdict.stdout)["problems"]), verdict


def test_a_stray_create_of_a_stopped_worker_is_detected_cancelled_and_never_delivered(
    slow_sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], start_cli: Callable[..., subprocess.Popen[str]],
    run_cli: Callable[..., Any], wait_for: Callable[..., Any],
) -> None:
    sim = slow_sim
    config, _ = _setup(sim, make_config, write_config, start_cli, timeout=1.0, lease_seconds=3,
                       send_margin_seconds=0.5, stale_reserving_seconds=0)
    env = {"RECLAIM_TEST_WHSEC": SECRET}
    idem = idem_key("slipped", OP)
    # A worker stops once its request was written, before the reply is read: the remote has run it, the
    # ledger has no handle. (A worker stopped inside the window's residual gap, before the write, is mostly cut
    # on resuming now, its deadline gone: ledger.send_window.call_with_deadline's firm limit.)
    conn = connect(ledger_path)
    try:
        reserve(conn, load_config(config), OP, {"input": "slipped"}, clock=SystemClock(), job_id="slipped")
    finally:
        conn.close()
    stale = start_cli("worker", "--interval", "0.2", env={**env, "RECLAIM_PAUSE_AT": "after_request_written"})
    wait_for(lambda: process_state(stale.pid) == "T", timeout=30, what="the worker to stop before reading its reply")
    job, _ = _job(ledger_path, "slipped")
    wait_for(lambda: time.time() > job.lease_until + 0.5, timeout=10, what="the lease to run out")
    assert run_cli("tick", env=env).rc == 4  # recovery: no handle, Gemini cannot be searched -> held
    assert run_cli("finding", "slipped", "--category", "not_received", "--note", "not in the logs",
                   operator="alice").rc == 0
    assert run_cli("release", "slipped", "--reason", "not received", operator="bob").rc == 0
    assert run_cli("tick", env=env).rc == 0  # attempt 2 is sent and submitted
    os.kill(stale.pid, signal.SIGCONT)  # the stale worker reads attempt 1's reply: fenced, its handle unknown
    wait_for(lambda: sim.count("create", idem) == 2, timeout=30, what="both creates to be stored")
    # The stray interaction stops to ask for something: the remote's webhook names it while it is live.
    [stray] = [i for i in sim.find_by_idem(idem) if i["labels"]["attempt"] == "1"]
    sim.force_status(stray["id"], "requires_action")
    wait_for(lambda: sim.pending_webhooks() == 0 and any(
        d["interaction_id"] == stray["id"] and d["ok"] for d in sim.webhook_deliveries()),
        timeout=30, what="its webhook")
    stale.send_signal(signal.SIGTERM)
    stale.communicate(timeout=30)

    ticks: list[Any] = []

    def detected() -> bool:
        ticks.append(run_cli("tick", env=env))
        conn = connect(ledger_path, readonly=True)
        try:
            return events_store.duplicate_count(conn) == 1
        finally:
            conn.close()

    try:
        wait_for(detected, timeout=60, what="the duplicate to be detected")
    except pytest.fail.Exception:
        pytest.fail(f"the duplicate was not detected within 60 s\n{_diagnosis(ledger_path, 'slipped', ticks)}")
    job, events = _job(ledger_path, "slipped")
    [dup] = [e for e in events if e.kind == "duplicate_send"]
    attempts = {i["id"]: i["labels"]["attempt"] for i in sim.find_by_idem(idem)}
    assert attempts[dup.detail["handle"]] == "1" and attempts[job.handle] == "2"
    assert sim.count("cancel", idem) == 1 and sim.interaction(dup.detail["handle"])["status"] == "cancelled"
    assert job.attempt == 2 and job.handle != dup.detail["handle"]  # never delivered as the job's result
    assert "DUPLICATE SENDS detected: 1" in run_cli("status").stdout
