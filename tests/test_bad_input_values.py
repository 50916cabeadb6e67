"""Bad values never crash: payloads, undecodable arguments, header secrets, config numbers and URLs,
corrupt pages, a full disk at init, bad times stored or given, and out-of-range options.

Each case runs the real `reclaim` CLI and checks: the documented exit code, exactly one stderr line
`reclaim: error: ...` naming the thing, and a ledger left as it was (fingerprint or file digest).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_bad_input import assert_one_line_error

from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect
from ledger.errors import PayloadError
from ledger.reserve import check_json_value, reserve
from ledger.simulator import Simulator

OP = "article.generate"
GOOD_PAYLOAD = json.dumps({"input": "hello"})


# -- 1. payloads ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("payload", "needles"), [
    ('{"input": "\\ud800"}', ("payload", "$.input", "lone surrogate")),
    ('{"input": "x", "generation_config": {"\\udcff": 1}}', ("payload", "a key in $.generation_config",
                                                             "lone surrogate")),
    ('{"input": ' + "[" * 1500 + "]" * 1500 + "}", ("payload", "nested too deeply")),
    ('{"input": "x", "generation_config": {"seed": ' + "7" * 5000 + "}}", ("payload", "4,300 digits")),
    ('{"input": "x", "generation_config": {"seed": ' + "9" * 30 + "}}", ("payload", "$.generation_config.seed",
                                                                         "64 bits")),
    ('{"input": "x", "generation_config": {"temperature": NaN}}', ("payload", "nan", "finite")),
    ('{"input": "x", "generation_config": {"temperature": -Infinity}}', ("payload", "-inf", "finite")),
], ids=["lone-surrogate", "surrogate-key", "nested-1500", "int-5000-digits", "int-beyond-64-bits", "nan", "-inf"])
def test_an_unusable_payload_is_refused_naming_the_payload(
    payload: str, needles: tuple[str, ...], sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", payload, "--job-id", "p1")
    assert_one_line_error(r, 2, *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


def test_payload_values_are_checked_without_recursion() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(PayloadError, match="'input' is nested more than 64 levels deep"):
        check_json_value({"input": deep})
    check_json_value({"input": ["ok", 1, 2.5, None, True, {"k": [2**63 - 1, -(2**63 - 1)]}]})
    with pytest.raises(PayloadError, match=r"\$\.input\[1\]"):
        check_json_value({"input": ["ok", b"bytes"]})


# -- 2. undecodable arguments (argv bytes that are not UTF-8 arrive as lone surrogates) ----------------
BAD_BYTES = "bad-\udcff-\udcfe"  # os.fsencode gives b"bad-\xff-\xfe": not UTF-8


@pytest.mark.parametrize(("args", "env", "named"), [
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", BAD_BYTES], {}, "--job-id"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1", "--target", BAD_BYTES], {}, "--target"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1", "--operator", BAD_BYTES], {}, "--operator"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1"], {"RECLAIM_OPERATOR": BAD_BYTES},
     "RECLAIM_OPERATOR"),
    (["submit", OP, "--payload", '{"input": "' + BAD_BYTES + '"}', "--job-id", "j1"], {}, "--payload"),
    (["show", BAD_BYTES], {}, "argument JOB_ID"),
    (["assign", BAD_BYTES, "--owner", "bob", "--due", "2026-12-03T09:00Z"], {}, "argument JOB_ID"),
    (["status", "--ledger", f"/tmp/{BAD_BYTES}.db"], {}, "--ledger"),
], ids=["job-id", "target", "operator", "operator-env", "payload", "show", "assign", "ledger-path"])
def test_an_argument_that_is_not_utf8_is_refused_naming_it(
    args: list[str], env: dict[str, str], named: str, sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli(*args, env=env)
    assert_one_line_error(r, 2, named, "not valid UTF-8")
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


# -- 3. header values from the environment ------------------------------------------------------------------
CLEANUP = "storage.cleanup"
TOKEN_ENV = "RCLM_TEST_BAD_HEADER_TOKEN"


def _http_config(config_dict: dict[str, Any], sim: Simulator, write_config: Callable[..., Path]) -> Path:
    doc = dict(config_dict)
    doc["remotes"] = {**doc["remotes"], "cleaner": {
        "kind": "http", "url": f"{sim.url}/cleanup", "lookup_url": f"{sim.url}/cleanup/{{handle}}",
        "timeout_seconds": 5, "header_env": {"Authorization": TOKEN_ENV}}}
    doc["operations"] = {**doc["operations"], CLEANUP: {"remote": "cleaner", "daily_quota": 10}}
    return write_config(doc)


@pytest.mark.parametrize("secret", ["Bearer ключ-s3cret", "Bearer s3cret-\udcff", "Bearer s3cret\x01x"],
                         ids=["not-latin-1", "undecodable", "control-char"])
def test_a_header_value_no_http_header_can_carry_is_refused_before_anything_is_reserved(
    secret: str, sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config = _http_config(config_dict, sim, write_config)
    env = {TOKEN_ENV: secret}
    before = fingerprint(ledger_path)
    r = run_cli("submit", CLEANUP, "--payload", '{"bucket": "b"}', "--job-id", "h1", env=env)
    line = assert_one_line_error(r, 2, "remote cleaner", TOKEN_ENV, "Authorization", "cannot carry")
    assert "s3cret" not in r.stderr + r.stdout and "s3cret" not in line
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0

    # A job reserved earlier (by a process with a good token) is not claimed by a pass that cannot send it.
    conn = connect(ledger_path)
    try:
        reserve(conn, load_config(config), CLEANUP, {"bucket": "b"}, clock=ManualClock(1_796_126_400.0),
                job_id="h2")
    finally:
        conn.close()
    before = fingerprint(ledger_path)
    r = run_cli("tick", env=env)
    assert_one_line_error(r, 2, "remote cleaner", TOKEN_ENV, "Authorization")
    assert "s3cret" not in r.stderr + r.stdout
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0
