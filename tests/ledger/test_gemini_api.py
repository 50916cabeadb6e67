"""GeminiRemote through the real google-genai 3.6.1 SDK against the simulator, counting POSTs there.

Every status the SDK documents -> the RemoteStatus reclaim acts on; every error answer -> the SendOutcome
kind and how many creates reached the simulator; the send window's hook (where it runs, that it refuses
a closed window, a short lease and a second request); the client pinned to the Gemini Developer API
whatever the environment says; payloads the SDK would refuse, refused at submit with nothing sent.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from google.genai.interactions import Interaction

from ledger.config import Config, RemoteConfig
from ledger.errors import EXIT_BAD_INPUT, PayloadError
from ledger.remotes.gemini import (
    API_VERSION,
    GEMINI_API_BASE_URL,
    MAX_PAYLOAD_DEPTH,
    REMOTE_STATE_OF_STATUS,
    GeminiRemote,
    classify_reply,
    output_text,
    parse_error_reply,
    validate_payload,
)
from ledger.reservation import parse_payload
from ledger.send_window import SendWindow
from ledger.simulator import INTERACTION_STATUSES, Simulator

MODEL = "gemini-sim"
OP = "article.generate"
KEY = "simulator"
IDEM = "0123456789abcdef0123456789abcdef"

# What the SDK and the environment could use to steer a client away from the simulator.
STEERING_ENV = (
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_GENAI_API_VERSION", "GOOGLE_GENAI_CLIENT_MODE", "GOOGLE_GENAI_REPLAYS_DIRECTORY",
    "GOOGLE_GENAI_ACCESS_TOKEN", "GOOGLE_GENAI_HTTP_CLIENT",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STEERING_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_remote(sim: Simulator) -> Iterator[Callable[..., GeminiRemote]]:
    made: list[GeminiRemote] = []

    def make(*, timeout: float = 5.0, model: str = MODEL, base_url: str | None = None) -> GeminiRemote:
        rc = RemoteConfig("gemini", "gemini", base_url=base_url or sim.url, model=model, timeout_seconds=timeout)
        remote = GeminiRemote(rc)
        made.append(remote)
        return remote

    yield make
    for remote in made:
        remote.close()


@pytest.fixture
def remote(make_remote: Callable[..., GeminiRemote]) -> GeminiRemote:
    return make_remote()


def raw(sim: Simulator, method: str, path: str, body: Any = None, *, key: str | None = KEY) -> httpx2.Response:
    """One plain HTTP request to the simulator (not through the SDK)."""
    headers = {"x-goog-api-key": key} if key is not None else {}
    with httpx2.Client(timeout=5.0) as client:
        return client.request(method, sim.url + path, json=body, headers=headers)


# -- statuses ------------------------------------------------------------------------------------------


def _documented_statuses() -> set[str]:
    from google.genai._gaos.types.interactions.interaction import InteractionStatus

    literal = typing.get_args(InteractionStatus)[0]
    return set(typing.get_args(literal))


def test_the_status_table_maps_every_status_the_sdk_documents() -> None:
    documented = _documented_statuses()
    assert set(REMOTE_STATE_OF_STATUS) == documented
    assert set(INTERACTION_STATUSES) == documented  # the simulator can play each one


EXPECTED: dict[str, tuple[str, str | None]] = {
    "completed": ("completed", None),
    "failed": ("failed", "remote status failed"),
    "cancelled": ("failed", "remote status cancelled"),
    "budget_exceeded": ("failed", "remote status budget_exceeded"),
    "incomplete": ("failed", "remote status incomplete: the answer is partial"),
    "requires_action": ("needs_person", "the remote is waiting for something: requires_action"),
    "requires_continuation": ("needs_person", "the remote is waiting for something: requires_continuation"),
    "idle": ("needs_person", "the remote is waiting for something: idle"),
    "in_progress": ("running", None),
    "queued": ("running", None),
}


@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_each_documented_status_maps_to_its_remote_status(
    sim: Simulator, remote: GeminiRemote, status: str
) -> None:
    text = "the partial answer" if status == "incomplete" else None
    sim.add_fault("end_status", end_status=status, text=text)
    out = remote.send({"input": "write it"}, IDEM, 1)
    assert out.kind == "accepted" and out.handle
    got = remote.lookup(out.handle)
    state, error = EXPECTED[status]
    assert got.state == state
    assert got.snapshot["status"] == status and got.handle == out.handle
    if error is None:
        assert got.error is None
    else:
        assert got.error is not None and got.error.startswith(error)
    if status == "completed":
        assert got.result["text"] == "simulated reply to: write it"
        assert "text_missing" not in got.result
    elif status == "incomplete":
        assert got.result["text"] == "the partial answer" and got.result["incomplete"] is True
        assert got.result["interaction"]["status"] == "incomplete"
    else:
        assert got.result is None
    assert sim.count("create") == 1 and sim.count("get") == 1


def test_a_completed_interaction_without_text_is_flagged_never_silently_empty(
    sim: Simulator, remote: GeminiRemote
) -> None:
    sim.add_fault("end_status", end_status="completed", text="")
    out = remote.send({"input": "say nothing"}, IDEM, 1)
    got = remote.lookup(out.handle or "")
    assert got.state == "completed"
    assert got.result["text"] == "" and got.result["text_missing"] is True
    assert got.result["interaction"]["id"] == out.handle


@pytest.mark.parametrize("status", ["pending", "running", "expired", "COMPLETED"])
def test_an_unrecognised_status_needs_a_person(sim: Simulator, remote: GeminiRemote, status: str) -> None:
    out = remote.send({"input": "x"}, IDEM, 1)
    sim.force_status(out.handle or "", status, allow_unknown=True)
    got = remote.lookup(out.handle or "")
    assert got.state == "needs_person"
    assert got.error == f"the remote answered an unrecognised status '{status}'"


def test_force_status_refuses_an_undocumented_status_unless_asked(sim: Simulator, remote: GeminiRemote) -> None:
    out = remote.send({"input": "x"}, IDEM, 1)
    with pytest.raises(ValueError, match="status must be one of"):
        sim.force_status(out.handle or "", "expired")


# -- every reply shape parses with the SDK's own models, text from steps -----------------------------------


@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_every_simulator_reply_parses_with_the_sdk_interaction_model(sim: Simulator, status: str) -> None:
    sim.add_fault("end_status", end_status=status)
    created = raw(sim, "POST", "/v1/interactions",
                  {"model": MODEL, "input": "shape check", "background": True, "labels": {"idem": IDEM}})
    assert created.status_code == 200
    replies = [created.json(), raw(sim, "GET", f"/v1/interactions/{created.json()['id']}").json()]
    for reply, expected in zip(replies, ("in_progress", status), strict=True):  # a background create: in_progress
        parsed = Interaction.model_validate(reply)
        assert parsed.status == expected
        # no field the SDK does not model (no legacy `outputs`), but the documented `object: "interaction"`
        # (the API reference gives it; google-genai 3.6.1 keeps it as an extra)
        assert parsed.model_extra == {"object": "interaction"}
        assert "outputs" not in reply and "output_text" not in reply
        snap = parsed.model_dump(mode="json", exclude_none=True)
        text, source = output_text(snap)
        if expected in ("completed", "incomplete", "requires_continuation"):
            assert source == "steps" and text and "simulated reply to: shape check".startswith(text)
        else:
            assert (text, source) == ("", "none")
    assert len(created.json()["id"]) > 40 and created.json()["id"].startswith("v1_")


def test_text_comes_from_steps_not_the_fallbacks() -> None:
    snap = {
        "status": "completed",
        "steps": [
            {"type": "user_input", "content": [{"type": "text", "text": "question"}]},
            {"type": "thought", "summary": []},
            {"type": "model_output", "content": [{"type": "text", "text": "an"}, {"type": "text", "text": "swer"}]},
        ],
        "outputs": [{"type": "text", "text": "legacy"}],
        "output_text": "legacy too",
    }
    assert output_text(snap) == ("answer", "steps")
    assert output_text({"outputs": [{"type": "text", "text": "legacy"}]}) == ("legacy", "outputs")
    assert output_text({"output_text": "sdk"}) == ("sdk", "output_text")


# -- errors on create ----------------------------------------------------------------------------------------

G = {"error_shape": "google"}  # the robustness case: Google's front-end error body
ERROR_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # the Interactions API's documented body (the simulator's default): the error page's codes
    ("api_key_invalid", {}, "remote_unusable", "the API key was not accepted: AUTHENTICATION"),
    ("billing", {}, "remote_unusable", "billing or region: FAILED_PRECONDITION"),
    ("location", {}, "remote_unusable", "billing or region: FAILED_PRECONDITION"),
    ("permission_denied", {}, "remote_unusable", "permission denied: PERMISSION_DENIED"),
    ("service_disabled", {}, "remote_unusable", "permission denied: PERMISSION_DENIED"),
    ("payment_required", {}, "remote_unusable", "billing: payment required (HTTP 402)"),
    ("model_not_found", {}, "remote_unusable", f"model {MODEL!r} not found"),
    ("rate_limited", {}, "not_delivered", "rate limited or out of quota: RATE_LIMIT_EXCEEDED"),
    ("quota_exceeded", {}, "not_delivered", "rate limited or out of quota: QUOTA_EXCEEDED"),
    ("status", {"status": 400}, "invalid", "the remote refused this payload: INVALID_REQUEST"),
    ("status", {"status": 401}, "remote_unusable", "the API key was not accepted: AUTHENTICATION"),
    ("status", {"status": 500}, "unknown", "HTTP 500 API_ERROR: the remote failed while handling the request"),
    ("status", {"status": 503}, "unknown",
     "HTTP 503 SERVICE_UNAVAILABLE: the remote failed while handling the request"),
    ("status", {"status": 504}, "unknown",
     "HTTP 504 DEADLINE_EXCEEDED: the remote failed while handling the request"),
    # Google's front-end body
    ("api_key_invalid", G, "remote_unusable", "the API key is invalid"),
    ("billing", G, "remote_unusable", "billing or region: FAILED_PRECONDITION"),
    ("service_disabled", G, "remote_unusable", "the Gemini API is disabled for this project: SERVICE_DISABLED"),
    ("status", {"status": 400, **G}, "invalid", "the remote refused this payload: INVALID_ARGUMENT"),
    ("status", {"status": 401, **G}, "remote_unusable", "the API key was not accepted: UNAUTHENTICATED"),
    ("status", {"status": 403, "reason": "SERVICE_DISABLED", **G}, "remote_unusable",
     "the Gemini API is disabled for this project: SERVICE_DISABLED"),
    ("status", {"status": 500, **G}, "unknown", "HTTP 500 INTERNAL: the remote failed while handling the request"),
    ("status", {"status": 503, **G}, "unknown", "HTTP 503 UNAVAILABLE: the remote failed while handling the request"),
    # no answer at all
    ("accept_then_hang", {}, "unknown", "timeout"),
    ("complete_lose_reply", {}, "unknown", "connection reset after the request was sent"),
    ("drop_before_accept", {}, "unknown", "connection reset after the request was sent"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "kw", "kind", "reason"), ERROR_CASES, ids=[f"{c[0]}{c[1] or ''}" for c in ERROR_CASES])
def test_each_create_error_is_classified_after_exactly_one_post(
    sim: Simulator, make_remote: Callable[..., GeminiRemote], fault: str, kw: dict[str, Any], kind: str, reason: str
) -> None:
    remote = make_remote(timeout=0.5 if fault == "accept_then_hang" else 5.0)
    sim.add_fault(fault, **kw)
    out = remote.send({"input": "x"}, IDEM, 1)
    assert (out.kind, out.reason) == (kind, reason)
    assert out.handle is None and out.error
    assert sim.count("create") == 1 and sim.count(None) == 1


@pytest.mark.parametrize(
    ("kw", "expected"),
    [({}, 7.0), ({"retry_delay": 42}, 42.0), ({"retry_delay": 1.5, "retry_after": 99}, 1.5)],
)
def test_429_in_googles_shape_is_not_delivered_with_the_delay_from_retry_info(
    sim: Simulator, remote: GeminiRemote, kw: dict[str, Any], expected: float
) -> None:
    sim.add_fault("rate_limited", error_shape="google", **kw)
    out = remote.send({"input": "x"}, IDEM, 1)
    assert out.kind == "not_delivered" and out.retry_after == expected
    assert out.reason == "rate limited or out of quota: RESOURCE_EXHAUSTED"
    assert sim.count("create") == 1


def test_429_in_the_interactions_shape_carries_no_retry_info_and_takes_retry_after(
    sim: Simulator, remote: GeminiRemote
) -> None:
    sim.add_fault("rate_limited")
    out = remote.send({"input": "x"}, IDEM, 1)
    assert (out.kind, out.retry_after) == ("not_delivered", None)  # the documented body gives no delay
    sim.add_fault("rate_limited", retry_after=9)
    assert remote.send({"input": "x"}, IDEM, 1).retry_after == 9.0
    assert sim.count("create") == 2


def test_429_without_retry_info_takes_the_retry_after_header(sim: Simulator, remote: GeminiRemote) -> None:
    sim.add_fault("status", status=429, retry_after=11)
    out = remote.send({"input": "x"}, IDEM, 1)
    assert (out.kind, out.retry_after) == ("not_delivered", 11.0)
    sim.add_fault("status", status=429)
    assert remote.send({"input": "x"}, IDEM, 1).retry_after is None
    assert sim.count("create") == 2


@pytest.mark.parametrize("code", [307, 308])
def test_a_redirect_is_never_followed_and_makes_the_remote_unusable(
    sim: Simulator, remote: GeminiRemote, code: int
) -> None:
    target = f"{sim.url}/v1/interactions"  # the simulator itself: a followed redirect would be a second create
    sim.add_fault("redirect", status=code, location=target)
    out = remote.send({"input": "x"}, IDEM, 1)
    assert out.kind == "remote_unusable"
    assert out.reason == f"the remote answered a redirect to {target}: check base_url"
    assert sim.count("create") == 1 and sim.interactions() == []


@pytest.mark.parametrize(
    ("shape", "words", "said"),
    [("interactions", "the API key was not accepted: AUTHENTICATION", "HTTP 401 AUTHENTICATION"),
     ("google", "the API key is invalid", "API_KEY_INVALID")],
)
def test_a_wrong_api_key_is_the_invalid_key_answer(
    sim: Simulator, make_remote: Callable[..., GeminiRemote], monkeypatch: pytest.MonkeyPatch,
    shape: str, words: str, said: str,
) -> None:
    sim.configure(error_shape=shape)
    monkeypatch.setenv("GEMINI_API_KEY", "not-the-key")
    remote = make_remote()
    out = remote.send({"input": "x"}, IDEM, 1)
    assert (out.kind, out.reason) == ("remote_unusable", words)
    assert said in (out.error or "")
    assert sim.count("create") == 1 and sim.interactions() == []
    got = remote.lookup("v1_whatever")
    assert got.state == "error" and (got.error or "").startswith(words)


@pytest.mark.parametrize(("shape", "code"), [("interactions", "authentication"), ("google", 401)])
def test_a_missing_key_is_401_and_unusable(sim: Simulator, shape: str, code: str | int) -> None:
    sim.configure(error_shape=shape)
    reply = raw(sim, "POST", "/v1/interactions", {"model": MODEL, "input": "x"}, key=None)
    assert reply.status_code == 401
    assert reply.json()["error"]["code"] == code
    kind, words = classify_reply(parse_error_reply(401, reply.json(), reply.headers))
    assert kind == "remote_unusable" and words.startswith("the API key was not accepted: ")


def test_google_error_bodies_carry_error_info_and_retry_info(sim: Simulator) -> None:
    sim.configure(error_shape="google")
    sim.add_fault("rate_limited", retry_delay=7)
    body = raw(sim, "POST", "/v1/interactions", {"model": MODEL, "input": "x"}).json()["error"]
    assert (body["code"], body["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"} in body["details"]
    sim.add_fault("api_key_invalid")
    body = raw(sim, "POST", "/v1/interactions", {"model": MODEL, "input": "x"}).json()["error"]
    assert (body["code"], body["status"]) == (400, "INVALID_ARGUMENT")
    info = body["details"][0]
    assert (info["@type"], info["reason"], info["domain"]) == (
        "type.googleapis.com/google.rpc.ErrorInfo", "API_KEY_INVALID", "googleapis.com")


def test_an_unknown_model_is_404_on_create_and_makes_the_remote_unusable(
    sim: Simulator, make_remote: Callable[..., GeminiRemote]
) -> None:
    sim.configure(unknown_models=["gemini-gone"])
    out = make_remote(model="gemini-gone").send({"input": "x"}, IDEM, 1)
    assert (out.kind, out.reason) == ("remote_unusable", "model 'gemini-gone' not found")
    assert make_remote().send({"input": "x"}, IDEM, 1).kind == "accepted"
    assert sim.count("create") == 2 and len(sim.interactions()) == 1


def test_connection_refused_is_not_delivered(
    make_remote: Callable[..., GeminiRemote], free_port: Callable[[], int]
) -> None:
    window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=1)
    out = make_remote(base_url=f"http://127.0.0.1:{free_port()}").send({"input": "x"}, IDEM, 1, window)
    assert out.kind == "not_delivered" and "nothing was sent" in (out.error or "")
    assert window.written is False


def test_the_timeout_is_one_total_deadline(sim: Simulator, make_remote: Callable[..., GeminiRemote]) -> None:
    import time

    sim.add_fault("accept_then_hang")  # the simulator holds the connection for up to 120 s
    started = time.monotonic()
    out = make_remote(timeout=0.5).send({"input": "x"}, IDEM, 1)
    assert out.kind == "unknown" and out.reason == "timeout"
    # One request, given up by the deadline long before the hang would end: the bound is 40x the
    # timeout, so a loaded machine cannot fail it, while a per-attempt timeout with retries or a
    # missing deadline (the 120 s hang) would.
    assert sim.count("create") == 1
    assert time.monotonic() - started < 20


# -- reads ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_lookup_404_is_not_found_and_other_answers_are_errors(sim: Simulator, remote: GeminiRemote) -> None:
    got = remote.lookup("v1_no-such-interaction")
    assert got.state == "not_found" and got.snapshot["http_status"] == 404
    out = remote.send({"input": "x"}, IDEM, 1)
    sim.add_fault("status", method="get", status=500, count=3)  # reads may retry: all three answer 500
    got = remote.lookup(out.handle or "")
    assert got.state == "error" and "HTTP 500" in (got.error or "")
    sim.add_fault("permission_denied", method="get")
    got = remote.lookup(out.handle or "")
    assert got.state == "error" and (got.error or "").startswith("permission denied: PERMISSION_DENIED")
    assert remote.lookup(out.handle or "").state == "completed"


# -- the send window -----------------------------------------------------------------------------------------


class RecordingWindow(SendWindow):
    """A SendWindow that records, at each check, what had happened on the wire."""

    def __init__(self, sim: Simulator, **kw: Any) -> None:
        super().__init__(**{"lease_seconds": 60.0, "deadline_seconds": 5.0, "margin_seconds": 1.0, **kw})
        self.sim = sim
        self.seen: list[dict[str, Any]] = []

    def check(self) -> None:
        conn = None
        for frame in inspect.stack(context=0):
            if frame.filename.endswith("httpcore2/_sync/http11.py") and frame.function == "handle_request":
                conn = frame.frame.f_locals.get("self")
        self.seen.append({
            "creates_at_simulator": self.sim.count("create"),
            "inside_http11_handle_request": conn is not None,
            "socket_open": getattr(conn, "_network_stream", None) is not None,
        })
        super().check()


def test_the_window_is_checked_once_right_before_the_request_is_written(
    sim: Simulator, remote: GeminiRemote
) -> None:
    # The hook is on the very client the SDK's interactions resource sends through.
    assert remote._create_client._api_client._httpx_client is remote._create_http
    window = RecordingWindow(sim)
    out = remote.send({"input": "x"}, IDEM, 1, window)
    assert out.kind == "accepted" and out.handle
    # One check, inside httpcore's HTTP/1.1 request handling, with the connection already open and the
    # request not yet at the simulator: the last step before the request's first byte is written.
    assert window.seen == [{"creates_at_simulator": 0, "inside_http11_handle_request": True, "socket_open": True}]
    assert window.written and window.checked_at is not None
    assert window.checked_at <= sim.interaction_arrival(out.handle)
    assert sim.count("create") == 1


def test_reads_are_not_fenced_by_any_window(sim: Simulator, remote: GeminiRemote) -> None:
    out = remote.send({"input": "x"}, IDEM, 1, RecordingWindow(sim))
    assert remote.lookup(out.handle or "").state == "completed"


def test_a_closed_window_sends_nothing(sim: Simulator, remote: GeminiRemote) -> None:
    window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=1)
    assert window.close() is False
    out = remote.send({"input": "x"}, IDEM, 1, window)
    assert out.kind == "abandoned" and out.error == "the send was given up before its request was written"
    assert sim.count(None) == 0


def test_too_little_lease_left_sends_nothing(sim: Simulator, remote: GeminiRemote) -> None:
    clock = [100.0]
    window = SendWindow(lease_seconds=30, deadline_seconds=5, margin_seconds=2, claimed_at=100.0,
                        monotonic=lambda: clock[0])
    clock[0] = 124.0  # 6 s of lease left: not more than 5 s deadline + 2 s margin
    out = remote.send({"input": "x"}, IDEM, 1, window)
    assert out.kind == "abandoned" and out.error == window.refusal
    assert "lease left 6.000 s is not more than the request deadline 5 s + margin 2 s" in (out.error or "")
    assert sim.count(None) == 0 and window.written is False


def test_one_window_lets_one_request_through(sim: Simulator, remote: GeminiRemote) -> None:
    window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=1)
    assert remote.send({"input": "x"}, IDEM, 1, window).kind == "accepted"
    again = remote.send({"input": "x"}, IDEM, 1, window)
    assert again.kind == "abandoned" and "second request" in (again.error or "")
    assert sim.count("create") == 1


def test_a_redirect_followed_inside_the_client_is_refused_by_the_window(
    sim: Simulator, remote: GeminiRemote
) -> None:
    # Even if the client were made to follow redirects, the redirected POST never leaves: the window is used.
    remote._create_http.follow_redirects = True
    sim.add_fault("redirect", status=307, location=f"{sim.url}/v1/interactions")
    window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=1)
    out = remote.send({"input": "x"}, IDEM, 1, window)
    assert out.kind == "unknown" and "second request" in (out.error or "")
    assert sim.count("create") == 1 and sim.interactions() == []


def test_a_create_outside_send_is_refused_unsent(sim: Simulator, remote: GeminiRemote) -> None:
    with pytest.raises(Exception, match="no send window") as err:
        remote._create_client.interactions.create(model=MODEL, input="x", background=True)
    assert type(err.value).__name__ == "SendWindowClosed"
    assert sim.count(None) == 0


# -- the client is pinned to the Gemini Developer API ---------------------------------------------------------


def test_vertex_and_other_sdk_env_vars_do_not_move_the_client(
    sim: Simulator, make_remote: Callable[..., GeminiRemote], monkeypatch: pytest.MonkeyPatch,
    free_port: Callable[[], int], tmp_path: Path,
) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("GOOGLE_GENAI_USE_ENTERPRISE", "true")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "some-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setenv("GOOGLE_API_KEY", "a-google-key")
    monkeypatch.setenv("GOOGLE_GENAI_API_KEY", "another-key")
    monkeypatch.setenv("GOOGLE_GENAI_ACCESS_TOKEN", "a-token")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v9")
    monkeypatch.setenv("GOOGLE_GENAI_CLIENT_MODE", "replay")
    monkeypatch.setenv("GOOGLE_GENAI_REPLAYS_DIRECTORY", str(tmp_path))
    remote = make_remote()
    out = remote.send({"input": "x"}, IDEM, 1)
    assert out.kind == "accepted"  # the simulator checked the key: it was ours, not an env var's
    assert sim.count("create") == 1
    assert remote.lookup(out.handle or "").state == "completed"
    api = remote._create_client._api_client
    assert api.vertexai is False and api._http_options.api_version == API_VERSION


def test_without_base_url_the_client_points_at_the_gemini_developer_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "1")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://elsewhere.invalid/")
    remote = GeminiRemote(RemoteConfig("g", "gemini", model=MODEL))
    try:
        for client in (remote._create_client, remote._read_client):
            api = client._api_client
            assert api.vertexai is False and api.api_key == "k"
            assert api._http_options.base_url == GEMINI_API_BASE_URL
            assert api._http_options.api_version == API_VERSION
        assert remote._create_http.follow_redirects is False and remote._read_http.follow_redirects is False
    finally:
        remote.close()


# -- payloads the SDK would refuse: nothing sent, refused at submit --------------------------------------------


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


SDK_REFUSED: list[dict[str, Any]] = [
    {"input": [1, 2, 3]},
    {"input": [{}]},
    {"input": "x", "generation_config": {"temperature": "hot"}},
    {"input": "x", "system_instruction": {"text": "not a string"}},
    {"input": _deep(900)},
]


@pytest.mark.parametrize("payload", SDK_REFUSED, ids=["ints", "empty-block", "hot", "system-object", "deep-900"])
def test_a_payload_the_sdk_refuses_is_invalid_with_nothing_sent(
    sim: Simulator, remote: GeminiRemote, payload: dict[str, Any]
) -> None:
    window = SendWindow(lease_seconds=60, deadline_seconds=5, margin_seconds=1)
    out = remote.send(payload, IDEM, 1, window)
    assert out.kind == "invalid"
    assert (out.error or "").startswith("the SDK refused the request before sending it: ")
    assert window.written is False and sim.count(None) == 0


@pytest.mark.parametrize("payload", SDK_REFUSED, ids=["ints", "empty-block", "hot", "system-object", "deep-900"])
def test_a_payload_the_sdk_refuses_is_refused_at_submit(cfg: Config, sim: Simulator, payload: dict[str, Any]) -> None:
    with pytest.raises(PayloadError) as err:
        parse_payload(cfg, OP, json.dumps(payload))
    assert err.value.exit_code == EXIT_BAD_INPUT
    assert str(err.value).startswith("payload: ") and "\n" not in str(err.value)
    assert sim.count(None) == 0


def test_submit_names_what_the_sdk_refused() -> None:
    with pytest.raises(PayloadError, match=r"generation_config\.temperature: Input should be a valid number"):
        validate_payload({"input": "x", "generation_config": {"temperature": "hot"}})
    with pytest.raises(PayloadError, match=r"input\[0\]\.content\[0\]: Content: expected object with 'type'"):
        validate_payload({"input": [{}]})


def test_nesting_is_bounded_without_recursion(cfg: Config) -> None:
    ok = {"input": [{"type": "text", "text": "x"}], "generation_config": {"temperature": 0.2}}
    validate_payload(ok)
    text = '{"input": ' + "[" * 200 + '"x"' + "]" * 200 + "}"
    with pytest.raises(PayloadError, match=f"'input' is nested more than {MAX_PAYLOAD_DEPTH} levels deep"):
        parse_payload(cfg, OP, text)
    with pytest.raises(PayloadError, match="nested more than"):
        validate_payload({"input": "x", "generation_config": {"a": _deep(5000)}})


@pytest.mark.parametrize(
    "payload",
    [
        {"input": "hi"},
        {"input": [{"text": "hi"}]},
        {"input": [{"type": "text", "text": "hi"}], "system_instruction": "be brief"},
        {"input": [{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}]},
        {"input": "hi", "generation_config": {"temperature": 0.3, "max_output_tokens": 100}},
    ],
)
def test_payloads_the_sdk_accepts_pass_and_are_sent_once(
    cfg: Config, sim: Simulator, remote: GeminiRemote, payload: dict[str, Any]
) -> None:
    assert parse_payload(cfg, OP, payload) == payload
    assert sim.count(None) == 0
    assert remote.send(payload, IDEM, 1).kind == "accepted"
    assert sim.count("create") == 1


def test_every_client_of_a_process_verifies_with_one_context_loaded_once(
    make_remote: Callable[..., GeminiRemote], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Building a remote loads no certificates once the process has: its HTTP clients and the SDK's transports
    (httpx async, aiohttp, websocket) all hold the one verifying context, read from SSL_CERT_FILE when set."""
    import ssl

    import certifi

    from ledger.remotes.gemini import tls_context

    loads: list[tuple[Any, ...]] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or tuple(kwargs.values()))
        load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    tls_context.cache_clear()
    try:
        remotes = [make_remote() for _ in range(3)]
        assert len(loads) == 1 and certifi.where() in loads[0]
        ctx = tls_context()
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
        for remote in remotes:
            for sdk in (remote._create_client, remote._read_client):
                api = sdk._api_client
                assert api._websocket_ssl_ctx == {"ssl": ctx}
                assert api._async_client_session_request_args.get("ssl") is ctx
    finally:
        tls_context.cache_clear()
