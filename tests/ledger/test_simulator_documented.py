"""The simulator against Gemini's documentation, not against reclaim: the documented examples kept in
``tests/documented/`` (one JSON file each, its page named in ``_source``) have the same shape (keys,
nesting, value types) as what the simulator sends and answers, and the adapter reads each of them.

Also: the echo switches, retention, a cancel that takes a moment, Gemini-style delivery retries (first-attempt
failures, a receiver that is down for less or for longer than the retry window), both error shapes classified
by the adapter through the real SDK, ``retry-after-ms``, and the one status mapping. Real HTTP on loopback,
ports from the OS, no fixed sleeps: every wait is on a condition with a bounded timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from documented import DOCUMENTED, example, example_status, interaction_events, raw_example, shape
from standardwebhooks.webhooks import Webhook
from test_simulator_webhooks import Receiver, create_body, new_secret, post_json, wait_for

from ledger.config import RemoteConfig
from ledger.remotes.gemini import (
    REMOTE_STATE_OF_STATUS,
    GeminiRemote,
    classify_reply,
    parse_error_reply,
    status_from_snapshot,
)
from ledger.simulator import INTERACTION_STATUSES, WEBHOOK_CONFIG_NEEDS_BACKGROUND, WEBHOOK_EVENTS, Simulator

MODEL = "gemini-sim"
KEY = "simulator"
IDEM = "0123456789abcdef0123456789abcdef"


def raw(sim: Simulator, method: str, path: str, body: Any = None) -> httpx2.Response:
    return httpx2.request(method, f"{sim.url}{path}", json=body, headers={"x-goog-api-key": KEY}, timeout=5)


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def receiver(secret: str) -> Iterator[Receiver]:
    r = Receiver(secret)
    yield r
    r.close()


@pytest.fixture
def hooked(receiver: Receiver, secret: str) -> Iterator[Simulator]:
    """A simulator delivering to ``receiver``, Gemini's retry schedule compressed 1000 times (24 h in 86 s)."""
    with Simulator(webhook_url=receiver.url, webhook_secret=secret, webhook_time_compression=1000).start() as s:
        yield s


@pytest.fixture
def make_remote(sim: Simulator) -> Iterator[Callable[[], GeminiRemote]]:
    made: list[GeminiRemote] = []

    def make() -> GeminiRemote:
        remote = GeminiRemote(RemoteConfig("gemini", "gemini", base_url=sim.url, model=MODEL, timeout_seconds=5.0))
        made.append(remote)
        return remote

    yield make
    for remote in made:
        remote.close()


def test_every_documented_example_is_kept_with_its_source() -> None:
    files = sorted(p.name for p in DOCUMENTED.glob("*.json"))
    assert files == sorted([
        "create_reply.json", "create_reply_echoing_webhook_config.json", "error_failed_precondition.json",
        "error_google.json", "error_interactions.json", "error_parameter_unknown.json",
        "error_rate_limit_exceeded.json", "get_reply.json", "get_reply_echoing_labels.json",
        "webhook_batch_succeeded.json", "webhook_events.json", "webhook_interaction_cancelled.json",
        "webhook_interaction_completed.json", "webhook_interaction_failed.json",
        "webhook_interaction_requires_action.json",
    ])
    sources = (DOCUMENTED / "SOURCES.md").read_text(encoding="utf-8")
    for name in files:
        doc = raw_example(name)
        assert doc["_source"].startswith("https://"), name
        assert f"`{name}`" in sources, name
        # an undocumented echo says so in its name and in a note; only the google shape is a robustness case
        assert ("echoing" in name) == ("_undocumented_echo" in doc), name
        assert ("_robustness" in doc) == (name == "error_google.json"), name
    assert example("create_reply.json")["status"] == "in_progress"  # a background create answers in_progress
    for name in ("create_reply.json", "get_reply.json"):
        assert not {"labels", "webhook_config"} & set(example(name)), name


