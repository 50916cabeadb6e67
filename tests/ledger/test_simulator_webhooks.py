"""The simulator's evidence channels: signed webhook deliveries (Standard Webhooks) and the remote console.

Everything is real HTTP on loopback with ports the OS picks: the simulator, the google-genai SDK where a
create goes through it, and a tiny receiver that records every delivery and verifies it with
``standardwebhooks``. Nothing sleeps for a fixed time: tests wait on conditions with a bounded timeout.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google import genai
from google.genai import types
from standardwebhooks.webhooks import Webhook

from ledger.simulator import (
    STORE_FALSE_WITH_BACKGROUND,
    WEBHOOK_CONFIG_NEEDS_BACKGROUND,
    WEBHOOK_FAULT_KINDS,
    Simulator,
)

MODEL = "gemini-sim"
KEY = "simulator"
FAST_RETRIES = (0.05, 0.05, 0.05, 0.05)


# -- helpers --------------------------------------------------------------------
def wait_for(pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.01) -> Any:
    """Poll ``pred`` until truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(step)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


@dataclass
class Delivery:
    """One POST as the receiver got it."""

    at: float  # time.monotonic() on arrival
    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int

    @property
    def doc(self) -> Any:
        return json.loads(self.body)

    @property
    def msg_id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    """A webhook endpoint on 127.0.0.1:<free port>: records and verifies every POST.

    It answers a queued status if there is one (``fail_next``), else 401 for a delivery that does not
    verify, else 200.
    """

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.lock = threading.Lock()
        self.got: list[Delivery] = []
        self.queued: list[int] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    Webhook(receiver.secret).verify(body, headers)
                    verified = True
                except Exception:
                    verified = False
                with receiver.lock:
                    code = receiver.queued.pop(0) if receiver.queued else (200 if verified else 401)
                    receiver.got.append(Delivery(time.monotonic(), headers, body, verified, code))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/gemini"

    def fail_next(self, *codes: int) -> None:
        with self.lock:
            self.queued.extend(codes)

    def deliveries(self) -> list[Delivery]:
        with self.lock:
            return list(self.got)

    def for_interaction(self, iid: str) -> list[Delivery]:
        return [d for d in self.deliveries() if d.doc["data"]["id"] == iid]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def receiver(secret: str) -> Iterator[Receiver]:
    r = Receiver(secret)
    yield r
    r.close()


@pytest.fixture
def sim(receiver: Receiver, secret: str) -> Iterator[Simulator]:
    s = Simulator(webhook_url=receiver.url, webhook_secret=secret)
    s.webhook_retry_delays = FAST_RETRIES
    with s.start():
        yield s


def make_client(sim: Simulator) -> genai.Client:
    """A real SDK client pointed at the simulator, with SDK retries off (as reclaim creates)."""
    return genai.Client(
        api_key=KEY,
        http_options=types.HttpOptions(
            base_url=sim.url, retry_options=types.HttpRetryOptions(attempts=1), timeout=5000
        ),
    )


def meta(idem: str, attempt: int = 1) -> dict[str, str]:
    return {"idem": idem, "attempt": str(attempt)}


def create_body(idem: str, attempt: int = 1, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": f"job {idem}", "background": True, "labels": meta(idem, attempt),
            "webhook_config": {"user_metadata": meta(idem, attempt)}, **extra}


def post_json(url: str, body: Any, *, key: str | None = KEY, timeout: float = 5.0) -> tuple[int, Any]:
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["x-goog-api-key"] = key
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def create(sim: Simulator, idem: str, attempt: int = 1) -> str:
    code, body = post_json(f"{sim.url}/v1beta/interactions", create_body(idem, attempt))
    assert code == 200, body
    return str(body["id"])


def settled_log(sim: Simulator) -> list[dict[str, Any]]:
    """The delivery log once every event so far is delivered, dropped or given up (and logged)."""
    wait_for(lambda: sim.pending_webhooks() == 0)
    return sim.webhook_deliveries()


def ids_of(sim: Simulator, idem: str) -> list[str]:
    return [i["id"] for i in sim.find_by_idem(idem)]


