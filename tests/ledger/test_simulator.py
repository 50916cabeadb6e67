"""Tests for ledger.simulator, driven by the real google-genai SDK over loopback.

The exception classes asserted here are the ones google-genai 3.6.1 (httpx2
backend) raises against each simulated fault; they document what reclaim has
to classify as "maybe sent" versus "not sent".
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import _interactions as gi
from google.genai import types

from ledger.simulator import Simulator, is_loopback_host

ROOT = Path(__file__).resolve().parents[2]
MODEL = "gemini-sim"
KEY = "simulator"  # the key the simulator accepts by default


# -- helpers --------------------------------------------------------------------
def wait_for(pred: Callable[[], Any], timeout: float = 5.0, step: float = 0.01) -> Any:
    """Poll ``pred`` until truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not met within {timeout}s")
        time.sleep(step)


def make_client(
    sim: Simulator,
    *,
    attempts: int | None = 1,
    timeout_ms: int = 3000,
    retry: types.HttpRetryOptions | None = None,
) -> genai.Client:
    """A real SDK client pointed at the simulator (attempts=None: SDK default retries)."""
    if retry is None and attempts is not None:
        retry = types.HttpRetryOptions(attempts=attempts)
    return genai.Client(
        api_key=KEY,
        http_options=types.HttpOptions(
            base_url=sim.url, retry_options=retry, timeout=timeout_ms
        ),
    )


def create(client: genai.Client, idem: str, text: str = "hi") -> Any:
    return client.interactions.create(
        model=MODEL, input=text, background=True, labels={"idem": idem}
    )


def cause_names(exc: BaseException) -> list[str]:
    """Class names along the ``__cause__`` chain, outermost first."""
    names: list[str] = []
    cur: BaseException | None = exc
    while cur is not None:
        names.append(type(cur).__name__)
        cur = cur.__cause__
    return names


