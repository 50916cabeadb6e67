"""A send that gave up can never arrive later.

Behind a slow link (tests/support/slow_link.py: a relay that carries requests to the simulator at a set rate and
holds little in flight), a create whose body cannot cross within the request's deadline is given up and its
connection reset: the rest of the body never leaves, so the simulator never stores that create, whatever is
decided about the job afterwards. Counted at the simulator (by the `idem` and `attempt` labels of stored
interactions, and the cleanup jobs it stored); the ledger read back from a fresh connection.

The link carries 256 KB/s; the remote's deadline is 1 s, the send margin 1 s and `min_send_rate` 1 MB/s, so a
body of 900 KB passes the size rule (1 MB) yet needs 3.5 s to cross: without the reset the kernel would go on
sending it after the give-up, and the create would land seconds later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from process_state import process_state
from slow_link import SlowLink

from ledger import triage
from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store

OP = "article.generate"
CLEANUP = "storage.cleanup"
RATE = 256 * 1024
TIMEOUT = 1.0
MARGIN = 1.0
POLICY = {"lease_seconds": 6, "send_margin_seconds": MARGIN, "min_send_rate": 1_000_000,
          "stale_reserving_seconds": 0, "retry_backoff_seconds": 0}
BIG = 900_000  # fits the size rule (1 MB), needs 3.5 s on the link

pytestmark = pytest.mark.slow


@pytest.fixture
def link(sim: Simulator) -> Iterator[SlowLink]:
    """A 256 KB/s link in front of the simulator."""
    port = int(sim.url.rstrip("/").rsplit(":", 1)[1])
    with SlowLink(("127.0.0.1", port), RATE) as relay:
        yield relay


@pytest.fixture
def slow_config(link: SlowLink, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path]) -> Path:
    """The standard config, its gemini remote and an http remote (the simulator's cleanup service) behind the link."""
    doc = make_config(base_url=link.url, timeout_seconds=TIMEOUT, policy=POLICY)
    doc["remotes"]["cleaner"] = {"kind": "http", "url": f"{link.url}cleanup", "timeout_seconds": TIMEOUT}
    doc["operations"][CLEANUP] = {"remote": "cleaner", "daily_quota": 10}
    return write_config(doc)


def _creates(sim: Simulator, idem: str) -> list[int]:
    """The `attempt` label of every interaction the simulator stored for `idem`, in arrival order."""
    return [int(i["labels"]["attempt"]) for i in sim.interactions() if i["labels"].get("idem") == idem]


def _job(ledger: Path, job_id: str, operation: str = OP) -> Any:
    conn = connect(ledger, readonly=True)
    try:
        return jobs_store.find_job(conn, JobKey(job_id, operation))
    finally:
        conn.close()


def _reserve(ledger: Path, config: Path, job_id: str, payload: dict[str, Any]) -> None:
    conn = connect(ledger)
    try:
        assert reserve(conn, load_config(config), OP, payload, clock=SystemClock(), job_id=job_id).outcome == "reserved"
    finally:
        conn.close()


def _link_quiet(link: SlowLink, wait_for: Callable[..., Any]) -> None:
    """Wait (bounded) until every connection through the link has ended on both sides."""
    wait_for(link.all_finished, timeout=30, what="every connection through the slow link to end")


def test_a_gemini_create_given_up_at_its_deadline_is_cut_and_never_stored(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    payload = json.dumps({"input": "x" * BIG})
    res = run_cli("submit", OP, "--payload", payload, "--job-id", "big", config=slow_config)
    assert res.rc == 4, res  # held: no reply within the deadline
    job = _job(ledger_path, "big")
    assert job.state == "held" and "timeout" in (job.held_reason or ""), job
    _link_quiet(link, wait_for)
    assert link.connections == 1 and 0 < link.carried[0] < BIG, link.carried
    assert _creates(sim, job.idem_key) == []


def test_an_http_create_given_up_at_its_deadline_is_cut_and_never_stored(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    payload = json.dumps({"bucket": "b", "prefix": "y" * BIG})
    res = run_cli("submit", CLEANUP, "--payload", payload, "--job-id", "sweep", config=slow_config)
    assert res.rc == 4, res
    assert _job(ledger_path, "sweep", CLEANUP).state == "held"
    _link_quiet(link, wait_for)
    assert link.connections == 1 and 0 < link.carried[0] < BIG, link.carried
    assert sim.cleanup_jobs() == []


def test_a_body_that_crosses_in_time_is_accepted_once(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    res = run_cli("submit", OP, "--payload", json.dumps({"input": "x" * 50_000}), "--job-id", "small",
                  config=slow_config)
    assert res.rc == 0, res
    job = _job(ledger_path, "small")
    assert job.state == "submitted" and job.handle, job
    _link_quiet(link, wait_for)
    assert _creates(sim, job.idem_key) == [1]


def test_the_size_rule_counts_the_bytes_the_sdk_writes_for_non_ascii_text(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    # 250,000 x "é": 500 KB as compact UTF-8, 1.5 MB as the SDK writes it (\u00e9): over the 1 MB rule.
    before = fingerprint(ledger_path)
    res = run_cli("submit", OP, "--payload", json.dumps({"input": "é" * 250_000}), "--job-id", "accents",
                  config=slow_config)
    assert res.rc == 2, res
    assert "payload of 1,500," in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert fingerprint(ledger_path) == before and link.connections == 0


def test_the_size_a_gemini_create_is_measured_at_is_what_the_remote_receives(
    sim: Simulator, slow_config: Path, ledger_path: Path, link: SlowLink, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    from ledger.remotes import request_body_size

    cfg = load_config(slow_config)
    link.rate = 50_000_000
    payloads = {
        "text": {"input": "é, ü and 😀 " * 500, "system_instruction": "naïve \"quoted\" \\ \n"},
        "blocks": {"input": [{"type": "text", "text": "ça va? " * 300}], "generation_config": {"temperature": 0.5}},
    }
    for job_id, payload in payloads.items():
        assert run_cli("submit", OP, "--payload", json.dumps(payload), "--job-id", job_id, config=slow_config).rc == 0
        job = _job(ledger_path, job_id)
        assert job.state == "submitted" and _creates(sim, job.idem_key) == [1], job
        size = request_body_size(cfg, OP, payload, idem_key=job.idem_key, attempt=1)
        _link_quiet(link, wait_for)
        # The body the link carried (after the request's headers) and its Content-Length, for the last connection.
        assert (link.body_sizes[-1], link.bodies_carried[-1]) == (size, size), (job_id, size)
    utf8 = len(json.dumps(payloads["text"], ensure_ascii=False).encode("utf-8"))
    assert request_body_size(cfg, OP, payloads["text"], idem_key="0" * 32, attempt=1) > 2 * utf8  # escaped




def test_a_worker_killed_while_its_body_crosses_sends_no_more_of_it(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path,
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    _reserve(ledger_path, slow_config, "killed", {"input": "x" * BIG})
    worker = start_cli("worker", "--interval", "0.2", config=slow_config)
    wait_for(lambda: link.carried and link.carried[0] > 64 * 1024, timeout=30, what="the body to be crossing")
    worker.kill()  # the kernel closes the socket: with SO_LINGER 0 that resets it, what was queued is dropped
    worker.wait(timeout=30)
    _link_quiet(link, wait_for)
    assert link.carried[0] < BIG, link.carried
    assert _creates(sim, _job(ledger_path, "killed").idem_key) == []


def test_a_worker_stopped_before_its_body_and_resumed_after_the_deadline_sends_no_more_of_it(
    sim: Simulator, link: SlowLink, slow_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    _reserve(ledger_path, slow_config, "stopped", {"input": "x" * BIG})
    worker = start_cli("tick", config=slow_config, env={"RECLAIM_PAUSE_AT": "after_window_check"})
    wait_for(lambda: process_state(worker.pid) == "T", timeout=30, what="the worker to stop right before its write")
    job = _job(ledger_path, "stopped")
    wait_for(lambda: time.time() > job.lease_until + MARGIN, timeout=30, what="the lease and margin to run out")
    assert run_cli("tick", config=slow_config).rc == 4  # recovery holds it: Gemini cannot be searched
    os.kill(worker.pid, signal.SIGCONT)  # its deadline passed while it was stopped: the write is cut at once
    worker.communicate(timeout=30)
    _link_quiet(link, wait_for)
    assert link.carried[0] < BIG, link.carried
    assert _creates(sim, job.idem_key) == []


@pytest.fixture
def wide_margin_config(link: SlowLink, make_config: Callable[..., dict[str, Any]],
                       write_config: Callable[..., Path]) -> Path:
    """The link's config with a 3 s send margin: room for a decision to be tried while attempt 1 could land."""
    return write_config(make_config(base_url=link.url, timeout_seconds=TIMEOUT,
                                    policy={**POLICY, "send_margin_seconds": 3, "lease_seconds": 8}))


@pytest.mark.parametrize("rate", [256 * 1024, 128 * 1024], ids=["256KBps", "128KBps"])
def test_a_release_waits_until_attempt_1_cannot_arrive_and_only_attempt_2_is_stored(
    rate: int, sim: Simulator, link: SlowLink, wide_margin_config: Path, ledger_path: Path,
    run_cli: Callable[..., Any], wait_for: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config = wide_margin_config
    link.rate = rate
    assert run_cli("submit", OP, "--payload", json.dumps({"input": "x" * BIG}), "--job-id", "big",
                   config=config).rc == 4
    assert run_cli("finding", "big", "--category", "not_received", "--note", "nothing in the console",
                   operator="alice", config=config).rc == 0
    job = _job(ledger_path, "big")
    conn = connect(ledger_path, readonly=True)
    try:
        until = triage.may_arrive_until(conn, job)
    finally:
        conn.close()
    assert until is not None and until == pytest.approx(job.held_at + 3)
    before = fingerprint(ledger_path)
    early = run_cli("release", "big", "--reason", "not received", operator="carol", config=config)
    assert early.rc == 12 and "attempt 1 could still arrive until" in early.stderr, early
    assert fingerprint(ledger_path) == before

    wait_for(lambda: time.time() >= until, timeout=30, what="the moment attempt 1 can no longer arrive")
    assert run_cli("release", "big", "--reason", "not received", operator="carol", config=config).rc == 0
    link.rate = 50_000_000  # the link recovers: attempt 2 crosses at once
    assert run_cli("tick", config=config).rc == 0
    _link_quiet(link, wait_for)
    assert _creates(sim, job.idem_key) == [2]


def test_a_reject_after_the_moment_leaves_nothing_to_arrive(
    sim: Simulator, link: SlowLink, wide_margin_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    config = wide_margin_config
    assert run_cli("submit", OP, "--payload", json.dumps({"input": "x" * BIG}), "--job-id", "big",
                   config=config).rc == 4
    early = run_cli("reject", "big", "--reason", "not wanted", operator="carol", config=config)
    assert early.rc == 12, early
    job = _job(ledger_path, "big")
    wait_for(lambda: time.time() >= job.held_at + 3, timeout=30, what="the moment attempt 1 can no longer arrive")
    assert run_cli("reject", "big", "--reason", "not wanted", operator="carol", config=config).rc == 0
    _link_quiet(link, wait_for)
    assert _creates(sim, job.idem_key) == [] and _job(ledger_path, "big").state == "rejected"


def test_a_submit_process_that_gave_up_and_exited_leaves_nothing_to_arrive_after_a_reject(
    sim: Simulator, link: SlowLink, wide_margin_config: Path, ledger_path: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], tmp_path: Path,
) -> None:
    config = wide_margin_config
    (tmp_path / "big.json").write_text(json.dumps({"input": "x" * BIG}), encoding="utf-8")
    sender = start_cli("submit", OP, "--payload", "@big.json", "--job-id", "big", config=config)
    assert sender.wait(timeout=60) == 4  # held: no answer within the deadline; the process has exited
    job = _job(ledger_path, "big")
    wait_for(lambda: time.time() >= job.held_at + 3, timeout=30, what="the moment attempt 1 can no longer arrive")
    assert run_cli("reject", "big", "--reason", "not wanted", operator="carol", config=config).rc == 0
    _link_quiet(link, wait_for)
    assert link.carried[0] < BIG, link.carried
    assert _creates(sim, job.idem_key) == []