# -- deliveries ------------------------------------------------------------------
def test_sdk_create_gets_one_verified_completed_delivery_in_the_documented_envelope_when_it_completes(
    receiver: Receiver, sim: Simulator, secret: str
) -> None:
    sim.configure(complete_after=0.3)  # a background interaction the delivery thread must notice completing
    client = make_client(sim)
    t0 = time.monotonic()
    created = client.interactions.create(model=MODEL, input="hello", background=True, labels=meta("job-1"))
    assert created.status == "in_progress"
    [d] = wait_for(lambda: receiver.for_interaction(created.id))
    assert d.verified and d.answered == 200
    assert d.at - t0 >= 0.25  # not before the interaction completed
    assert d.msg_id.startswith("msg_") and len(d.msg_id) == 36
    assert abs(int(d.headers["webhook-timestamp"]) - time.time()) < 60
    assert d.headers["webhook-signature"].startswith("v1,")
    assert d.headers["content-type"] == "application/json"
    doc = Webhook(secret).verify(d.body, d.headers)
    assert doc["type"] == "interaction.completed" and doc["version"] == "v1"
    assert doc["timestamp"].endswith("Z") and doc["timestamp"][:4].isdigit()
    assert set(doc) == {"type", "version", "timestamp", "data"}
    assert doc["data"] == {"id": created.id}  # the thin payload: no status, no user_metadata
    assert client.interactions.get(id=created.id).status == "completed"
    [logged] = settled_log(sim)
    assert logged["msg_id"] == d.msg_id and logged["interaction_id"] == created.id
    assert (logged["type"], logged["attempt"], logged["status"], logged["ok"], logged["error"]) == (
        "interaction.completed", 1, 200, True, None)
    assert logged["sent"].endswith("Z") and logged["idem"] == "job-1"
    assert sim.create_field_count("webhook_config") == 0  # the project webhook: nothing in the create asked for it
    assert sim.pending_webhooks() == 0
    # Exactly one event per status reached: nothing more arrives when nothing changes.
    client.interactions.get(id=created.id)
    assert len(receiver.deliveries()) == 1


def test_a_create_without_webhook_config_is_delivered_all_the_same(receiver: Receiver, sim: Simulator) -> None:
    code, body = post_json(f"{sim.url}/v1beta/interactions", {"model": MODEL, "input": "x", "labels": {"idem": "n"}})
    assert code == 200
    [d] = wait_for(lambda: receiver.for_interaction(body["id"]))
    assert d.verified and d.doc["data"] == {"id": body["id"]}


def test_webhook_config_without_background_is_refused_as_the_api_does(sim: Simulator) -> None:
    for extra in ({"background": False}, {}):
        body = create_body("fg", **extra)
        if not extra:
            del body["background"]
        code, reply = post_json(f"{sim.url}/v1beta/interactions", body)
        assert code == 400 and reply == {"error": {"code": "invalid_request", "message": WEBHOOK_CONFIG_NEEDS_BACKGROUND}}
    code, reply = post_json(f"{sim.url}/v1beta/interactions", create_body("ns", store=False))
    assert code == 400 and reply == {"error": {"code": "invalid_request", "message": STORE_FALSE_WITH_BACKGROUND}}
    assert sim.interactions() == [] and receiver_free(sim)


def receiver_free(sim: Simulator) -> bool:
    """Nothing queued or logged for delivery."""
    return sim.pending_webhooks() == 0 and sim.webhook_deliveries() == []


def test_a_malformed_webhook_config_is_refused_and_creates_nothing(sim: Simulator) -> None:
    code, body = post_json(f"{sim.url}/v1beta/interactions", create_body("m", webhook_config={"user_metadata": [1]}))
    assert code == 400 and "user_metadata" in body["error"]["message"]
    assert sim.interactions() == []


def test_complete_lose_reply_is_still_delivered(receiver: Receiver, sim: Simulator) -> None:
    sim.add_fault("complete_lose_reply", match_idem="lost")
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    try:
        conn.request("POST", "/v1beta/interactions", body=json.dumps(create_body("lost")),
                     headers={"Content-Type": "application/json", "x-goog-api-key": KEY})
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.getresponse()
    finally:
        conn.close()
    [iid] = ids_of(sim, "lost")
    [d] = wait_for(lambda: receiver.for_interaction(iid))
    assert d.verified
    assert d.doc["type"] == "interaction.completed"
    assert d.doc["data"] == {"id": iid}