def test_the_guides_envelope_is_every_interaction_events_envelope_and_the_catalogue_is_what_is_sent() -> None:
    envelope = example("webhook_batch_succeeded.json")
    for event in interaction_events():
        doc = example(f"webhook_{event.replace('.', '_')}.json")
        assert doc["type"] == event and set(doc) == set(envelope) and doc["version"] == envelope["version"]
        assert "id" in doc["data"]
    assert {v: k for k, v in WEBHOOK_EVENTS.items()} == interaction_events()  # what the simulator sends
    from ledger.receiver import EVENT_STATUS

    assert EVENT_STATUS == interaction_events()  # what the receiver records: the same rows
    assert not set(EVENT_STATUS) & set(example("webhook_events.json")["other_events"])


# -- deliveries ------------------------------------------------------------------------------------------------
def test_deliveries_have_the_documented_shape_for_every_interaction_event(
    hooked: Simulator, receiver: Receiver, secret: str
) -> None:
    hooked.configure(complete_after=60)
    done = post_json(f"{hooked.url}/v1beta/interactions", create_body("done"))[1]["id"]
    waiting = post_json(f"{hooked.url}/v1beta/interactions", create_body("wait"))[1]["id"]
    cancelled = post_json(f"{hooked.url}/v1beta/interactions", create_body("cxl"))[1]["id"]
    hooked.add_fault("end_status", end_status="failed", match_idem="fail")
    hooked.configure(complete_after=0)
    failed = post_json(f"{hooked.url}/v1beta/interactions", create_body("fail"))[1]["id"]
    hooked.force_status(done, "completed")
    hooked.force_status(waiting, "requires_action")
    assert raw(hooked, "POST", f"/v1beta/interactions/{cancelled}:cancel").status_code == 200
    wait_for(lambda: len(receiver.deliveries()) >= 4)
    by_type = {d.doc["type"]: d for d in receiver.deliveries()}
    expected = {
        "interaction.completed": (done, "webhook_interaction_completed.json"),
        "interaction.requires_action": (waiting, "webhook_interaction_requires_action.json"),
        "interaction.cancelled": (cancelled, "webhook_interaction_cancelled.json"),
        "interaction.failed": (failed, "webhook_interaction_failed.json"),
    }
    assert set(by_type) == set(expected)
    for event, (iid, name) in expected.items():
        got = by_type[event]
        assert Webhook(secret).verify(got.body, got.headers) == got.doc
        assert shape(got.doc) == shape(example(name)), event
        assert got.doc["data"]["id"] == iid and got.doc["version"] == "v1"
        assert "user_metadata" not in got.doc["data"] and "status" not in got.doc["data"]


@pytest.mark.slow
def test_a_first_attempt_that_fails_is_retried_with_the_same_webhook_id_and_a_fresh_signature(
    receiver: Receiver, secret: str
) -> None:
    # Compressed 4 times, the first retry waits 5 s / 4 = 1.25 s: the retry's timestamp is another second.
    with Simulator(webhook_url=receiver.url, webhook_secret=secret, webhook_time_compression=4).start() as s:
        receiver.fail_next(503)
        iid = post_json(f"{s.url}/v1beta/interactions", create_body("retry"))[1]["id"]
        first, second = wait_for(lambda: receiver.for_interaction(iid) if len(receiver.for_interaction(iid)) >= 2
                                 else None)
        assert (first.answered, second.answered) == (503, 200)
        assert first.msg_id == second.msg_id and first.body == second.body
        assert int(second.headers["webhook-timestamp"]) > int(first.headers["webhook-timestamp"])
        assert second.headers["webhook-signature"] != first.headers["webhook-signature"]
        assert first.verified and second.verified
        wait_for(lambda: s.pending_webhooks() == 0)
        log = s.webhook_deliveries()
        assert [(e["attempt"], e["status"], e["ok"]) for e in log] == [(1, 503, False), (2, 200, True)]


