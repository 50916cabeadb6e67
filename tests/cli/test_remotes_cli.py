"""`reclaim remotes`: what each remote can answer, from the config and the ledger, on SQLite and PostgreSQL.

A Gemini remote (lookup by handle only, webhooks configured, record retention declared) receives a signed
webhook delivery through the receiver's own verification; an http remote that can be searched by key and
honours the idem key is paused by two refusals. The command's JSON and table are read back; no remote is
called by it (the simulator counts).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from ledger.clock import SystemClock
from ledger.config import Config, RemoteConfig, load_config
from ledger.db import connect, write_tx
from ledger.model import JobKey
from ledger.receiver import receive
from ledger.remote_answers import GEMINI_CAPABILITIES, capabilities_of
from ledger.remote_health import record_refusal
from ledger.reservation import reserve
from ledger.simulator import Simulator

OP = "article.generate"
HTTP_OP = "storage.cleanup"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def _config(sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
            **gemini: Any) -> tuple[Path, Config]:
    doc = make_config(base_url=sim.url)
    doc["remotes"]["gemini"].update(gemini)
    doc["remotes"]["store"] = {"kind": "http", "url": f"{sim.url}/v1/cleanups",
                               "lookup_url": f"{sim.url}/v1/cleanups?idem={{idem_key}}", "dedupes_by_key": True}
    doc["operations"][HTTP_OP] = {"remote": "store", "daily_quota": 10, "sink": "results"}
    path = write_config(doc)
    return path, load_config(path)


def _deliver(conn: Any, cfg: Config, handle: str) -> int:
    body = json.dumps({"type": "interaction.completed", "version": "v1", "timestamp": datetime.now(UTC).isoformat(),
                       "data": {"id": handle}})
    now = datetime.now(UTC)
    msg_id = f"msg_{secrets.token_hex(8)}"
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(SECRET).sign(msg_id, now, body)}
    return receive(conn, cfg, {"gemini": SECRET}, body.encode(), headers, clock=SystemClock()).status


def test_remotes_says_what_each_remote_can_answer(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[..., str],
) -> None:
    config, cfg = _config(sim, make_config, write_config, webhook_secret_env="RECLAIM_TEST_WHSEC", keeps_records_days=2)
    conn = connect(ledger_path)
    assert _deliver(conn, cfg, "interactions/one") == 202  # verified, recorded as (orphan) evidence
    res = reserve(conn, cfg, HTTP_OP, {"bucket": "a"}, clock=SystemClock(), job_id="clean-a")
    assert res.outcome == "reserved"
    now = SystemClock().now()
    for _ in range(2):  # paused by the first refusal; the second is a refused probe
        with write_tx(conn):
            record_refusal(conn, cfg, "store", JobKey("clean-a", HTTP_OP), reason="bad key", error="401", now=now)
    conn.close()
    before = fingerprint(ledger_path)
    calls = sim.count()

    done = run_cli("remotes", "--json", ledger=ledger_path, config=config, env={"RECLAIM_TEST_WHSEC": SECRET})
    assert done.rc == 0, done.stderr
    got = {r["name"]: r for r in json.loads(done.stdout)["remotes"]}
    gemini, store = got["gemini"], got["store"]
    assert (gemini["lookup"], gemini["dedupes_by_key"], gemini["webhooks"]) == ("by handle only", False, "verified")
    assert gemini["keeps_records_days"] == 2 and gemini["paused"] is False and gemini["last_webhook_at"] is not None
    assert gemini["operations"] == [OP]
    assert (store["lookup"], store["dedupes_by_key"], store["webhooks"]) == ("by key", True, "not configured")
    assert store["paused"] is True and store["pause_reason"] == "bad key" and store["keeps_records_days"] is None
    assert store["next_probe_at"] == pytest.approx(now + cfg.policy.remote_probe_seconds)
    assert store["last_probe_at"] == pytest.approx(now)

    table = run_cli("remotes", ledger=ledger_path, config=config, env={"COLUMNS": "80"})
    assert table.rc == 0, table.stderr
    assert "by handle only" in table.stdout and "2 days" in table.stdout and "since" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    assert fingerprint(ledger_path) == before and sim.count() == calls  # read-only, and no remote was asked


def test_remotes_without_webhooks_or_a_verified_one(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    config, _ = _config(sim, make_config, write_config, webhook_secret_env="RECLAIM_TEST_WHSEC")
    done = run_cli("remotes", "--json", ledger=ledger_path, config=config)
    got = {r["name"]: r for r in json.loads(done.stdout)["remotes"]}
    assert got["gemini"]["webhooks"] == "configured, none verified yet"
    assert got["gemini"]["last_answer_at"] is None and got["store"]["paused"] is False


@pytest.mark.parametrize("value", ["0", "-1", "36501", '"two"', "1.5"])
def test_a_bad_keeps_records_days_is_refused_naming_the_key(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], value: str,
) -> None:
    config, _ = _config(sim, make_config, write_config)
    text = config.read_text(encoding="utf-8").replace("[remotes.gemini]\n", f"[remotes.gemini]\nkeeps_records_days = {value}\n")
    config.write_text(text, encoding="utf-8")
    done = run_cli("remotes", ledger=ledger_path, config=config)
    assert done.rc == 2 and "keeps_records_days" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_capabilities_shown_are_the_adapters_own(sim: Simulator) -> None:
    from ledger.remotes.gemini import GeminiRemote
    from ledger.remotes.http import HttpRemote

    assert GEMINI_CAPABILITIES == GeminiRemote.capabilities
    for lookup, dedupes in [(f"{sim.url}/x/{{handle}}", False), (f"{sim.url}/x?k={{idem_key}}", True), (None, False)]:
        rc = RemoteConfig(name="h", kind="http", url=f"{sim.url}/x", lookup_url=lookup, dedupes_by_key=dedupes)
        assert capabilities_of(rc) == HttpRemote(rc).capabilities


def test_what_building_a_remote_would_refuse_is_known_without_building_it(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`build_refusal` (what the screens say instead of building the adapter) refuses exactly what the adapters do."""
    from ledger.errors import ConfigError
    from ledger.remotes import build_refusal
    from ledger.remotes.gemini import GeminiRemote
    from ledger.remotes.http import HttpRemote

    monkeypatch.delenv("NO_SUCH_KEY_FOR_TEST", raising=False)
    keyless = RemoteConfig(name="g", kind="gemini", api_key_env="NO_SUCH_KEY_FOR_TEST")
    with pytest.raises(ConfigError) as refused:
        GeminiRemote(keyless)
    assert build_refusal(keyless) == str(refused.value)
    assert build_refusal(RemoteConfig(name="g", kind="gemini", api_key_env="NO_SUCH_KEY_FOR_TEST",
                                      base_url=sim.url)) is None  # the simulator needs no key
    monkeypatch.setenv("NO_SUCH_KEY_FOR_TEST", "k")
    assert build_refusal(keyless) is None
    headless = RemoteConfig(name="h", kind="http", url=f"{sim.url}/x", header_env={"Authorization": "NO_SUCH_VAR_T"})
    monkeypatch.delenv("NO_SUCH_VAR_T", raising=False)
    with pytest.raises(ConfigError) as refused:
        HttpRemote(headless)
    assert build_refusal(headless) == str(refused.value)
    assert build_refusal(RemoteConfig(name="h", kind="http", url=f"{sim.url}/x")) is None