def test_a_hung_create_is_delivered_while_the_caller_still_waits(receiver: Receiver, sim: Simulator) -> None:
    sim.add_fault("accept_then_hang", match_idem="hung")
    outcome: list[Exception | None] = []

    def call() -> None:
        try:
            post_json(f"{sim.url}/v1beta/interactions", create_body("hung"), timeout=30)
            outcome.append(None)
        except Exception as exc:  # recorded for the assertion below
            outcome.append(exc)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    [iid] = wait_for(lambda: ids_of(sim, "hung"))
    [d] = wait_for(lambda: receiver.for_interaction(iid))
    assert d.verified and d.doc["type"] == "interaction.completed"
    assert caller.is_alive() and not outcome  # the create has not been answered
    sim.stop()  # releases the hung request
    caller.join(timeout=5)
    assert outcome and outcome[0] is not None


def test_cancel_force_status_and_end_status_send_their_events(receiver: Receiver, sim: Simulator) -> None:
    sim.configure(complete_after=60)
    running = create(sim, "c1")
    code, body = post_json(f"{sim.url}/v1beta/interactions/{running}:cancel", {})
    assert code == 200 and body["status"] == "cancelled"
    waiting = create(sim, "c2")
    sim.force_status(waiting, "requires_action")
    sim.configure(complete_after=0)
    sim.add_fault("end_status", end_status="failed", match_idem="c3")
    failed = create(sim, "c3")
    sim.add_fault("end_status", end_status="incomplete", match_idem="c4")
    incomplete = create(sim, "c4")  # not a webhook status: no event
    wait_for(lambda: len(receiver.deliveries()) >= 3)
    sim.force_status(waiting, "completed")  # a later webhook status: a second event for the same interaction
    wait_for(lambda: len(receiver.deliveries()) >= 4)
    seen = [(d.doc["data"]["id"], d.doc["type"], tuple(sorted(d.doc["data"]))) for d in receiver.deliveries()]
    assert sorted(seen) == sorted([
        (running, "interaction.cancelled", ("id",)),
        (waiting, "interaction.requires_action", ("id",)),
        (failed, "interaction.failed", ("error_code", "error_message", "id")),
        (waiting, "interaction.completed", ("id",)),
    ])
    [fail] = [d.doc["data"] for d in receiver.deliveries() if d.doc["type"] == "interaction.failed"]
    assert isinstance(fail["error_code"], str) and fail["error_code"] and isinstance(fail["error_message"], str)
    assert all(d.verified for d in receiver.deliveries())
    assert not receiver.for_interaction(incomplete)


def test_without_a_secret_nothing_is_sent_and_the_thread_stops_with_the_simulator(receiver: Receiver) -> None:
    with Simulator(webhook_url=receiver.url).start() as s:
        assert not s.webhooks_enabled
        iid = create(s, "quiet")
        wait_for(lambda: (s.interaction(iid) or {}).get("status") == "completed")
        names = [t.name for t in threading.enumerate()]
        assert f"reclaim-simulator-webhooks:{s.port}" in names
        port = s.port
    assert f"reclaim-simulator-webhooks:{port}" not in [t.name for t in threading.enumerate()]
    assert s.webhook_deliveries() == [] and receiver.deliveries() == []


# -- retries -------------------------------------------------------------------------
def test_a_receiver_answering_500_is_retried_with_the_same_msg_id_until_it_takes_it(
    receiver: Receiver, sim: Simulator
) -> None:
    receiver.fail_next(500, 503)
    iid = create(sim, "flaky")
    got = wait_for(lambda: [d for d in receiver.for_interaction(iid) if d.answered == 200])
    all_posts = receiver.for_interaction(iid)
    assert [d.answered for d in all_posts] == [500, 503, 200]
    assert len({d.msg_id for d in all_posts}) == 1 and all(d.verified for d in all_posts)
    assert got[0].doc["data"]["id"] == iid
    log = settled_log(sim)
    assert [(e["attempt"], e["status"], e["ok"]) for e in log] == [(1, 500, False), (2, 503, False), (3, 200, True)]
    assert log[0]["error"] == "HTTP 500"


def test_a_receiver_that_is_down_is_retried_and_gets_the_delivery_once_it_is_up(
    receiver: Receiver, secret: str
) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/hooks"
    with Simulator(webhook_url=dead, webhook_secret=secret).start() as s:
        s.webhook_retry_delays = (0.5, 0.5, 0.5, 0.5)
        iid = create(s, "down")
        wait_for(lambda: s.webhook_deliveries())
        first = s.webhook_deliveries()[0]
        assert first["attempt"] == 1 and first["status"] is None and not first["ok"]
        assert "Connection" in first["error"] or "refused" in first["error"].lower()
        s.configure(webhook_url=receiver.url)  # the receiver comes up: the next retry reaches it
        [d] = wait_for(lambda: receiver.for_interaction(iid))
        assert d.verified and d.msg_id == first["msg_id"]
        last = settled_log(s)[-1]
        assert last["ok"] and last["attempt"] >= 2