def test_first_attempt_failures_arrive_on_a_retry_and_none_is_lost(
    receiver: Receiver, secret: str
) -> None:
    with Simulator(webhook_url=receiver.url, webhook_secret=secret, webhook_time_compression=1000,
                   webhook_first_attempt_fail_rate=1.0).start() as s:
        ids = [post_json(f"{s.url}/v1beta/interactions", create_body(f"f{i}"))[1]["id"] for i in range(3)]
        wait_for(lambda: s.pending_webhooks() == 0 and len(receiver.deliveries()) == 3)
        assert sorted(d.doc["data"]["id"] for d in receiver.deliveries()) == sorted(ids)  # each exactly once
        log = s.webhook_deliveries()
        firsts = [e for e in log if e["attempt"] == 1]
        assert len(firsts) == 3 and all(e["fault"] == "first_attempt_fails" and not e["ok"] for e in firsts)
        assert sorted(e["interaction_id"] for e in log if e["ok"]) == sorted(ids)


def test_a_receiver_down_for_less_than_the_retry_window_gets_the_delivery_once_it_is_up(
    hooked: Simulator, receiver: Receiver
) -> None:
    hooked.receiver_down(0.5)
    iid = post_json(f"{hooked.url}/v1beta/interactions", create_body("down"))[1]["id"]
    [got] = wait_for(lambda: receiver.for_interaction(iid), timeout=15)
    assert got.verified
    # The simulator writes its success entry only once the receiver's answer reaches it: wait for that entry.
    log = wait_for(lambda: (d := hooked.webhook_deliveries()) and d[-1]["ok"] and d, timeout=15)
    assert log[0]["fault"] == "receiver_down" and log[0]["status"] is None and not log[0]["ok"]
    assert log[-1]["ok"] and all(e["msg_id"] == got.msg_id for e in log)


@pytest.mark.slow
def test_a_receiver_down_for_longer_than_the_retry_window_loses_the_delivery(
    receiver: Receiver, secret: str
) -> None:
    # 86 400 times compressed: the 24 h window is one second of real time, the receiver is down for a minute.
    with Simulator(webhook_url=receiver.url, webhook_secret=secret, webhook_time_compression=86_400).start() as s:
        s.configure(receiver_down_seconds=60)
        iid = post_json(f"{s.url}/v1beta/interactions", create_body("lost"))[1]["id"]
        wait_for(lambda: s.pending_webhooks() == 0 and s.webhook_deliveries(), timeout=15)
        log = s.webhook_deliveries()
        assert len(log) > 1 and not any(e["ok"] for e in log)
        assert {e["interaction_id"] for e in log} == {iid}
        assert "given up" in log[-1]["error"] and "retry window" in log[-1]["error"]
        assert receiver.deliveries() == []
        s.receiver_down(0)


# -- replies ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("echo", [False, True])
def test_create_and_get_replies_have_the_documented_shape(echo: bool) -> None:
    body = {"model": MODEL, "input": "Hello", "background": True, "labels": {"idem": IDEM, "attempt": "1"}}
    with Simulator(echo_labels=echo).start() as s:
        created = raw(s, "POST", "/v1/interactions", body)
        assert created.status_code == 200
        got = raw(s, "GET", f"/v1/interactions/{created.json()['id']}")
    assert got.status_code == 200
    reply = created.json()
    assert reply["status"] == "in_progress"
    if echo:  # the undocumented echo: the documented replies plus the create's labels
        assert shape(got.json()) == shape(example("get_reply_echoing_labels.json"))
        assert reply.pop("labels") == got.json()["labels"] == body["labels"]
    else:
        assert shape(got.json()) == shape(example("get_reply.json"))
    assert shape(reply) == shape(example("create_reply.json"))
    assert got.json()["steps"][0] == {"type": "user_input", "content": [{"type": "text", "text": "Hello"}]}


