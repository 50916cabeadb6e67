"""Evidence from the webhook envelope Gemini documents, through the receiver's server and the worker.

Every delivery here is built and signed in the test in the documented shape (`type`, `version`,
`timestamp`, `data.id`; no `user_metadata`), POSTed over loopback to the receiver's HTTP server (the one
`reclaim receiver` serves, on a thread of the test; the last test runs `reclaim receiver` and `reclaim worker`
as processes), and acted on by the worker's pass; remote calls are counted at the simulator and the ledger is read back
from a fresh connection.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
from documented import example
from gemini_deliveries import delivery, envelope, post, signed

from ledger import make_webhook_server, triage
from ledger.clock import ManualClock, SystemClock
from ledger.config import Config, load_config
from ledger.db import connect, write_tx
from ledger.model import Job, JobKey
from ledger.remotes import remote_for
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, TickReport, tick

OP = "article.generate"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
OLD_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
ENV = {"RECLAIM_TEST_WHSEC": SECRET}


@dataclass
class Receiver:
    """A webhook receiver serving the ledger at `url`: the shipped `reclaim receiver` command (`proc`), or the
    same server (`make_webhook_server`) on a thread of the test (`server`) where the process is not the point."""

    url: str
    cfg: Config
    ledger: Path
    proc: subprocess.Popen[str] | None = None
    server: Any = None

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        return post(self.url, body, headers)[0]

    def stop(self) -> None:
        """Stop serving; returns once the receiver has written what it holds."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.communicate(timeout=20)
        elif self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server.conn.close()
            self.server = None

    def tick(self, clock: Any = None) -> TickReport:
        conn = connect(self.ledger)
        try:
            return tick(conn, self.cfg, clock=clock or SystemClock(), remotes=RemoteCache(self.cfg), owner="w")
        finally:
            conn.close()

    def job(self, job_id: str) -> tuple[Job, list[Any]]:
        conn = connect(self.ledger, readonly=True)
        try:
            key = JobKey(job_id, OP)
            job = jobs_store.find_job(conn, key)
            assert job is not None
            return job, events_store.job_events(conn, key)
        finally:
            conn.close()

    def rows(self) -> tuple[int, int, int]:
        """(jobs, events, evidence) rows, read fresh."""
        conn = connect(self.ledger, readonly=True)
        try:
            return tuple(int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])  # type: ignore[return-value]
                         for t in ("jobs", "events", "evidence"))
        finally:
            conn.close()


@pytest.fixture
def start_receiver(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    start_cli: Callable[..., subprocess.Popen[str]],
) -> Iterator[Callable[..., Receiver]]:
    """`start_receiver(sim, timeout=5.0, command=False, **server)`: a receiver for `sim`'s deliveries to the test's
    ledger, on a thread of the test (`server`: make_webhook_server's options), or as `reclaim receiver --port 0`
    with `command=True`. Stopped at teardown."""
    started: list[Receiver] = []

    def start(sim: Simulator, timeout: float = 5.0, command: bool = False, **server_options: Any) -> Receiver:
        doc = make_config(base_url=sim.url, timeout_seconds=timeout)
        doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
        cfg = load_config(write_config(doc))
        if command:
            proc = start_cli("receiver", "--port", "0", env=ENV)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if "receiver listening on" not in line:
                proc.kill()
                pytest.fail(f"the receiver did not start: {proc.communicate(timeout=10)[1]}")
            rx = Receiver(line.strip().rsplit(" ", 1)[-1], cfg, ledger_path, proc=proc)
        else:
            with mock.patch.dict(os.environ, ENV):
                server = make_webhook_server(ledger_path, cfg, clock=SystemClock(), **server_options)
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            rx = Receiver(f"http://127.0.0.1:{server.server_address[1]}/", cfg, ledger_path, server=server)
        started.append(rx)
        return rx

    yield start
    for rx in started:
        rx.stop()


@pytest.fixture
def rx(sim: Simulator, start_receiver: Callable[..., Receiver]) -> Receiver:
    return start_receiver(sim)