def call(
    sim: Simulator,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 3.0,
) -> tuple[int, Any]:
    """Plain urllib request (with the API key); returns (status, parsed JSON) even for HTTP errors."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    req.add_header("x-goog-api-key", KEY)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator().start() as s:
        yield s


# -- happy path --------------------------------------------------------------------
def test_create_get_cancel_delete_count_once_each(sim: Simulator) -> None:
    sim.configure(complete_after=30.0)
    client = make_client(sim)
    created = create(client, "abc")
    assert created.id and created.status == "in_progress"
    assert sim.count("create") == 1 and sim.count("create", idem="abc") == 1

    got = client.interactions.get(id=created.id)
    assert got.status == "in_progress" and got.labels == {"idem": "abc"}
    cancelled = client.interactions.cancel(id=created.id)
    assert cancelled.status == "cancelled"
    client.interactions.delete(id=created.id)

    calls = sim.calls()
    assert calls["total"] == 4
    assert calls["by_method"] == {
        "create": 1,
        "get": 1,
        "cancel": 1,
        "delete": 1,
        "cleanup": 0,
        "cleanup_get": 0,
    }
    assert calls["by_idem"]["abc"]["get"] == 1
    assert sim.interactions() == []
    with pytest.raises(gi.NotFoundError) as err:
        client.interactions.get(id=created.id)
    assert err.value.status_code == 404
    assert sim.count("get") == 2


def test_complete_after_is_respected(sim: Simulator) -> None:
    sim.configure(complete_after=0.3)
    client = make_client(sim)
    started = time.monotonic()
    created = create(client, "slowdone", "ping")
    assert created.status == "in_progress"

    def completed() -> Any:
        got = client.interactions.get(id=created.id)
        return got if got.status == "completed" else None

    done = wait_for(completed, timeout=5.0, step=0.05)
    assert time.monotonic() - started >= 0.3
    assert done.output_text == "simulated reply to: ping"
    assert sim.count("create") == 1 and sim.count("get") >= 2


def test_ids_unique_and_any_version_prefix(sim: Simulator) -> None:
    body = {"model": MODEL, "input": "x", "background": True}
    ids = {
        call(sim, "POST", f"/{v}/interactions", body)[1]["id"]
        for v in ("v1", "v1beta", "v1alpha")
    }
    assert len(ids) == 3
    some = min(ids)
    status, got = call(sim, "GET", f"/v1beta/interactions/{some}?stream=false")
    assert status == 200 and got["status"] == "completed"
    assert got["steps"] == [  # a GET starts with the caller's input, as the API answers
        {"type": "user_input", "content": [{"type": "text", "text": "x"}]},
        {"type": "model_output", "content": [{"type": "text", "text": "simulated reply to: x"}]},
    ]
    assert call(sim, "GET", "/v1/nothing-here")[0] == 404
    assert sim.count(None) == 4  # unrouted paths are not counted


def test_force_status_failed(sim: Simulator) -> None:
    sim.configure(complete_after=30.0)
    client = make_client(sim)
    created = create(client, "f")
    sim.force_status(created.id, "failed")
    assert client.interactions.get(id=created.id).status == "failed"


# -- the SDK retry trap ----------------------------------------------------------------
def test_default_retries_send_five_posts_attempts_one_sends_one(sim: Simulator) -> None:
    # retry_after only shortens the SDK's backoff sleeps (Retry-After header).
    sim.add_fault("status", count=10, retry_after=0.01)
    with pytest.raises(gi.InternalServerError) as err:
        create(make_client(sim, attempts=None), "trap")
    assert err.value.status_code == 503
    assert sim.count("create", idem="trap") == 5  # one call, five POSTs
    assert sim.faults()[0]["count"] == 5

    sim.reset()
    sim.add_fault("status", count=10, retry_after=0.01)
    with pytest.raises(gi.InternalServerError):
        create(make_client(sim, attempts=1), "trap")
    assert sim.count("create", idem="trap") == 1
    assert sim.interactions() == []


def test_connection_failures_are_not_retried_even_with_default_retries(
    sim: Simulator,
) -> None:
    # attempts left at the SDK default (5); only the backoff is shortened
    fast = types.HttpRetryOptions(initial_delay=0.01, max_delay=0.02)
    sim.add_fault("complete_lose_reply", count=10)
    with pytest.raises(gi.APIConnectionError):
        create(make_client(sim, attempts=None, retry=fast), "lost")
    assert sim.count("create", idem="lost") == 1
    assert [i["status"] for i in sim.find_by_idem("lost")] == ["completed"]


# -- each fault kind -------------------------------------------------------------------
def test_drop_before_accept(sim: Simulator) -> None:
    sim.add_fault("drop_before_accept")
    with pytest.raises(gi.APIConnectionError) as err:
        create(make_client(sim), "drop")
    assert not isinstance(err.value, gi.APITimeoutError)
    assert cause_names(err.value)[:3] == [
        "APIConnectionError",
        "RemoteProtocolError",  # httpx2
        "RemoteProtocolError",  # httpcore2
    ]
    assert sim.count("create", idem="drop") == 1
    assert sim.find_by_idem("drop") == []
    # the retry goes through and records attempt 2
    again = create(make_client(sim), "drop")
    assert [(i["id"], i["attempt"]) for i in sim.find_by_idem("drop")] == [
        (again.id, 2)
    ]


def test_reply_id_names_another_id_in_the_reply_only(sim: Simulator) -> None:
    sim.add_fault("reply_id", text="v1_not-its-own")
    got = create(make_client(sim), "odd-id")
    stored = sim.find_by_idem("odd-id")
    assert got.id == "v1_not-its-own" and len(stored) == 1 and stored[0]["id"] != got.id
    assert sim.count("create", idem="odd-id") == 1
    for bad in ({}, {"method": "get"}):
        with pytest.raises(ValueError, match="reply_id"):
            sim.add_fault("reply_id", **({"text": "x"} if bad else {}), **bad)
    with pytest.raises(ValueError, match="reply_id needs the id to name"):
        sim.set_fault_rates({"reply_id": 0.5})


def test_accept_then_hang_times_out_but_interaction_exists(sim: Simulator) -> None:
    sim.configure(complete_after=0.2)
    sim.add_fault("accept_then_hang")
    started = time.monotonic()
    with pytest.raises(gi.APITimeoutError) as err:
        create(make_client(sim, timeout_ms=500), "hang")
    assert 0.4 <= time.monotonic() - started < 20  # the hang would hold 120 s; margin for a loaded machine
    assert isinstance(err.value, gi.APIConnectionError)
    assert cause_names(err.value)[:3] == [
        "APITimeoutError",
        "ReadTimeout",
        "ReadTimeout",
    ]
    assert sim.count("create", idem="hang") == 1
    stored = sim.find_by_idem("hang")
    assert len(stored) == 1 and stored[0]["attempt"] == 1
    client = make_client(sim)
    wait_for(lambda: client.interactions.get(id=stored[0]["id"]).status == "completed")


def test_complete_lose_reply(sim: Simulator) -> None:
    sim.configure(complete_after=30.0)
    sim.add_fault("complete_lose_reply")
    with pytest.raises(gi.APIConnectionError) as err:
        create(make_client(sim), "lose", "q")
    assert cause_names(err.value)[:2] == ["APIConnectionError", "RemoteProtocolError"]
    (stored,) = sim.find_by_idem("lose")
    assert stored["status"] == "completed"
    client = make_client(sim)  # keep a reference: a dropped Client closes its pool
    got = client.interactions.get(id=stored["id"])
    assert got.status == "completed" and got.output_text == "simulated reply to: q"


@pytest.mark.parametrize(
    ("status", "exc"),
    [
        (503, gi.InternalServerError),
        (500, gi.InternalServerError),
        (429, gi.RateLimitError),
        (409, gi.ConflictError),
        (400, gi.BadRequestError),
    ],
)
def test_status_fault(sim: Simulator, status: int, exc: type[Exception]) -> None:
    sim.add_fault("status", status=status)
    with pytest.raises(exc) as err:
        create(make_client(sim), "st")
    assert isinstance(err.value, gi.APIStatusError)
    assert err.value.status_code == status
    assert sim.count("create", idem="st") == 1
    assert sim.interactions() == []


def test_slow_fault(sim: Simulator) -> None:
    sim.add_fault("slow", seconds=0.3)
    started = time.monotonic()
    create(make_client(sim), "slow1")
    assert time.monotonic() - started >= 0.3
    # slower than the client timeout: SDK times out, the create still lands
    sim.add_fault("slow", seconds=0.5)
    with pytest.raises(gi.APITimeoutError):
        create(make_client(sim, timeout_ms=200), "slow2")
    wait_for(lambda: sim.find_by_idem("slow2"))


def test_match_idem_method_and_count(sim: Simulator) -> None:
    sim.add_fault("status", match_idem="target", count=2)
    client = make_client(sim)
    create(client, "other")  # not matched
    for _ in range(2):
        with pytest.raises(gi.InternalServerError):
            create(client, "target")
    ok = create(client, "target")
    assert sim.interaction(ok.id)["attempt"] == 3
    assert sim.faults() == []

    sim.add_fault("drop_before_accept", method="get", match_idem="target")
    with pytest.raises(gi.APIConnectionError):
        client.interactions.get(id=ok.id)
    assert client.interactions.get(id=ok.id).status == "completed"
    sim.add_fault("status", method="cancel", status=500)
    with pytest.raises(gi.InternalServerError):
        client.interactions.cancel(id=ok.id)
    assert sim.calls()["by_idem"]["target"] == {
        "create": 3,
        "get": 2,
        "cancel": 1,
        "delete": 0,
        "cleanup": 0,
        "cleanup_get": 0,
    }


def test_stop_returns_promptly_while_request_hangs() -> None:
    sim = Simulator().start()
    sim.add_fault("accept_then_hang")
    client = make_client(sim, timeout_ms=30_000)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            create(client, "stuck")
        except Exception as exc:
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_for(lambda: sim.find_by_idem("stuck"))
    started = time.monotonic()
    sim.stop()
    assert time.monotonic() - started < 20  # the hang would hold 120 s
    worker.join(timeout=5.0)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], gi.APIConnectionError)


def test_random_fault_rates_are_seeded() -> None:
    def outcomes(seed: int) -> list[str]:
        with Simulator().start() as s:
            s.set_fault_rates({"status": 0.5}, seed=seed)
            client = make_client(s)
            result = []
            for i in range(12):
                try:
                    create(client, f"r{i}")
                    result.append("ok")
                except gi.InternalServerError:
                    result.append("503")
            return result

    first = outcomes(7)
    assert first == outcomes(7)
    assert "ok" in first and "503" in first


def test_cleanup_fault_rates_draw_apart_from_the_creates() -> None:
    def outcomes(seed: int, with_cleanup_rates: bool) -> tuple[list[int], list[str]]:
        with Simulator().start() as s:
            s.set_fault_rates({"status": 0.5}, seed=seed)
            if with_cleanup_rates:
                s.set_fault_rates({"status": 0.5}, seed=seed, method="cleanup")
            cleanups = [call(s, "POST", "/cleanup", {"bucket": "a"}, {"Idempotency-Key": f"c{i}"})[0]
                        for i in range(12)]
            creates = []
            client = make_client(s)
            for i in range(12):
                try:
                    create(client, f"r{i}")
                    creates.append("ok")
                except gi.InternalServerError:
                    creates.append("503")
            return cleanups, creates

    cleanups, creates = outcomes(7, True)
    assert set(cleanups) == {202, 503} and cleanups == outcomes(7, True)[0]
    plain_cleanups, plain_creates = outcomes(7, False)
    assert plain_cleanups == [202] * 12  # without rates of their own, clean-ups draw no fault
    assert creates == plain_creates  # the clean-ups' draws change no create's
    with Simulator().start() as s, pytest.raises(ValueError, match="unknown method"):
        s.set_fault_rates({"status": 0.1}, method="get")


# -- cleanup API -------------------------------------------------------------------------
def test_cleanup_dedupes_by_key(sim: Simulator) -> None:
    payload = {"bucket": "a", "older_than_days": 30}
    s1, j1 = call(sim, "POST", "/cleanup", payload, {"Idempotency-Key": "K1"})
    s2, j2 = call(sim, "POST", "/cleanup", payload, {"Idempotency-Key": "K1"})
    assert (s1, s2) == (202, 200)
    assert j1["id"] == j2["id"] and j1["key"] == "K1"
    assert j1["status"] == "completed" and j1["selected"] == j1["deleted"] == 100
    assert len(sim.cleanup_jobs()) == 1
    assert sim.count("cleanup", idem="K1") == 2


def test_cleanup_without_dedupe_creates_duplicates(sim: Simulator) -> None:
    assert call(sim, "POST", "/_sim/config", {"dedupes_by_key": False})[0] == 200
    _, j1 = call(sim, "POST", "/cleanup", {"bucket": "a"}, {"Idempotency-Key": "K"})
    _, j2 = call(sim, "POST", "/cleanup", {"bucket": "a"}, {"Idempotency-Key": "K"})
    assert j1["id"] != j2["id"] and j2["attempt"] == 2
    assert len(sim.cleanup_jobs()) == 2
    _, latest = call(sim, "GET", "/cleanup?key=K")
    assert latest["id"] == j2["id"]


def test_cleanup_progress_lookup_and_counts(sim: Simulator) -> None:
    call(sim, "POST", "/_sim/config", {"cleanup_seconds": 0.4})
    _, job = call(sim, "POST", "/cleanup", {"bucket": "b"}, {"Idempotency-Key": "P"})
    assert job["status"] in ("accepted", "running") and job["deleted"] < 100
    seen: list[int] = []

    def finished() -> bool:
        _, cur = call(sim, "GET", f"/cleanup/{job['id']}")
        seen.append(cur["deleted"])
        return cur["status"] == "completed"

    wait_for(finished, timeout=5.0, step=0.05)
    assert seen == sorted(seen) and seen[-1] == 100
    status, by_key = call(sim, "GET", "/cleanup?key=P")
    assert status == 200 and by_key["id"] == job["id"]
    assert call(sim, "GET", "/cleanup/cln-999")[0] == 404
    assert call(sim, "GET", "/cleanup?key=nope")[0] == 404
    assert sim.count("cleanup", idem="P") == 1
    assert sim.count("cleanup_get", idem="P") == len(seen) + 1
    assert sim.count("cleanup_get") == len(seen) + 3


def test_cleanup_faults(sim: Simulator) -> None:
    hdr = {"Idempotency-Key": "F"}
    sim.add_fault("drop_before_accept", method="cleanup")
    with pytest.raises(http.client.RemoteDisconnected):
        call(sim, "POST", "/cleanup", {}, hdr)
    assert sim.cleanup_jobs() == []

    sim.add_fault("status", method="cleanup", status=503)
    assert call(sim, "POST", "/cleanup", {}, hdr)[0] == 503
    assert sim.cleanup_jobs() == []

    sim.add_fault("accept_then_hang", method="cleanup")
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        call(sim, "POST", "/cleanup", {}, hdr, timeout=0.3)
    assert [j["key"] for j in sim.cleanup_jobs()] == ["F"]

    sim.add_fault("complete_lose_reply", method="cleanup")
    with pytest.raises(http.client.RemoteDisconnected):
        call(sim, "POST", "/cleanup", {}, {"Idempotency-Key": "G"})
    (job,) = [j for j in sim.cleanup_jobs() if j["key"] == "G"]
    assert job["status"] == "completed"

    sim.add_fault("status", method="cleanup_get", status=500, match_idem="G")
    assert call(sim, "GET", "/cleanup?key=G")[0] == 500
    assert call(sim, "GET", "/cleanup?key=G")[0] == 200
    assert sim.count("cleanup", idem="F") == 3


# -- control endpoints -------------------------------------------------------------------
def test_control_endpoints(sim: Simulator) -> None:
    client = make_client(sim)
    create(client, "c1")
    status, calls = call(sim, "GET", "/_sim/calls")
    assert status == 200 and calls == sim.calls() and calls["total"] == 1

    assert (
        call(sim, "POST", "/_sim/faults", {"kind": "status", "status": 429})[0] == 200
    )
    _, listed = call(sim, "GET", "/_sim/faults")
    assert listed["faults"][0]["kind"] == "status"
    with pytest.raises(gi.RateLimitError):
        create(client, "c2")

    assert call(sim, "POST", "/_sim/faults", {"kind": "nope"})[0] == 400
    assert call(sim, "POST", "/_sim/faults", {"rates": {"bogus": 0.1}})[0] == 400
    assert (
        call(sim, "POST", "/_sim/faults", {"rates": {"status": 1.0}, "seed": 3})[0]
        == 200
    )
    with pytest.raises(gi.InternalServerError):
        create(client, "c3")
    assert call(sim, "DELETE", "/_sim/faults")[0] == 200
    create(client, "c4")

    _, inter = call(sim, "GET", "/_sim/interactions")
    assert [i["idem"] for i in inter["interactions"]] == ["c1", "c4"]
    assert call(sim, "POST", "/_sim/reset")[0] == 200
    assert sim.calls()["total"] == 0 and sim.interactions() == []
    assert call(sim, "GET", "/_sim/interactions")[1] == {"interactions": []}


# -- CLI ---------------------------------------------------------------------------------
def test_cli_prints_url_serves_and_exits_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ledger.simulator",
            "--port",
            "0",
            "--complete-after",
            "0",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("simulator listening on http://127.0.0.1:")
        url = line.rsplit(" ", 1)[1]
        body = json.dumps({"model": MODEL, "input": "x", "background": True}).encode()
        req = urllib.request.Request(
            f"{url}/v1/interactions", data=body, method="POST", headers={"x-goog-api-key": KEY}
        )
        with urllib.request.urlopen(req, timeout=3) as resp:
            assert json.loads(resp.read())["status"] == "in_progress"  # a background create, as documented
        with urllib.request.urlopen(f"{url}/_sim/calls", timeout=3) as resp:
            assert json.loads(resp.read())["by_method"]["create"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_non_loopback_host_refused() -> None:
    assert is_loopback_host("127.0.0.1") and is_loopback_host("127.9.9.9")
    assert is_loopback_host("::1") and is_loopback_host("localhost")
    assert not is_loopback_host("0.0.0.0") and not is_loopback_host("10.0.0.1")
    with pytest.raises(ValueError, match="non-loopback"):
        Simulator(host="0.0.0.0")
    proc = subprocess.run(
        [sys.executable, "-m", "ledger.simulator", "--host", "0.0.0.0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        check=False,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 2 and "non-loopback" in proc.stderr
