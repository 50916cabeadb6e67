"""`reclaim remotes probe NAME` against the bundled simulator: every assumption reclaim makes of a Gemini remote.

The probe sends one create (never retried) and one cancel, reads the interaction back, GETs an id that does not
exist, and with a webhook configured waits for `reclaim receiver` (the shipped command, its own process) to record
the delivery. The simulator counts every call; the ledger is fingerprinted before and after (the probe writes
nothing to it). One configuration makes an assumption fail (labels not echoed): the probe exits 13 naming it.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import EXIT_BAD_INPUT, EXIT_PROBE_FAILED
from ledger.probe import PROBE_KEY_PREFIX, error_shape, missing_id
from ledger.simulator import Simulator

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
ALWAYS = ("create_labels", "get_labels", "statuses", "cancel", "error_body")
WEBHOOK = ("delivery", "envelope", "signature")


def _rows(stdout: str) -> dict[str, dict[str, Any]]:
    return {a["key"]: a for a in json.loads(stdout)["assumptions"]}


def _webhook_config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
                    sim: Simulator) -> Path:
    doc = make_config(base_url=sim.url)
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    return write_config(doc)


@pytest.fixture
def receiver(start_cli: Callable[..., subprocess.Popen[str]], ledger_path: Path, sim: Simulator,
             make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path]) -> Iterator[str]:
    """`reclaim receiver` on a free port for the webhook config; the simulator's project webhook points at it."""
    config = _webhook_config(make_config, write_config, sim)
    proc = start_cli("receiver", "--port", "0", config=config, env={"RECLAIM_TEST_WHSEC": SECRET})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "receiver listening on" not in line:
        proc.kill()
        pytest.fail(f"the receiver did not start: {proc.communicate(timeout=10)[1]}")
    url = line.strip().rsplit(" ", 1)[-1]
    sim.configure(webhook_url=url, webhook_secret=SECRET)
    yield url
    proc.terminate()
    proc.communicate(timeout=10)


def test_every_assumption_holds_on_the_simulator_with_one_create_and_one_cancel(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    done = run_cli("remotes", "probe", "gemini", "--json")
    assert done.rc == 0, (done.stdout, done.stderr)
    doc = json.loads(done.stdout)
    rows = _rows(done.stdout)
    assert doc["ok"] is True and doc["failing"] == []
    assert doc["idem_key"].startswith(PROBE_KEY_PREFIX) and doc["handle"]
    for key in ALWAYS:
        assert rows[key]["verdict"] == "holds" and rows[key]["relied_on"] is True, rows[key]
    for key in WEBHOOK:  # no webhook configured: not relied on, and said so
        assert rows[key]["verdict"] == "unknown" and rows[key]["relied_on"] is False, rows[key]
        assert "not configured" in rows[key]["seen"]
    assert f"idem={doc['idem_key']}" in rows["create_labels"]["seen"]
    assert "interactions shape" in rows["error_body"]["seen"] and "HTTP 404" in rows["error_body"]["seen"]
    # One create and one cancel, both for the probe's own key; nothing else was created.
    assert sim.count("create") == 1 and sim.count("cancel") == 1
    assert sim.count("create", doc["idem_key"]) == 1 and sim.count("cancel", doc["idem_key"]) == 1
    created = sim.interactions()
    assert len(created) == 1 and created[0]["idem"] == doc["idem_key"] and created[0]["background"] is True
    assert fingerprint(ledger_path) == before  # nothing reserved, nothing written


def test_labels_not_echoed_exits_13_naming_the_assumption(
    sim: Simulator, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    sim.configure(echo_labels=False)
    done = run_cli("remotes", "probe", "gemini")
    assert done.rc == EXIT_PROBE_FAILED == 13, (done.stdout, done.stderr)
    assert "not holding, and this config relies on it: GET echoes labels" in done.stdout
    assert "the GET's reply carries no labels" in done.stdout
    table = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in done.stdout.splitlines()
             if line.count("│") >= 5}
    assert table["create accepted with labels"] == "holds" and table["GET echoes labels"] == "does not hold"
    assert table["webhook delivery reaches the receiver"] == "unknown"  # not configured, so not relied on
    assert sim.count("create") == 1 and sim.count("cancel") == 1  # never retried

    as_json = run_cli("remotes", "probe", "gemini", "--json")
    assert as_json.rc == EXIT_PROBE_FAILED
    doc = json.loads(as_json.stdout)
    assert doc["ok"] is False and doc["failing"] == ["GET echoes labels"]
    assert _rows(as_json.stdout)["create_labels"]["verdict"] == "holds"


def test_the_webhook_delivery_reaches_the_receiver_and_verifies(
    sim: Simulator, ledger_path: Path, receiver: str, run_cli: Callable[..., Any],
) -> None:
    done = run_cli("remotes", "probe", "gemini", "--json", "--wait", "30", env={"RECLAIM_TEST_WHSEC": SECRET})
    assert done.rc == 0, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    for key in (*ALWAYS, *WEBHOOK):
        assert rows[key]["verdict"] == "holds" and rows[key]["relied_on"] is True, rows[key]
    handle = json.loads(done.stdout)["handle"]
    assert f"data.id {handle}" in rows["envelope"]["seen"] and "version v1" in rows["envelope"]["seen"]
    assert "verified under gemini's secret" in rows["signature"]["seen"]
    assert "waiting up to 30 s for the webhook delivery" in done.stderr
    assert sim.count("create") == 1 and sim.count("cancel") == 1


def test_a_delivery_signed_with_another_secret_does_not_hold(
    sim: Simulator, ledger_path: Path, receiver: str, run_cli: Callable[..., Any],
) -> None:
    sim.configure(webhook_secret=OTHER_SECRET)  # the project webhook's secret is not the one reclaim holds
    done = run_cli("remotes", "probe", "gemini", "--json", "--wait", "4", env={"RECLAIM_TEST_WHSEC": SECRET})
    assert done.rc == EXIT_PROBE_FAILED, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    assert rows["delivery"]["verdict"] == "does not hold"
    assert rows["signature"]["verdict"] == "does not hold" and "bad_signature_or_stale" in rows["signature"]["seen"]
    assert json.loads(done.stdout)["failing"][0] == "webhook delivery reaches the receiver"


def test_no_receiver_running_the_delivery_does_not_hold_within_the_wait(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], run_cli: Callable[..., Any],
) -> None:
    config = _webhook_config(make_config, write_config, sim)
    done = run_cli("remotes", "probe", "gemini", "--wait", "0.5", "--json", config=config)
    assert done.rc == EXIT_PROBE_FAILED, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    assert json.loads(done.stdout)["failing"] == ["webhook delivery reaches the receiver",
                                                  "delivery envelope as documented",
                                                  "Standard Webhooks signature verifies"]
    assert "within 0.5 s: is `reclaim receiver` running on this ledger" in rows["delivery"]["seen"]
    assert "interaction.requires_action" in rows["delivery"]["seen"]
    assert rows["signature"]["verdict"] == "unknown" and rows["envelope"]["verdict"] == "unknown"
    assert all(rows[key]["verdict"] == "holds" for key in ALWAYS)