def _held_lost_reply(sim: Simulator, rx: Receiver, job_id: str) -> tuple[Job, str]:
    """A job whose create ran at the remote but whose reply was lost: held, no handle; and the interaction id."""
    conn = connect(rx.ledger)
    try:
        res = reserve(conn, rx.cfg, OP, {"input": job_id}, clock=SystemClock(), job_id=job_id)
        assert res.job is not None
        sim.add_fault("complete_lose_reply", match_idem=res.job.idem_key)
        tick(conn, rx.cfg, clock=SystemClock(), remotes=RemoteCache(rx.cfg), owner="w1")
        job = jobs_store.find_job(conn, res.key)
    finally:
        conn.close()
    assert job is not None and job.state == "held" and job.handle is None
    [stored] = sim.find_by_idem(job.idem_key)
    return job, str(stored["id"])


def test_a_documented_delivery_reconciles_a_held_job_with_one_post(sim: Simulator, rx: Receiver) -> None:
    job, interaction = _held_lost_reply(sim, rx, "heard")
    assert rx.post(*delivery(interaction, SECRET)) == 202
    first = rx.tick()
    assert first.evidence_attributed == 1 and first.reconciled_by_evidence == 1
    rx.tick()
    after, events = rx.job("heard")
    assert after.state == "consumed" and after.handle == interaction
    assert [e.actor for e in events if e.kind == "reconcile"] == ["reclaim"]
    assert "release" not in [e.kind for e in events]
    assert sim.count("create", job.idem_key) == 1
    # webhooks on, and the create carried only what v1 documents: labels, no webhook_config
    assert sim.create_field_count("labels") == 1 and sim.create_field_count("webhook_config") == 0


def test_a_failed_delivery_keeps_its_error_code_and_message(sim: Simulator, rx: Receiver) -> None:
    job, interaction = _held_lost_reply(sim, rx, "told-failed")
    body, headers = delivery(interaction, SECRET, "interaction.failed", error_code="RESOURCE_EXHAUSTED",
                             error_message="quota")
    assert rx.post(body, headers) == 202
    rx.tick()
    conn = connect(rx.ledger, readonly=True)
    try:
        [ev] = [e for e in evidence_store.for_job(conn, job) if e.source == "webhook"]
    finally:
        conn.close()
    assert ev.remote_state == "failed" and ev.handle == interaction
    assert (ev.detail["error_code"], ev.detail["error_message"]) == ("RESOURCE_EXHAUSTED", "quota")
    assert ev.detail["attributed_by"] == "labels"


@pytest.mark.parametrize("kind", example("webhook_events.json")["other_events"])  # the catalogue's other events
def test_a_verified_delivery_of_a_type_reclaim_ignores_is_acknowledged_and_changes_nothing(
    kind: str, sim: Simulator, rx: Receiver,
) -> None:
    _held_lost_reply(sim, rx, "quiet")
    before = rx.rows()
    status, answer = post(rx.url, *delivery("batches/123", SECRET, kind))
    assert status == 200 and kind in answer["message"]
    rx.tick()
    assert rx.rows() == before


def test_a_retry_and_an_exact_replay_are_acknowledged_once_recorded(sim: Simulator, rx: Receiver) -> None:
    job, interaction = _held_lost_reply(sim, rx, "retried")
    doc = envelope(interaction)
    body, headers = signed(doc, SECRET, msg_id="msg_retry")
    assert rx.post(body, headers) == 202
    before = rx.rows()
    assert rx.post(body, headers) == 200  # the same bytes again
    later = signed(doc, SECRET, msg_id="msg_retry", at=datetime.fromtimestamp(time.time() + 3, UTC))
    assert rx.post(*later) == 200  # Gemini's retry: same webhook-id, fresh timestamp and signature
    assert rx.rows() == before
    rx.tick()
    conn = connect(rx.ledger, readonly=True)
    try:
        webhook_evidence = [e for e in evidence_store.for_job(conn, job) if e.source == "webhook"]
    finally:
        conn.close()
    assert len(webhook_evidence) == 1


def test_capitalised_header_names_verify(sim: Simulator, rx: Receiver) -> None:
    _, interaction = _held_lost_reply(sim, rx, "capitals")
    body, headers = delivery(interaction, SECRET)
    assert rx.post(body, {k.title(): v for k, v in headers.items()}) == 202