def test_a_v1_create_with_webhook_config_is_refused_as_an_unknown_parameter_and_creates_nothing(sim: Simulator) -> None:
    body = {"model": MODEL, "input": "x", "background": True, "labels": {"idem": IDEM, "attempt": "1"},
            "webhook_config": {"user_metadata": {"idem": IDEM, "attempt": "1"}}}
    reply = raw(sim, "POST", "/v1/interactions", body)
    assert reply.status_code == example_status("error_parameter_unknown.json")
    assert shape(reply.json()) == shape(example("error_parameter_unknown.json"))
    assert reply.json()["error"]["code"] == "parameter_unknown"
    assert sim.interactions() == [] and sim.count("create") == 1 and sim.create_field_count("webhook_config") == 1
    assert parse_error_reply(reply.status_code, reply.json()).status == "PARAMETER_UNKNOWN"
    assert classify_reply(parse_error_reply(reply.status_code, reply.json()))[0] == "invalid"
    # v1beta lists the field: the same create is accepted there
    assert raw(sim, "POST", "/v1beta/interactions", body).status_code == 200


@pytest.mark.parametrize("name", ["create_reply.json", "get_reply.json", "get_reply_echoing_labels.json",
                                  "create_reply_echoing_webhook_config.json"])
def test_the_adapter_reads_each_documented_reply(name: str) -> None:
    doc = example(name)
    got = status_from_snapshot(doc, handle=doc["id"])
    assert got.handle == doc["id"]
    if doc["status"] == "in_progress":
        assert got.state == "running" and got.result is None
    else:
        assert got.state == "completed"
        assert got.result is not None and got.result["text"] == "Hello! How can I help you today?"


@pytest.mark.parametrize(
    ("switches", "present"),
    [
        ({"echo_labels": False}, {"webhook_config"}),
        ({"echo_webhook_config": False}, {"labels"}),
        ({"echo_labels": False, "echo_webhook_config": False}, set()),
    ],
)
def test_the_echo_switches_make_get_omit_labels_and_or_webhook_config(
    switches: dict[str, bool], present: set[str]
) -> None:
    with Simulator(**switches).start() as s:  # type: ignore[arg-type]
        body = create_body("echo")
        iid = raw(s, "POST", "/v1beta/interactions", body).json()["id"]
        got = raw(s, "GET", f"/v1beta/interactions/{iid}").json()
        assert {"labels", "webhook_config"} & set(got) == present
        assert s.find_by_idem("echo")[0]["labels"] == body["labels"]  # stored all the same
    with Simulator().start() as s:  # over the control API, too
        config = raw(s, "POST", "/_sim/config", switches).json()
        assert {k: config[k] for k in switches} == switches


def test_get_answers_404_once_the_retention_time_has_passed() -> None:
    with Simulator(retention_seconds=0.3).start() as s:
        iid = raw(s, "POST", "/v1beta/interactions", create_body("old")).json()["id"]
        assert raw(s, "GET", f"/v1beta/interactions/{iid}").status_code == 200
        wait_for(lambda: raw(s, "GET", f"/v1beta/interactions/{iid}").status_code == 404, timeout=5)
        assert raw(s, "POST", f"/v1beta/interactions/{iid}:cancel").status_code == 404
    with Simulator().start() as s:
        assert s.configure()["retention_seconds"] == 86_400  # by default one day: the free tier's retention
        for bad in (0, -1, "1", True):
            reply = raw(s, "POST", "/_sim/config", {"retention_seconds": bad})
            assert reply.status_code == 400 and "retention_seconds" in reply.json()["error"]["message"]
        assert s.configure()["retention_seconds"] == 86_400  # a refused setting changed nothing
    with Simulator(retention_seconds=None).start() as s:
        assert s.configure()["retention_seconds"] is None  # kept for good when a test needs it