def test_a_receiver_that_never_takes_it_is_given_up_after_the_retries(receiver: Receiver, sim: Simulator) -> None:
    receiver.fail_next(*[500] * (1 + len(FAST_RETRIES)))
    iid = create(sim, "hopeless")
    wait_for(lambda: len(receiver.for_interaction(iid)) == 1 + len(FAST_RETRIES))
    log = settled_log(sim)
    assert [e["attempt"] for e in log] == [1, 2, 3, 4, 5]
    assert not any(e["ok"] for e in log)


# -- webhook faults ------------------------------------------------------------------
def test_webhook_fault_kinds_are_the_documented_ones() -> None:
    assert WEBHOOK_FAULT_KINDS == ("drop", "delay", "duplicate", "bad_signature", "out_of_order")
    s = Simulator()
    with pytest.raises(ValueError, match="unknown webhook fault kind"):
        s.add_webhook_fault("explode")
    with pytest.raises(ValueError, match="seconds > 0"):
        s.add_webhook_fault("delay")
    with pytest.raises(ValueError, match="positive"):
        s.add_webhook_fault("drop", count=0)


def test_drop_never_delivers_that_event(receiver: Receiver, sim: Simulator) -> None:
    sim.add_webhook_fault("drop", match_idem="gone")
    gone = create(sim, "gone")
    kept = create(sim, "kept")
    wait_for(lambda: receiver.for_interaction(kept))  # one thread sends in order: `gone` came first
    assert receiver.for_interaction(gone) == []
    dropped = [e for e in sim.webhook_deliveries() if e["interaction_id"] == gone]
    assert [(e["fault"], e["attempt"], e["sent"], e["ok"]) for e in dropped] == [("drop", 0, None, False)]
    assert sim.webhook_faults() == []


def test_delay_delivers_after_the_given_seconds(receiver: Receiver, sim: Simulator) -> None:
    sim.add_webhook_fault("delay", seconds=0.5)
    t0 = time.monotonic()
    iid = create(sim, "late")
    [d] = wait_for(lambda: receiver.for_interaction(iid))
    assert d.verified and d.at - t0 >= 0.45
    [entry] = settled_log(sim)
    assert entry["fault"] == "delay" and entry["ok"]


def test_duplicate_delivers_the_same_msg_id_twice(receiver: Receiver, sim: Simulator) -> None:
    sim.add_webhook_fault("duplicate", match_idem="twice")
    iid = create(sim, "twice")
    both = wait_for(lambda: len(receiver.for_interaction(iid)) == 2 and receiver.for_interaction(iid))
    assert both[0].msg_id == both[1].msg_id
    assert all(d.verified for d in both)
    assert json.loads(both[0].body) == json.loads(both[1].body)
    log = settled_log(sim)
    assert [(e["attempt"], e["fault"], e["ok"]) for e in log] == [(1, None, True), (2, "duplicate", True)]


def test_bad_signature_is_refused_by_a_verifying_receiver_then_retried_signed_right(
    receiver: Receiver, sim: Simulator
) -> None:
    sim.add_webhook_fault("bad_signature")
    iid = create(sim, "forged")
    posts = wait_for(lambda: len(receiver.for_interaction(iid)) == 2 and receiver.for_interaction(iid))
    assert [(d.verified, d.answered) for d in posts] == [(False, 401), (True, 200)]
    assert posts[0].msg_id == posts[1].msg_id
    log = settled_log(sim)
    assert [(e["attempt"], e["fault"], e["status"]) for e in log] == [(1, "bad_signature", 401), (2, None, 200)]


def test_out_of_order_holds_a_delivery_back_until_the_next_one_was_sent(receiver: Receiver, sim: Simulator) -> None:
    sim.add_webhook_fault("out_of_order", match_idem="first")
    first = create(sim, "first")
    wait_for(lambda: sim.pending_webhooks() == 1)
    second = create(sim, "second")
    wait_for(lambda: len(receiver.deliveries()) == 2)
    assert [d.doc["data"]["id"] for d in receiver.deliveries()] == [second, first]
    assert all(d.verified for d in receiver.deliveries())
    assert [e["fault"] for e in settled_log(sim)] == [None, "out_of_order"]