def test_during_secret_rotation_one_verifying_signature_of_several_is_enough(sim: Simulator, rx: Receiver) -> None:
    _, interaction = _held_lost_reply(sim, rx, "rotated")
    assert rx.post(*delivery(interaction, [OLD_SECRET, SECRET])) == 202
    assert rx.post(*delivery(interaction, [OLD_SECRET])) == 401


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", "99999999999999999999"])
def test_a_garbage_content_length_is_a_4xx_and_the_receiver_keeps_serving(
    length: str, sim: Simulator, rx: Receiver, capfd: pytest.CaptureFixture[str],
) -> None:
    _, interaction = _held_lost_reply(sim, rx, "garbage")
    body, headers = delivery(interaction, SECRET)
    status = post(rx.url, body, {**headers, "Content-Length": length})[0]
    assert 400 <= status < 500
    assert rx.post(body, headers) == 202  # the next delivery is served
    rx.stop()
    assert "Traceback" not in capfd.readouterr().err


def test_a_chunked_delivery_is_read_whole(sim: Simulator, rx: Receiver) -> None:
    _, interaction = _held_lost_reply(sim, rx, "chunked")
    body, headers = delivery(interaction, SECRET)
    parts = urlsplit(rx.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("POST", "/", body=iter([body[:10], body[10:]]), headers=headers, encode_chunked=True)
        assert conn.getresponse().status == 202
    finally:
        conn.close()
    assert rx.tick().reconciled_by_evidence == 1


class Drip:
    """A client that sends `head`, then one more byte every `every` seconds until the receiver ends the
    connection (or `give_up` seconds pass): `ended` is set then, with `answer` what the receiver sent back."""

    def __init__(self, url: str, head: bytes, every: float = 0.5, give_up: float = 60.0) -> None:
        parts = urlsplit(url)
        self.started = time.monotonic()
        self.sock = socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10)
        self.sock.sendall(head)
        self.every, self.give_up = every, give_up
        self.dripped = 0
        self.answer: bytes | None = None
        self.ended_at = 0.0
        self.ended = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        self.sock.settimeout(self.every)
        try:
            while time.monotonic() < self.started + self.give_up:
                try:
                    self.answer = self.sock.recv(4096)  # b"": closed unanswered
                    break
                except TimeoutError:
                    self.sock.sendall(b"a")
                    self.dripped += 1
        except OSError:
            self.answer = b""  # reset while sending
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()
            self.sock.close()


