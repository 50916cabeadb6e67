"""The send window fences the side effect, not only the row.

A worker stopped (SIGSTOP) after it claimed a send and before its POST, and resumed after its lease
ran out, must not send: whatever happened meanwhile (recovery held the job, a person rejected or
released it, a second worker sent the new attempt). Counted at the simulator by the `idem` and
`attempt` labels the adapter puts on every create; the ledger is read back from a fresh connection.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from process_state import process_state

from ledger import replay
from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.send_window import SendWindow, SendWindowClosed
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

OP = "article.generate"
LEASE = 3.0
TIMEOUT = 1.0
MARGIN = 0.5




def _creates(sim: Simulator, idem: str) -> list[int]:
    """The `attempt` label of every create the simulator stored for `idem`, in arrival order."""
    return [int(i["labels"]["attempt"]) for i in sim.interactions() if i["labels"].get("idem") == idem]


@pytest.fixture
def window_config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path]) -> Path:
    doc = make_config(timeout_seconds=TIMEOUT, policy={
        "lease_seconds": LEASE, "send_margin_seconds": MARGIN, "stale_reserving_seconds": 0,
        "retry_backoff_seconds": 0,
    })
    return write_config(doc)


def _reserve(ledger: Path, config: Path, job_id: str) -> str:
    from ledger.config import load_config

    cfg = load_config(config)
    conn = connect(ledger)
    try:
        res = reserve(conn, cfg, OP, {"input": f"text for {job_id}"}, clock=SystemClock(), job_id=job_id)
        assert res.outcome == "reserved" and res.job is not None
        return res.job.idem_key
    finally:
        conn.close()


def _paused_tick(start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any]) -> subprocess.Popen[str]:
    """A `reclaim tick` stopped right after it claimed its send (before the request)."""
    proc = start_cli("tick", "--json", env={"RECLAIM_PAUSE_AT": "after_send_claim"})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what="the worker to stop after its claim")
    return proc


def _lease_gone(ledger: Path, job_id: str, wait_for: Callable[..., Any]) -> None:
    conn = connect(ledger, readonly=True)
    try:
        job = jobs_store.find_job(conn, JobKey(job_id, OP))
    finally:
        conn.close()
    assert job is not None and job.lease_until is not None
    wait_for(lambda: time.time() > job.lease_until + MARGIN, timeout=LEASE + MARGIN + 10,
             what="the stopped worker's lease and margin to run out")


def _resume(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any]]:
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, json.loads(out) if out.strip().startswith("{") else {"stderr": err}


def _fresh(ledger: Path) -> Any:
    return connect(ledger, readonly=True)


def test_a_stopped_sender_resumed_after_release_and_a_second_send_sends_nothing(
    sim: Simulator, ledger_path: Path, window_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    idem = _reserve(ledger_path, window_config, "w-release")
    stopped = _paused_tick(start_cli, wait_for)
    _lease_gone(ledger_path, "w-release", wait_for)

    # Recovery holds it (Gemini cannot be searched), a person releases it, a second worker sends attempt 2.
    assert run_cli("tick").rc == 4
    assert run_cli("finding", "w-release", "--category", "not_received", "--note", "nothing in the logs",
                   operator="alice").rc == 0
    assert run_cli("release", "w-release", "--reason", "not received", operator="bob").rc == 0
    assert run_cli("tick").rc == 0
    assert _creates(sim, idem) == [2]

    rc, report = _resume(stopped)
    assert rc == 0, report
    # The stopped worker's window was closed: no attempt-1 create after attempt 2 was authorised.
    assert _creates(sim, idem) == [2]
    assert sim.count("create", idem) == 1
    conn = _fresh(ledger_path)
    try:
        job = jobs_store.find_job(conn, JobKey("w-release", OP))
        assert job is not None and job.attempt == 2 and job.state in ("submitted", "done", "consumed")
        fenced = conn.execute("SELECT event FROM fenced_writes WHERE job_id = 'w-release'").fetchall()
        assert [r[0] for r in fenced] == ["send_abandoned"]
        assert replay.mismatches(conn) == []
    finally:
        conn.close()


def test_a_stopped_sender_resumed_after_a_reject_sends_nothing(
    sim: Simulator, ledger_path: Path, window_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    idem = _reserve(ledger_path, window_config, "w-reject")
    stopped = _paused_tick(start_cli, wait_for)
    _lease_gone(ledger_path, "w-reject", wait_for)
    assert run_cli("tick").rc == 4
    assert run_cli("reject", "w-reject", "--reason", "not needed", operator="bob").rc == 0

    rc, report = _resume(stopped)
    assert rc == 0, report
    assert sim.count("create", idem) == 0  # nothing arrives after a reject
    conn = _fresh(ledger_path)
    try:
        job = jobs_store.find_job(conn, JobKey("w-reject", OP))
        assert job is not None and job.state == "rejected"
    finally:
        conn.close()


def test_a_stopped_sender_nobody_took_over_gives_its_claim_up_and_the_job_is_sent_once(
    sim: Simulator, ledger_path: Path, window_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    idem = _reserve(ledger_path, window_config, "w-alone")
    stopped = _paused_tick(start_cli, wait_for)
    _lease_gone(ledger_path, "w-alone", wait_for)

    rc, report = _resume(stopped)
    assert rc == 0 and report["abandoned"] == 1 and report["sent"] == 0, report
    assert sim.count("create", idem) == 0
    conn = _fresh(ledger_path)
    try:
        job = jobs_store.find_job(conn, JobKey("w-alone", OP))
        assert job is not None and job.state == "reserving" and job.send_started_at is None
        kinds = [e.kind for e in events_store.job_events(conn, JobKey("w-alone", OP))]
        assert kinds[-1] == "send_abandoned"
    finally:
        conn.close()
    # Due again at once: the next pass sends it, once.
    assert run_cli("tick").rc == 0
    assert _creates(sim, idem) == [1]


def test_submit_whose_window_closed_says_reserved_not_sent_with_its_own_code(
    sim: Simulator, ledger_path: Path, window_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    proc = start_cli("submit", OP, "--payload", '{"input": "late"}', "--job-id", "w-submit",
                     env={"RECLAIM_PAUSE_AT": "after_send_claim"})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what="submit to stop after its claim")
    _lease_gone(ledger_path, "w-submit", wait_for)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 9, (out, err)
    assert "not sent by this command" in out and "reserving" in out
    assert sim.count("create") == 0


def test_config_refuses_a_lease_not_longer_than_timeout_plus_margin(
    make_config: Callable[..., dict[str, Any]], tmp_path: Path,
) -> None:
    from ledger.errors import ConfigError

    doc = make_config(timeout_seconds=30, policy={"lease_seconds": 31, "send_margin_seconds": 2})
    with pytest.raises(ConfigError) as e:
        parse_config(doc, base_dir=tmp_path)
    assert "policy.lease_seconds" in str(e.value) and "remotes.gemini.timeout_seconds" in str(e.value)


def test_one_window_lets_one_request_through_and_refuses_once_the_lease_is_short() -> None:
    now = [100.0]
    w = SendWindow(lease_seconds=10, deadline_seconds=3, margin_seconds=1, claimed_at=100.0, monotonic=lambda: now[0])
    now[0] = 105.9  # 4.1 s left > 3 + 1
    w.check()
    with pytest.raises(SendWindowClosed, match="second request"):
        w.check()
    late = SendWindow(lease_seconds=10, deadline_seconds=3, margin_seconds=1, claimed_at=100.0,
                      monotonic=lambda: now[0])
    now[0] = 106.0  # exactly 4 s left: not more than deadline + margin
    with pytest.raises(SendWindowClosed, match="lease left"):
        late.check()
    assert late.written is False
    closed = SendWindow(lease_seconds=10, deadline_seconds=3, margin_seconds=1, claimed_at=100.0,
                        monotonic=lambda: 100.0)
    assert closed.close() is False
    with pytest.raises(SendWindowClosed):
        closed.check()


def test_submit_whose_accepted_send_was_taken_over_exits_10_and_says_the_state_now(
    sim: Simulator, ledger_path: Path, window_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    proc = start_cli("submit", OP, "--payload", '{"input": "slow"}', "--job-id", "w-fenced",
                     env={"RECLAIM_PAUSE_AT": "after_remote_accept"})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what="submit to stop after the remote accepted")
    _lease_gone(ledger_path, "w-fenced", wait_for)
    assert run_cli("tick").rc == 4  # recovery: no handle recorded, Gemini cannot be searched -> held
    assert run_cli("reject", "w-fenced", "--reason", "duplicate of another article", operator="bob").rc == 0
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 10, (out, err)
    assert "taken over" in out and "now rejected" in out
    assert sim.count("create") == 1
    conn = _fresh(ledger_path)
    try:
        # The accepted handle is not lost: it is kept with the refused write.
        [(event, detail)] = conn.execute(
            "SELECT event, detail FROM fenced_writes WHERE job_id = 'w-fenced'").fetchall()
        assert event == "accepted" and json.loads(detail)["handle"]
    finally:
        conn.close()


def test_a_sender_stopped_while_the_reply_is_in_flight_keeps_the_handle_after_its_deadline(
    sim: Simulator, ledger_path: Path, window_config: Path, start_cli: Callable[..., subprocess.Popen[str]],
    wait_for: Callable[..., Any],
) -> None:
    # The sender stops itself right after the create was written; the remote accepts it and answers while
    # the sender is stopped; it resumes after its whole request deadline. The reply in its socket wins.
    proc = start_cli("submit", OP, "--payload", '{"input": "in flight"}', "--job-id", "w-inflight",
                     env={"RECLAIM_PAUSE_AT": "after_request_written"})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what="submit to stop after writing its create")
    stopped_at = time.monotonic()
    [accepted] = wait_for(lambda: sim.interactions(), timeout=30, what="the remote to accept the create")
    wait_for(lambda: time.monotonic() > stopped_at + TIMEOUT + MARGIN, timeout=TIMEOUT + MARGIN + 10,
             what="the stopped sender's request deadline to pass")
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (out, err)
    assert sim.count("create") == 1
    conn = _fresh(ledger_path)
    try:
        job = jobs_store.find_job(conn, JobKey("w-inflight", OP))
        assert job is not None and job.state == "submitted" and job.handle == accepted["id"], job
        assert sim.count("create", job.idem_key) == 1
        kinds = [e.kind for e in events_store.job_events(conn, JobKey("w-inflight", OP))]
        assert "send_unknown" not in kinds and kinds[-1] == "accepted", kinds
        assert replay.mismatches(conn) == []
    finally:
        conn.close()


def test_a_payload_whose_transfer_would_outlast_the_margin_is_refused_at_submit_and_never_sent(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str], tmp_path: Path,
) -> None:
    # margin 0.5 s at 10,000 bytes/s: at most 5,000 bytes of payload.
    policy = {"lease_seconds": LEASE, "send_margin_seconds": MARGIN, "min_send_rate": 10_000}
    strict = write_config(make_config(timeout_seconds=TIMEOUT, policy=policy))
    big = json.dumps({"input": "x" * 6_000})
    before = fingerprint(ledger_path)
    res = run_cli("submit", OP, "--payload", big, "--job-id", "w-big")
    assert res.rc == 2, res
    assert "min_send_rate" in res.stderr and "send_margin_seconds" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert fingerprint(ledger_path) == before and sim.count("create") == 0
    assert run_cli("submit", OP, "--payload", json.dumps({"input": "x" * 4_000}), "--job-id", "w-fits").rc == 0
    assert sim.count("create") == 1

    # Reserved under a looser config, then sent under a stricter one: nothing goes out, the job says why.
    loose = write_config(make_config(timeout_seconds=TIMEOUT, policy={**policy, "min_send_rate": 1_000_000}),
                         tmp_path / "loose.toml")
    _reserve(ledger_path, loose, "w-late")
    from ledger.config import load_config
    from ledger.worker import RemoteCache, send_one

    cfg = load_config(strict)
    conn = connect(ledger_path)
    try:
        import dataclasses

        tight = dataclasses.replace(cfg, policy=dataclasses.replace(cfg.policy, min_send_rate=10.0))
        outcome, applied = send_one(conn, tight, JobKey("w-late", OP), RemoteCache(tight).for_operation(OP),
                                    clock=SystemClock(), owner="test")
    finally:
        conn.close()
    assert outcome is not None and outcome.kind == "invalid" and "min_send_rate" in (outcome.error or "")
    assert applied is not None and applied.ok
    assert sim.count("create") == 1  # still only w-fits
    conn = _fresh(ledger_path)
    try:
        job = jobs_store.find_job(conn, JobKey("w-late", OP))
        assert job is not None and job.state == "failed" and "not sent" in (job.last_error or "")
    finally:
        conn.close()


def test_config_refuses_a_min_send_rate_that_is_not_a_positive_number(
    make_config: Callable[..., dict[str, Any]], tmp_path: Path,
) -> None:
    from ledger.errors import ConfigError

    for bad in (0, -5, float("inf")):
        with pytest.raises(ConfigError, match=r"policy\.min_send_rate"):
            parse_config(make_config(policy={"min_send_rate": bad}), base_dir=tmp_path)
    assert parse_config(make_config(), base_dir=tmp_path).policy.min_send_rate == 1_000_000.0


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_window_closed_before_its_connection_was_attached_resets_it_on_attach(tls: bool) -> None:
    import socket
    import ssl

    from ledger.remotes.abort import ConnectionAbort, set_create_options

    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        if tls:  # as http.client's HTTPS connection holds it (no handshake needed to act on the connection)
            client = ssl.create_default_context().wrap_socket(client, do_handshake_on_connect=False,
                                                              server_hostname="localhost")
        set_create_options(client)
        window = SendWindow(lease_seconds=60, deadline_seconds=1, margin_seconds=1)
        assert window.close() is False  # given up while still connecting
        abort = ConnectionAbort(client)
        window.attach(abort)  # the connection arrives after the give-up: shut at once
        assert abort.aborted
        with pytest.raises(OSError):
            client.sendall(b"x" * 1024)  # nothing more can be written
        with pytest.raises(SendWindowClosed):
            window.check()
        client.close()
        abort.close()  # the last close: a reset (SO_LINGER 0)
        server.settimeout(5)
        try:
            leftover = server.recv(1024)
        except ConnectionResetError:
            leftover = b""
        assert leftover == b""
        server.close()
    finally:
        listener.close()