@pytest.mark.parametrize("name, words", [
    ("nowhere", "no remote named 'nowhere' in the config (declared: gemini, store)"),
    ("store", "remote 'store' is of kind 'http'; the probe is for gemini remotes only"),
])
def test_an_unknown_or_http_remote_is_refused_and_nothing_is_sent(
    name: str, words: str, sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], run_cli: Callable[..., Any],
) -> None:
    doc = make_config(base_url=sim.url)
    doc["remotes"]["store"] = {"kind": "http", "url": f"{sim.url}/v1/cleanups"}
    config = write_config(doc)
    done = run_cli("remotes", "probe", name, config=config)
    assert done.rc == EXIT_BAD_INPUT, (done.stdout, done.stderr)
    assert words in done.stderr and "nothing was sent" in done.stderr
    assert sim.count(None) == 0


def test_remotes_without_a_subcommand_is_the_read_only_table(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    done = run_cli("remotes", "--json")
    assert done.rc == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)["remotes"]] == ["gemini"]
    assert sim.count(None) == 0


def test_error_shapes_and_a_missing_id_shaped_like_the_handle() -> None:
    assert error_shape({"error": {"code": "not_found", "message": "no such interaction"}}) == "interactions"
    assert error_shape({"error": {"code": 404, "status": "NOT_FOUND", "message": "x"}}) == "google.rpc"
    assert error_shape({"error": {"code": 404, "message": "x"}}) is None
    assert error_shape({"message": "x"}) is None and error_shape("x") is None
    handle = "v1_" + "a0" * 20
    other = missing_id(handle)
    assert other != handle and len(other) == len(handle) and other[:-8] == handle[:-8]
    assert missing_id(None).startswith("v1_probe-missing-")


def test_a_refused_create_is_not_retried_and_nothing_is_cancelled(
    sim: Simulator, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    done = run_cli("remotes", "probe", "gemini", "--json", env={"GEMINI_API_KEY": "not-the-key"})
    assert done.rc == EXIT_PROBE_FAILED, (done.stdout, done.stderr)
    rows = _rows(done.stdout)
    assert rows["create_labels"]["verdict"] == "does not hold"
    assert rows["create_labels"]["seen"].startswith("remote_unusable: HTTP 401 AUTHENTICATION")
    assert "not-the-key" not in done.stdout  # the key the error body may quote back is redacted
    for key in ("get_labels", "statuses", "cancel"):
        assert rows[key]["verdict"] == "unknown", rows[key]
    assert json.loads(done.stdout)["handle"] is None
    assert sim.count("create") == 1 and sim.count("cancel") == 0 and sim.count("get") == 1  # the 404 probe only