DRIP_HEADS = {
    "headers": b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: ",
    "body": b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{",
}


@pytest.mark.parametrize("phase", sorted(DRIP_HEADS))
def test_a_drip_fed_request_is_cut_off_at_its_deadline_and_a_delivery_meanwhile_is_answered(
    phase: str, sim: Simulator, start_receiver: Callable[..., Receiver], wait_for: Callable[..., Any],
) -> None:
    """Two clients dripping a byte every 0.5 s hold both slots; a signed delivery takes the slot of the one
    arriving longest and gets its 202 while the other still drips; that other is closed unanswered at its
    request's deadline, though no single read waited more than 0.5 s."""
    deadline = 3.0
    rx = start_receiver(sim, request_seconds=deadline, max_connections=2)
    _, interaction = _held_lost_reply(sim, rx, f"dripped-{phase}")
    first = Drip(rx.url, DRIP_HEADS[phase])
    wait_for(lambda: len(rx.server.arrivals) == 1, timeout=10, what="the first drip to be served")
    second = Drip(rx.url, DRIP_HEADS[phase])
    wait_for(lambda: len(rx.server.arrivals) == 2, timeout=10, what="both slots to be held by drips")

    assert rx.post(*delivery(interaction, SECRET)) == 202
    assert first.ended.wait(10) and first.answer == b""  # its slot went to the delivery
    assert not second.ended.is_set()  # still dripping, inside its deadline
    assert second.ended.wait(deadline + 15), "the second drip was never cut off"
    assert second.answer == b""
    assert second.ended_at - second.started >= deadline
    assert second.dripped >= 2  # it kept sending: each read was answered within 0.5 s

    assert rx.tick().reconciled_by_evidence == 1
    rx.stop()  # writes the counted refusals
    conn = connect(rx.ledger, readonly=True)
    try:
        assert evidence_store.refusal_counts(conn) == {"too_slow": 2}
    finally:
        conn.close()


def test_a_second_interaction_for_a_jobs_idem_key_is_cancelled_once_and_never_delivered(
    ledger_path: Path, start_receiver: Callable[..., Receiver], wait_for: Callable[..., Any],
) -> None:
    with Simulator(complete_after=3600) as slow:
        rx = start_receiver(slow)
        conn = connect(ledger_path)
        try:
            reserve(conn, rx.cfg, OP, {"input": "dup"}, clock=SystemClock(), job_id="dup")
        finally:
            conn.close()
        rx.tick()
        job, _ = rx.job("dup")
        assert job.state == "submitted" and job.handle
        # A stale sender slipped through the send window: a second create for the same idem key and attempt.
        stray = remote_for(rx.cfg, OP).send({"input": "dup"}, job.idem_key, 1)
        assert stray.kind == "accepted" and stray.handle and stray.handle != job.handle
        assert rx.post(*delivery(stray.handle, SECRET, "interaction.requires_action")) == 202
        report = rx.tick()
        assert report.duplicates == 1 and report.duplicates_cancelled == 1
        assert slow.count("cancel") == 1
        wait_for(lambda: slow.interaction(stray.handle or "")["status"] == "cancelled", timeout=20,
                 what="the stray interaction to be cancelled")
        # The remote then says the stray interaction was cancelled: the same duplicate, nothing new recorded.
        assert rx.post(*delivery(stray.handle, SECRET, "interaction.cancelled")) == 202
        report = rx.tick()
        assert report.duplicates == 0 and report.duplicates_cancelled == 0
        after, events = rx.job("dup")
        [dup] = [e for e in events if e.kind == "duplicate_send"]
        assert dup.detail["handle"] == stray.handle and dup.detail["ownership"] == "verified"
        assert after.handle == job.handle  # the job's own interaction stays its result
        assert slow.count("create", job.idem_key) == 2 and slow.count("cancel") == 1
        conn = connect(ledger_path, readonly=True)
        try:
            assert events_store.duplicate_count(conn) == 1
        finally:
            conn.close()


def test_an_interaction_that_reached_the_remote_after_a_reject_is_flagged_a_duplicate_and_cancelled(
    ledger_path: Path, start_receiver: Callable[..., Receiver],
) -> None:
    with Simulator(complete_after=3600) as slow:
        rx = start_receiver(slow, timeout=1.0)
        conn = connect(ledger_path)
        try:
            res = reserve(conn, rx.cfg, OP, {"input": "late"}, clock=SystemClock(), job_id="late")
            assert res.job is not None
            slow.add_fault("accept_then_hang", match_idem=res.job.idem_key)
            tick(conn, rx.cfg, clock=SystemClock(), remotes=RemoteCache(rx.cfg), owner="w1")
            held = jobs_store.find_job(conn, res.key)
            assert held is not None and held.state == "held"
            until = triage.may_arrive_until(conn, held)  # held without an answer: the reject waits for this moment
            assert until is not None
            triage.reject(conn, rx.cfg, res.key, actor="bob", clock=ManualClock(until), reason="not needed any more")
        finally:
            conn.close()
        [stored] = slow.find_by_idem(held.idem_key)
        assert rx.post(*delivery(str(stored["id"]), SECRET, "interaction.requires_action")) == 202
        report = rx.tick()
        assert report.duplicates == 1 and slow.count("cancel") == 1
        after, events = rx.job("late")
        assert after.state == "rejected"
        [dup] = [e for e in events if e.kind == "duplicate_send"]
        assert dup.detail["job_state"] == "rejected"


def test_a_handle_that_is_another_jobs_is_never_cancelled_as_a_duplicate(
    ledger_path: Path, start_receiver: Callable[..., Receiver],
) -> None:
    with Simulator(complete_after=3600) as slow:
        rx = start_receiver(slow)
        conn = connect(ledger_path)
        try:
            for job_id in ("a", "b"):
                reserve(conn, rx.cfg, OP, {"input": job_id}, clock=SystemClock(), job_id=job_id)
        finally:
            conn.close()
        rx.tick()
        a, _ = rx.job("a")
        b, _ = rx.job("b")
        # Forge the evidence a mispaired delivery would leave: job a's idem key with job b's handle.
        conn = connect(ledger_path)
        try:
            with write_tx(conn):
                evidence_store.record(conn, at=time.time(), source="webhook", idem_key=a.idem_key, attempt=1,
                                handle=b.handle, remote_state="running", job=a.key, ref="msg_forged")
        finally:
            conn.close()
        report = rx.tick()
        assert report.duplicates == 0 and slow.count("cancel") == 0
        assert slow.interaction(b.handle or "")["status"] != "cancelled"


def test_labels_not_echoed_leave_orphan_evidence_that_decides_nothing_and_reconciles_a_held_job_in_one_step(
    sim: Simulator, rx: Receiver, run_cli: Callable[..., Any],
) -> None:
    sim.configure(echo_labels=False)  # labels are a documented field no documented reply shows
    job, interaction = _held_lost_reply(sim, rx, "anonymous")
    assert rx.post(*delivery(interaction, SECRET)) == 202
    report = rx.tick()
    assert report.evidence_attributed == 0 and report.reconciled_by_evidence == 0 and report.duplicates == 0
    held, events = rx.job("anonymous")
    assert held.state == "held" and held.handle is None  # a safe orphan: no wrong decision
    assert not {"reconcile", "release", "duplicate_send"} & {e.kind for e in events}
    assert sim.count("cancel") == 0
    out = run_cli("evidence", "--orphans", "--json", env=ENV)
    assert out.rc == 0, out.stderr
    [orphan] = json.loads(out.stdout)["evidence"]
    assert orphan["handle"] == interaction and "labels were not echoed" in orphan["outcome"]
    # Verified as today: the record cannot prove it is this job's, so the verified path refuses, and says so.
    refused = run_cli("reconcile", "anonymous", "--handle", f"evidence:{orphan['id']}", "--reason", "seen",
                      operator="bob", env=ENV)
    assert refused.rc != 0 and "--unverified" in refused.stderr
    done = run_cli("reconcile", "anonymous", "--handle", f"evidence:{orphan['id']}", "--unverified",
                   "--reason", "the remote's console shows it ran at 03:12", operator="bob", env=ENV)
    assert done.rc == 0, done.stderr
    after, events = rx.job("anonymous")
    assert after.state == "submitted" and after.handle == interaction
    [rec] = [e for e in events if e.kind == "reconcile"]
    assert rec.detail["evidence_id"] == orphan["id"] and rec.detail["verified"] is False
    assert sim.count("create", job.idem_key) == 1


@pytest.mark.both_backends
def test_a_delivery_wakes_a_waiting_worker_long_before_its_poll_interval(
    sim: Simulator, start_receiver: Callable[..., Receiver], start_cli: Callable[..., subprocess.Popen[str]],
    wait_for: Callable[..., Any],
) -> None:
    """Through the shipped commands: `reclaim receiver` wakes `reclaim worker`."""
    from ledger.heartbeat import read_board

    rx = start_receiver(sim, command=True)
    job, interaction = _held_lost_reply(sim, rx, "woken")
    conn = connect(rx.ledger)
    try:  # a job for the first pass to send, so that pass is recorded in the heartbeat when it ends
        reserve(conn, rx.cfg, OP, {"input": "first"}, clock=SystemClock(), job_id="first")
    finally:
        conn.close()
    worker = start_cli("worker", "--interval", "600", env=ENV)  # without the wake-up: ten minutes

    def passes() -> int:
        conn = connect(rx.ledger, readonly=True)
        try:
            return sum(h.passes for h in read_board(conn).running if h.kind == "worker")
        finally:
            conn.close()

    wait_for(lambda: passes() >= 1, timeout=60, what="the worker's first pass")
    assert rx.post(*delivery(interaction, SECRET)) == 202
    wait_for(lambda: rx.job("woken")[0].state in ("submitted", "done", "consumed"), timeout=60,
             what="the worker, woken by the delivery, to reconcile the held job")
    wait_for(lambda: passes() >= 2, timeout=60, what="the woken pass to be recorded")
    assert worker.poll() is None
    assert sim.count("create", job.idem_key) == 1
