"""Secrets the config names are never stored in the ledger, its files or result files, and never printed.

The remotes here are real: the google-genai SDK and the http remote talk to the bundled simulator over
loopback, whose `echo_key` fault answers with the credential the request carried quoted in its error
body (a careless front end); a signed webhook delivery goes through a real `reclaim receiver`. Every
step runs through real `reclaim` subprocesses with the secret in their environment. Afterwards the
secret appears nowhere: not in any row of any table (read from a fresh connection), not in the bytes
of the ledger, its WAL or its journal, not in a result file, not in anything the CLI printed; and
`[redacted:NAME]` is there instead, proving the secret came back and was replaced.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from ledger.clock import ManualClock
from ledger.config import load_config, parse_config
from ledger.db import connect
from ledger.errors import EXIT_HELD, EXIT_RESERVED_NOT_SENT
from ledger.redaction import MIN_SECRET_LENGTH, Redactor
from ledger.reservation import reserve
from ledger.simulator import Simulator

OP = "article.generate"
CLEANUP = "storage.cleanup"
API_KEY = "sk-test-SECRET-1234567890abcdef"
GEMINI_MARK = "[redacted:GEMINI_API_KEY]"
TOKEN_ENV = "RCLM_TEST_STORAGE_TOKEN"
TOKEN = "Bearer tok-SECRET-0f9e8d7c6b5a"
TOKEN_MARK = f"[redacted:{TOKEN_ENV}]"
WHSEC_ENV = "RCLM_TEST_WHSEC"
WHSEC = "whsec_" + base64.b64encode(b"reclaim-test-webhook-secret-24b").decode()
WHSEC_MARK = f"[redacted:{WHSEC_ENV}]"


def ledger_dump(ledger: Path) -> str:
    """Every row of every table, read on a fresh read-only connection, as one JSON text."""
    conn = connect(ledger, readonly=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        rows = {t: [dict(r) for r in conn.execute(f'SELECT * FROM "{t}"')] for t in tables}
    finally:
        conn.close()
    assert "events" in rows and "jobs" in rows
    return json.dumps(rows, default=str, ensure_ascii=False)


def assert_nowhere(secret: str, folder: Path, printed: list[str]) -> str:
    """The secret is in no table, no ledger file byte, no result file and no printed text; returns the dump."""
    dump = ledger_dump(folder / "reclaim.db")
    assert secret not in dump
    files = list(folder.glob("reclaim.db*"))
    assert folder / "reclaim.db" in files
    for path in files:  # the ledger, its WAL and shm, the outcome journal: byte for byte
        assert secret.encode() not in path.read_bytes(), path
    for path in (folder / "results").glob("*") if (folder / "results").exists() else []:
        assert secret not in path.read_text(encoding="utf-8"), path
    for i, text in enumerate(printed):
        assert secret not in text, f"printed output #{i} holds the secret"
    return dump


def test_redactor_replaces_every_named_secret_and_skips_short_or_unset_ones(tmp_path: Path) -> None:
    doc = {
        "remotes": {
            "g": {"kind": "gemini", "api_key_env": "K1", "webhook_secret_env": "W1"},
            "h": {"kind": "http", "url": "http://127.0.0.1:9/x", "header_env": {"Authorization": "H1", "X-Short": "S1"}},
        },
    }
    env = {"K1": "key-value-123456", "W1": "whsec_abcdefgh", "H1": 'Bearer a/b"c', "S1": "abc", "UNNAMED": "zzzzzzzzzz"}
    r = Redactor.from_config(parse_config(doc, base_dir=tmp_path), env)
    assert r.names() == ["H1", "K1", "W1"] and len(env["S1"]) < MIN_SECRET_LENGTH
    text = 'k=key-value-123456 w=whsec_abcdefgh h=Bearer a/b"c s=abc u=zzzzzzzzzz'
    assert r.redact(text) == "k=[redacted:K1] w=[redacted:W1] h=[redacted:H1] s=abc u=zzzzzzzzzz"
    # as a remote may quote it: inside JSON text, or URL-encoded
    assert r.redact(json.dumps({"h": env["H1"]})) == '{"h": "[redacted:H1]"}'
    assert r.redact("?auth=Bearer%20a%2Fb%22c") == "?auth=[redacted:H1]"
    value = {"key-value-123456": ["x key-value-123456", ("whsec_abcdefgh",), 7, None]}
    assert r.redact_value(value) == {"[redacted:K1]": ["x [redacted:K1]", ("[redacted:W1]",), 7, None]}
    assert not Redactor.from_config(parse_config(doc, base_dir=tmp_path), {}) and Redactor().redact(text) == text


@pytest.fixture
def keyed_sim() -> Iterator[Simulator]:
    """A simulator that accepts only API_KEY (as Google would): a request without it is refused."""
    s = Simulator(complete_after=0.0, api_key=API_KEY).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.mark.slow
def test_a_gemini_api_key_echoed_back_is_never_stored_or_printed(
    keyed_sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    ledger_path: Path, tmp_path: Path, run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    sim = keyed_sim
    write_config(make_config(base_url=sim.url))
    env = {"GEMINI_API_KEY": API_KEY}
    printed: list[str] = []

    def cli(*args: str, operator: str | None = None) -> Any:
        out = run_cli(*args, env=env, operator=operator)
        printed.extend((out.stdout, out.stderr))
        return out

    payload = json.dumps({"input": "hello"})
    # 1. A create answered 503 with the key in the body: unknown, held; the error is the body's message.
    sim.add_fault("echo_key", status=503)
    held = cli("submit", OP, "--payload", payload, "--job-id", "echo held")
    assert held.rc == EXIT_HELD, held.stderr
    assert GEMINI_MARK in held.stdout
    job = read_job(ledger_path, "echo held")
    assert job.state == "held" and GEMINI_MARK in job.last_error

    # 2. A job whose answer repeats the key: the result, and the result file, carry the mark instead.
    sim.add_fault("end_status", end_status="completed", text=f"the model repeated {API_KEY} verbatim")
    assert cli("submit", OP, "--payload", payload, "--job-id", "echo result").rc == 0
    # 3. A query whose GET is answered 403 with the key: the query event and the CLI's reply.
    sim.add_fault("echo_key", method="get", status=403)
    query = cli("query", "echo result", "--json", operator="bob")
    assert query.rc == 0, query.stderr
    assert GEMINI_MARK in json.loads(query.stdout)["error"]
    tick = cli("tick")
    assert tick.rc == 0, tick.stderr
    assert read_job(ledger_path, "echo result").state == "consumed"
    results = list((tmp_path / "results").glob("*.json"))
    assert len(results) == 1 and GEMINI_MARK in json.loads(results[0].read_text())["result"]["text"]

    # 4. A create answered 401 with the key: the remote is paused, its pause keeps the (redacted) error.
    sim.add_fault("echo_key", status=401)
    paused = cli("submit", OP, "--payload", payload, "--job-id", "echo paused")
    assert paused.rc == EXIT_RESERVED_NOT_SENT, paused.stdout + paused.stderr
    status = cli("status", "--json")
    assert GEMINI_MARK in json.loads(status.stdout)["paused_remotes"]["gemini"]["error"]

    for job_id in ("echo held", "echo result", "echo paused"):
        for extra in ((), ("--json",)):
            out = cli("show", job_id, *extra)
            assert out.rc == 0, out.stderr
    shown = cli("show", "echo held")
    assert GEMINI_MARK in shown.stdout
    for args in (("events", "--limit", "200"), ("events", "--limit", "200", "--json"), ("jobs", "held"),
                 ("jobs", "reserving", "--json"), ("status",), ("evidence", "echo result", "--json"),
                 ("notifications",), ("verify",)):
        out = cli(*args)
        assert out.rc == 0, f"{args}: {out.stderr}"

    dump = assert_nowhere(API_KEY, tmp_path, printed)
    assert dump.count(GEMINI_MARK) >= 5  # held error and reason, query event, result, pause
    assert sim.count("create") == 3  # nothing was sent twice on the way


def test_printing_replaces_a_secret_the_ledger_already_holds(
    config_path: Path, ledger_path: Path, clock: ManualClock, run_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    # A payload is stored as typed (it is what is sent); the CLI's last line of defence still hides the key.
    conn = connect(ledger_path)
    try:
        reserve(conn, load_config(config_path), OP, {"input": f"pasted {API_KEY} here"}, clock=clock,
                job_id="pasted")
    finally:
        conn.close()
    with_key = [run_cli(*args, env={"GEMINI_API_KEY": API_KEY})
                for args in (("show", "pasted"), ("show", "pasted", "--json"), ("jobs", "reserving", "--json"))]
    for out in with_key:
        assert out.rc == 0, out.stderr
        assert API_KEY not in out.stdout + out.stderr and GEMINI_MARK in out.stdout
    assert json.loads(with_key[1].stdout)["job"]["payload"] == {"input": f"pasted {GEMINI_MARK} here"}
    # Without the variable set there is no secret to know: the payload is shown as it is.
    bare = run_cli("show", "pasted", "--json", env={"GEMINI_API_KEY": ""})
    assert json.loads(bare.stdout)["job"]["payload"] == {"input": f"pasted {API_KEY} here"}


def test_an_http_header_secret_echoed_back_is_never_stored_or_printed(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    tmp_path: Path, run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    doc = make_config()
    doc["remotes"]["cleaner"] = {"kind": "http", "url": f"{sim.url}/cleanup",
                                 "lookup_url": f"{sim.url}/cleanup/{{handle}}?key={{idem_key}}",
                                 "timeout_seconds": 5, "header_env": {"Authorization": TOKEN_ENV}}
    doc["operations"][CLEANUP] = {"remote": "cleaner", "daily_quota": 10, "sink": str(tmp_path / "results")}
    write_config(doc)
    env = {TOKEN_ENV: TOKEN}
    printed: list[str] = []

    def cli(*args: str, operator: str | None = None) -> Any:
        out = run_cli(*args, env=env, operator=operator)
        printed.extend((out.stdout, out.stderr))
        return out

    sim.add_fault("echo_key", method="cleanup", status=503)
    held = cli("submit", CLEANUP, "--payload", json.dumps({"bucket": "b", "older_than_days": 30}),
               "--job-id", "clean echo", "--target", "bucket-b")
    assert held.rc == EXIT_HELD, held.stdout + held.stderr
    job = read_job(ledger_path, "clean echo", CLEANUP)
    assert job.state == "held" and TOKEN_MARK in job.last_error
    sim.add_fault("echo_key", method="cleanup_get", status=500)
    query = cli("query", "clean echo", "--json", operator="bob")
    assert query.rc == 0, query.stderr
    assert TOKEN_MARK in json.loads(query.stdout)["error"]
    for args in (("show", "clean echo"), ("show", "clean echo", "--json"), ("events", "--json"), ("jobs", "held")):
        assert cli(*args).rc == 0
    dump = assert_nowhere(TOKEN, tmp_path, printed)
    assert "tok-SECRET" not in dump and dump.count(TOKEN_MARK) >= 3
    assert sim.count("cleanup") == 1


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def test_a_webhook_secret_in_a_signed_delivery_is_never_stored_or_printed(
    make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path, tmp_path: Path,
    clock: ManualClock, run_cli: Callable[..., Any], start_cli: Callable[..., Any], free_port: Callable[[], int],
    wait_for: Callable[..., Any],
) -> None:
    doc = make_config()
    doc["remotes"]["gemini"]["webhook_secret_env"] = WHSEC_ENV
    config = write_config(doc)
    conn = connect(ledger_path)
    try:
        job = reserve(conn, load_config(config), OP, {"input": "x"}, clock=clock, job_id="hooked").job
    finally:
        conn.close()
    assert job is not None
    env = {WHSEC_ENV: WHSEC}
    port = free_port()
    proc = start_cli("receiver", "--port", str(port), env=env)
    wait_for(lambda: _listening(port) or proc.poll() is not None, timeout=20, what="the receiver listening")
    assert proc.poll() is None, proc.communicate(timeout=10)
    # A sender that put the secret into the delivery itself (id, status, a hint and webhook-id): signed, so accepted.
    body = json.dumps({"type": "interaction.completed",
                       "data": {"id": f"int-{WHSEC}", "status": f"completed {WHSEC}",
                                "user_metadata": {"idem": job.idem_key, "attempt": "1"}}})
    msg_id, when = f"msg_{WHSEC}", datetime.now(UTC)
    headers = {"content-type": "application/json", "webhook-id": msg_id,
               "webhook-timestamp": str(int(when.timestamp())),
               "webhook-signature": Webhook(WHSEC).sign(msg_id, when, body)}
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        client.request("POST", "/", body=body.encode(), headers=headers)
        answer = client.getresponse()
        assert answer.status == 202, answer.read()
    finally:
        client.close()
    proc.terminate()
    out, err = proc.communicate(timeout=10)
    printed = [out, err]
    for args in (("show", "hooked"), ("show", "hooked", "--json"), ("evidence", "--orphans", "--json"),
                 ("evidence", "--orphans"), ("events", "--json")):
        res = run_cli(*args, env=env)
        assert res.rc == 0, res.stderr
        printed += [res.stdout, res.stderr]
    dump = assert_nowhere(WHSEC, tmp_path, printed)
    assert dump.count(WHSEC_MARK) >= 2  # the evidence's handle, the delivery's webhook id
    # A delivery names only its interaction: recorded as evidence awaiting attribution by a worker pass.
    evidence = json.loads(run_cli("evidence", "--orphans", "--json", env=env).stdout)["evidence"]
    assert [e["handle"] for e in evidence] == [f"int-{WHSEC_MARK}"]


@pytest.fixture(autouse=True)
def _no_inherited_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process's own environment names none of these secrets."""
    for name in ("GEMINI_API_KEY", TOKEN_ENV, WHSEC_ENV):
        monkeypatch.delenv(name, raising=False)