def test_out_of_order_with_seconds_is_held_at_most_that_long(receiver: Receiver, sim: Simulator) -> None:
    sim.add_webhook_fault("out_of_order", seconds=0.3)
    t0 = time.monotonic()
    iid = create(sim, "alone")
    [d] = wait_for(lambda: receiver.for_interaction(iid))
    assert d.verified and d.at - t0 >= 0.25


# -- control endpoints ------------------------------------------------------------------
def test_webhooks_are_configured_and_inspected_over_the_control_endpoints(receiver: Receiver, secret: str) -> None:
    with Simulator().start() as s:
        code, cfg = post_json(f"{s.url}/_sim/config", {"webhook_url": receiver.url, "webhook_secret": secret}, key=None)
        assert code == 200 and cfg["webhook_url"] == receiver.url and cfg["webhook_secret_set"] is True
        assert secret not in json.dumps(cfg)
        assert post_json(f"{s.url}/_sim/config", {"webhook_secret": "not-a-secret"}, key=None)[0] == 400
        assert post_json(f"{s.url}/_sim/config", {"webhook_url": "http://example.com/h"}, key=None)[0] == 400
        code, body = post_json(f"{s.url}/_sim/webhooks", {"kind": "duplicate", "match_idem": "w"}, key=None)
        assert code == 200 and body["faults"][0]["kind"] == "duplicate"
        assert post_json(f"{s.url}/_sim/webhooks", {"kind": "nope"}, key=None)[0] == 400
        iid = create(s, "w")
        wait_for(lambda: len(receiver.for_interaction(iid)) == 2)
        settled_log(s)
        code, _, raw = get(f"{s.url}/_sim/webhooks")
        view = json.loads(raw)
        assert code == 200 and view["pending"] == 0 and view["faults"] == []
        assert [e["interaction_id"] for e in view["deliveries"]] == [iid, iid]
        assert s.calls()["total"] == 1  # control requests are not API calls
        code, cfg = post_json(f"{s.url}/_sim/config", {"webhook_secret": ""}, key=None)
        assert cfg["webhook_secret_set"] is False and not s.webhooks_enabled


# -- the remote console -------------------------------------------------------------------
def test_the_console_lists_by_label_without_a_key_and_is_not_counted(sim: Simulator) -> None:
    a1 = create(sim, "k-a", 1)
    a2 = create(sim, "k-a", 2)
    create(sim, "k-b", 1)
    before = sim.calls()
    url = sim.console_url("k-a")
    assert url.startswith(f"{sim.url}/console/interactions?label=idem")
    code, ctype, raw = get(url)  # no API key
    assert code == 200 and ctype.startswith("application/json")
    rows = json.loads(raw)["interactions"]
    assert [r["id"] for r in rows] == [a1, a2]
    assert set(rows[0]) == {"id", "status", "created", "labels", "model"}
    assert rows[1]["labels"] == {"idem": "k-a", "attempt": "2"} and rows[1]["model"] == MODEL
    code, _, raw = get(f"{url}&label=attempt%3D2")
    assert [r["id"] for r in json.loads(raw)["interactions"]] == [a2]
    code, _, raw = get(f"{sim.url}/console/interactions?label=idem=nobody")
    assert json.loads(raw) == {"interactions": []}
    assert get(f"{sim.url}/console/interactions?label=justaname")[0] == 400
    assert sim.calls() == before


def test_the_console_answers_an_escaped_html_table_to_a_browser(sim: Simulator) -> None:
    code, body = post_json(f"{sim.url}/v1beta/interactions",
                           {"model": MODEL, "input": "x", "labels": {"idem": "<b>&\"x'", "note": "<script>"}})
    assert code == 200
    url = sim.console_url("<b>&\"x'")
    for page in (get(url, {"Accept": "text/html,application/xhtml+xml"}), get(f"{url}&format=html")):
        code, ctype, raw = page
        text = raw.decode()
        assert code == 200 and ctype.startswith("text/html")
        assert "<table" in text and body["id"] in text
        assert "<script>" not in text and "&lt;script&gt;" in text
        assert "<b>" not in text and "&lt;b&gt;&amp;&quot;x&#x27;" in text
    code, ctype, _ = get(f"{url}&format=json", {"Accept": "text/html"})
    assert ctype.startswith("application/json")