def test_a_cancel_takes_a_moment_reads_in_between_say_in_progress_then_cancelled_is_delivered(
    hooked: Simulator, receiver: Receiver
) -> None:
    hooked.configure(complete_after=60, cancel_delay=0.4)
    iid = post_json(f"{hooked.url}/v1beta/interactions", create_body("slow-cancel"))[1]["id"]
    accepted = raw(hooked, "POST", f"/v1beta/interactions/{iid}:cancel")
    assert accepted.status_code == 200 and accepted.json()["status"] == "in_progress"
    assert raw(hooked, "GET", f"/v1beta/interactions/{iid}").json()["status"] in ("in_progress", "cancelled")
    wait_for(lambda: raw(hooked, "GET", f"/v1beta/interactions/{iid}").json()["status"] == "cancelled", timeout=5)
    [d] = wait_for(lambda: receiver.for_interaction(iid))
    assert d.doc["type"] == "interaction.cancelled" and d.doc["data"] == {"id": iid}


def test_webhook_config_without_background_is_refused_in_the_interactions_shape(sim: Simulator) -> None:
    body = {"model": MODEL, "input": "x", "webhook_config": {"user_metadata": {"idem": IDEM}}}
    reply = raw(sim, "POST", "/v1beta/interactions", body)
    assert reply.status_code == 400
    assert shape(reply.json()) == shape(example("error_interactions.json"))
    assert reply.json()["error"]["message"] == WEBHOOK_CONFIG_NEEDS_BACKGROUND
    assert sim.interactions() == [] and sim.count("create") == 1


# -- errors -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fault", "name"),
    [({"kind": "status", "status": 400}, "error_interactions.json"),
     ({"kind": "rate_limited"}, "error_rate_limit_exceeded.json"),
     ({"kind": "billing"}, "error_failed_precondition.json"),
     ({"kind": "rate_limited", "reason": "RATE_LIMIT_EXCEEDED", "error_shape": "google"}, "error_google.json")],
)
def test_error_bodies_copy_the_documented_examples(sim: Simulator, fault: dict[str, Any], name: str) -> None:
    fault = dict(fault)
    sim.add_fault(fault.pop("kind"), **fault)
    reply = raw(sim, "POST", "/v1/interactions", {"model": MODEL, "input": "x", "background": True})
    assert reply.status_code == example_status(name)
    assert shape(reply.json()) == shape(example(name))
    if "error_shape" not in fault:  # the documented shape by default: the page's code, no RetryInfo
        assert reply.json()["error"]["code"] == example(name)["error"]["code"]
    assert sim.interactions() == []


def test_the_simulators_own_errors_use_the_error_pages_codes(sim: Simulator) -> None:
    missing = raw(sim, "GET", "/v1/interactions/v1_nope")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    sim.configure(unknown_models=[MODEL])
    unknown = raw(sim, "POST", "/v1/interactions", {"model": MODEL, "input": "x", "background": True})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "model_not_found")
    wrong_key = httpx2.post(f"{sim.url}/v1/interactions", json={"model": "m", "input": "x"},
                            headers={"x-goog-api-key": "wrong"}, timeout=5)
    assert (wrong_key.status_code, wrong_key.json()["error"]["code"]) == (401, "authentication")
    for reply in (missing, unknown, wrong_key):
        assert set(reply.json()["error"]) == {"code", "message"}
    sim.configure(error_shape="google")  # the robustness case: Google's front end
    wrong_key = httpx2.post(f"{sim.url}/v1/interactions", json={"model": "m", "input": "x"},
                            headers={"x-goog-api-key": "wrong"}, timeout=5)
    assert (wrong_key.status_code, wrong_key.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert raw(sim, "POST", "/_sim/config", {"error_shape": "xml"}).status_code == 400
    assert sim.configure()["error_shape"] == "google"


@pytest.mark.parametrize(
    ("name", "kind", "status", "retry_after"),
    [("error_google.json", "not_delivered", "RESOURCE_EXHAUSTED", 7.0),
     ("error_interactions.json", "invalid", "INVALID_REQUEST", None),
     ("error_parameter_unknown.json", "invalid", "PARAMETER_UNKNOWN", None),
     ("error_rate_limit_exceeded.json", "not_delivered", "RATE_LIMIT_EXCEEDED", None),
     ("error_failed_precondition.json", "remote_unusable", "FAILED_PRECONDITION", None)],
)
def test_the_adapter_reads_each_documented_error(
    name: str, kind: str, status: str, retry_after: float | None
) -> None:
    reply = parse_error_reply(example_status(name), example(name), {})
    assert (reply.status, reply.retry_after) == (status, retry_after)
    assert reply.message == example(name)["error"]["message"]
    assert classify_reply(reply)[0] == kind


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ({"kind": "status", "status": 400}, "invalid"),
        ({"kind": "status", "status": 503}, "unknown"),
        ({"kind": "status", "status": 429}, "not_delivered"),
        ({"kind": "permission_denied"}, "remote_unusable"),
        ({"kind": "model_not_found"}, "remote_unusable"),
    ],
)
@pytest.mark.parametrize("error_shape", ["google", "interactions"])
def test_the_adapter_classifies_both_error_shapes_from_the_simulator(
    sim: Simulator, make_remote: Callable[[], GeminiRemote], fault: dict[str, Any], kind: str, error_shape: str
) -> None:
    fault = dict(fault)
    sim.add_fault(fault.pop("kind"), error_shape=error_shape, **fault)
    out = make_remote().send({"input": "x"}, IDEM, 1)
    assert out.kind == kind, out
    assert sim.count("create") == 1 and sim.interactions() == []
    if error_shape == "interactions":
        assert "(" not in (out.error or "").split(":")[0]  # no ErrorInfo reason: the shape has no details


def test_retry_after_ms_is_read_in_milliseconds_and_before_retry_after(
    sim: Simulator, make_remote: Callable[[], GeminiRemote]
) -> None:
    remote = make_remote()
    sim.add_fault("status", status=429, retry_after_ms=1500, error_shape="interactions")
    assert (lambda o: (o.kind, o.retry_after))(remote.send({"input": "x"}, IDEM, 1)) == ("not_delivered", 1.5)
    sim.add_fault("status", status=429, retry_after_ms=250, retry_after=30)
    assert remote.send({"input": "x"}, IDEM, 1).retry_after == 0.25
    for bad in ("soon", "-5", "nan"):
        assert parse_error_reply(429, {}, {"retry-after-ms": bad, "retry-after": "3"}).retry_after == 3.0
    assert sim.count("create") == 2
    reply = raw(sim, "POST", "/_sim/faults", {"kind": "status", "retry_after_ms": -1})
    assert reply.status_code == 400 and "retry_after_ms" in reply.json()["error"]["message"]
    reply = raw(sim, "POST", "/_sim/faults", {"kind": "status", "error_shape": "xml"})
    assert reply.status_code == 400 and "error_shape" in reply.json()["error"]["message"]
    assert sim.faults() == []


def test_one_mapping_from_gemini_status_to_remote_state() -> None:
    from ledger.receiver import EVENT_STATUS  # the receiver names statuses; the adapter's table maps them

    assert set(EVENT_STATUS.values()) <= set(REMOTE_STATE_OF_STATUS)
    assert set(REMOTE_STATE_OF_STATUS) == set(INTERACTION_STATUSES)
    assert REMOTE_STATE_OF_STATUS["requires_action"] == "needs_person"
    assert REMOTE_STATE_OF_STATUS["completed"] == "completed"
    assert {REMOTE_STATE_OF_STATUS[s] for s in ("in_progress", "queued")} == {"running"}
    assert {REMOTE_STATE_OF_STATUS[s] for s in ("failed", "cancelled", "incomplete", "budget_exceeded")} == {"failed"}
    assert status_from_snapshot({"status": "requires_action"}).state == "needs_person"
