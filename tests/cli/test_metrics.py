"""`reclaim metrics`: each figure driven by a real scenario, read back over HTTP from `/metrics` (or printed once).

The scenarios are the recovery paths themselves, through the ledger API and the CLI with the loopback
simulator as the remote: a stale send recovered and a stale worker's write fenced, an outcome journaled while
the ledger refused it and replayed, a notification delivered late and one left uncertain, a webhook delivery
verified and resolving a hold and one refused. Remote calls are counted by the simulator; the figures are read
by a separate `reclaim metrics` process, which only reads the ledger. Runs on SQLite; the counting scenarios
also run on PostgreSQL (`both_backends`).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from webhook_receiver import WebhookReceiver

from ledger import journal, triage
from ledger.clock import ManualClock, SystemClock, parse_time
from ledger.config import Config, load_config
from ledger.db import connect
from ledger.dispatch import dispatch_outbox
from ledger.leases import claim_for_send
from ledger.model import JobKey, idem_key
from ledger.remotes import remote_for
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, record_send_outcome, submit_now, tick

OP = "article.generate"
T0 = parse_time("2026-12-01T12:00:00Z")
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition by (name, labels)."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """One sample's value (None when the exposition has no such sample)."""
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def serve_metrics(start_cli: Callable[..., subprocess.Popen[str]]) -> Callable[..., str]:
    """Start `reclaim metrics --listen 127.0.0.1:0` (keywords as start_cli) and return its /metrics URL."""

    def start(**kw: Any) -> str:
        proc = start_cli("metrics", "--listen", "127.0.0.1:0", **kw)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "metrics listening on" not in line:
            proc.kill()
            pytest.fail(f"reclaim metrics did not start: {line!r} {proc.communicate(timeout=10)}")
        return line.strip().rsplit(" ", 1)[-1]

    return start


def scrape(url: str) -> Samples:
    """GET /metrics and parse it."""
    with urllib.request.urlopen(url, timeout=60) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=")
        return parse(reply.read().decode("utf-8"))


def _config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], **extra: Any) -> tuple[
        Path, Config]:
    doc = make_config(**extra.pop("base", {}))
    doc.update(extra)
    path = write_config(doc)
    return path, load_config(path)


@pytest.mark.both_backends
def test_a_stale_send_recovered_a_fenced_write_and_a_persons_decision_are_counted(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    clock: ManualClock, serve_metrics: Callable[..., str],
) -> None:
    config, cfg = _config(make_config, write_config)
    key = JobKey("fence-me", OP)
    conn = connect(ledger_path)
    assert reserve(conn, cfg, OP, {"input": "fence"}, clock=clock, job_id=key.job_id).outcome == "reserved"
    # Worker A claims the job and its send goes out, then A stalls before recording it ...
    conn_a = connect(ledger_path)
    claim_a = claim_for_send(conn_a, cfg, key, owner="worker-A", now=clock.now())
    assert claim_a is not None
    outcome = remote_for(cfg, OP).send(claim_a.job.payload, claim_a.job.idem_key, claim_a.job.attempt)
    assert outcome.kind == "accepted"
    # ... its lease and the stale window pass; worker B recovers the stale send (Gemini cannot be searched: held).
    clock.advance(cfg.policy.lease_seconds + cfg.policy.stale_reserving_seconds + 1)
    held_at = clock.now()
    conn_b = connect(ledger_path)
    assert tick(conn_b, cfg, clock=clock, remotes=RemoteCache(cfg), owner="worker-B").orphans_held == 1
    # A wakes up and writes its outcome with its old epoch: fenced.
    assert record_send_outcome(conn_a, cfg, claim_a, outcome, now=clock.now()).refusal == "fenced"
    conn_a.close()
    conn_b.close()

    url = serve_metrics(ledger=ledger_path, config=config, now=held_at + 90)
    m = scrape(url)
    assert value(m, "reclaim_stale_sends_recovered_total", operation=OP, outcome="held") == 1
    assert value(m, "reclaim_stale_sends_recovered_total", operation=OP, outcome="handle_found") == 0
    assert value(m, "reclaim_fenced_writes_total", operation=OP) == 1
    assert value(m, "reclaim_jobs", operation=OP, state="held") == 1
    assert value(m, "reclaim_held_jobs_oldest_age_seconds", operation=OP) == pytest.approx(90)
    assert value(m, "reclaim_held_jobs_past_due", operation=OP) == 0
    assert value(m, "reclaim_worker_last_pass_age_seconds") == pytest.approx(90, abs=1)
    assert value(m, "reclaim_quota_used", operation=OP) == 1
    assert value(m, "reclaim_quota_limit", operation=OP) == cfg.operations[OP].daily_quota
    assert value(m, "reclaim_remote_paused", remote="gemini") == 0
    assert value(m, "reclaim_ledger_up") == 1
    events = value(m, "reclaim_audit_events_total")
    assert sim.count("create") == 1

    # A person assigns it, past due, then rejects it: the running exporter reads only the new events.
    triage.assign(conn, cfg, key, "alice", held_at + 30, actor="bob", clock=clock, reason="look at it")
    m = scrape(url)
    assert value(m, "reclaim_held_jobs_past_due", operation=OP) == 1
    triage.reject(conn, cfg, key, actor="bob", clock=clock, reason="the remote says it ran; closed by hand")
    m = scrape(url)
    assert value(m, "reclaim_holds_resolved_total", operation=OP, decision="reject", by="person") == 1
    assert value(m, "reclaim_holds_resolved_total", operation=OP, decision="reject", by="evidence") == 0
    assert value(m, "reclaim_jobs", operation=OP, state="rejected") == 1
    assert value(m, "reclaim_jobs", operation=OP, state="held") is None
    assert value(m, "reclaim_audit_events_total") == (events or 0) + 2
    fresh = connect(ledger_path, readonly=True)
    try:
        assert value(m, "reclaim_audit_events_total") == fresh.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    finally:
        fresh.close()
    assert sim.count("create") == 1
    conn.close()


def _stopped_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def test_an_outcome_journaled_while_the_ledger_refused_it_is_pending_then_replayed(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], start_cli: Callable[..., subprocess.Popen[str]],
    wait_for: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, cfg = _config(make_config, write_config, base={"policy": {"outcome_retry_seconds": 1}})
    env = {"RECLAIM_JOURNAL_DIR": str(tmp_path / "journal")}
    monkeypatch.setenv("RECLAIM_JOURNAL_DIR", env["RECLAIM_JOURNAL_DIR"])
    conn = connect(ledger_path)
    res = reserve(conn, cfg, OP, {"input": "j"}, clock=SystemClock(), job_id="journaled-1")
    conn.close()
    assert res.outcome == "reserved"
    worker = start_cli("tick", ledger=ledger_path, config=config, env={"RECLAIM_PAUSE_AT": "after_send_claim", **env})
    wait_for(lambda: _stopped_state(worker.pid) == "T", timeout=30, what="the worker to stop after its claim")
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock past the busy timeout
    os.kill(worker.pid, signal.SIGCONT)
    worker.communicate(timeout=60)
    holder.execute("ROLLBACK")
    holder.close()
    assert worker.returncode == 8
    assert len(journal.pending(ledger_path)) == 1

    done = run_cli("metrics", ledger=ledger_path, config=config, env=env)
    assert done.rc == 0, done.stderr
    m = parse(done.stdout)
    assert value(m, "reclaim_journal_pending_outcomes", host=os.uname().nodename) == 1
    assert value(m, "reclaim_journal_replayed_outcomes_total", operation=OP) == 0

    assert run_cli("tick", ledger=ledger_path, config=config, env=env).rc == 0
    m = parse(run_cli("metrics", ledger=ledger_path, config=config, env=env).stdout)
    assert value(m, "reclaim_journal_pending_outcomes", host=os.uname().nodename) == 0
    assert value(m, "reclaim_journal_replayed_outcomes_total", operation=OP) == 1
    assert value(m, "reclaim_fenced_writes_total", operation=OP) == 0
    assert sim.count("create", res.job.idem_key if res.job else "") == 1


@pytest.fixture
def rx() -> Iterator[WebhookReceiver]:
    """A loopback webhook receiver: the notification channel."""
    with WebhookReceiver().start() as r:
        yield r


@pytest.mark.both_backends
def test_a_notification_delivered_late_and_one_left_uncertain(
    sim: Simulator, rx: WebhookReceiver, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], ledger_path: Path, clock: ManualClock, serve_metrics: Callable[..., str],
) -> None:
    config, cfg = _config(make_config, write_config, base={"policy": {"retry_backoff_seconds": 100}},
                          notify={"oncall": {"kind": "webhook", "url": rx.url, "events": ["held"]}})
    conn = connect(ledger_path)
    sim.add_fault("status", status=503)  # the create's answer is lost in a 5xx: held, its notice queued
    late = submit_now(conn, cfg, OP, {"input": "late"}, clock=clock, job_id="late")
    assert late.state == "held"
    rx.refuse()  # the channel is down: not delivered, due again after the backoff
    assert dispatch_outbox(conn, cfg, clock=clock)["not_delivered"] == 1
    rx.start()
    clock.advance(100)
    assert dispatch_outbox(conn, cfg, clock=clock)["sent"] == 1
    sim.add_fault("status", status=503)
    assert submit_now(conn, cfg, OP, {"input": "unsure"}, clock=clock, job_id="unsure").state == "held"
    rx.add_fault("status", status=503)  # the channel answers 5xx: it may have acted, so uncertain
    assert dispatch_outbox(conn, cfg, clock=clock)["uncertain"] == 1
    conn.close()

    m = scrape(serve_metrics(ledger=ledger_path, config=config, now=clock.now()))
    labels = {"channel": "oncall", "kind": "held"}
    assert value(m, "reclaim_notification_delay_seconds_count", **labels) == 1
    assert value(m, "reclaim_notification_delay_seconds_sum", **labels) == pytest.approx(100)
    assert value(m, "reclaim_notification_delay_seconds_bucket", le="60.0", **labels) == 0
    assert value(m, "reclaim_notification_delay_seconds_bucket", le="300.0", **labels) == 1
    assert value(m, "reclaim_notification_delay_seconds_bucket", le="+Inf", **labels) == 1
    assert value(m, "reclaim_notifications", channel="oncall", state="sent") == 1
    assert value(m, "reclaim_notifications", channel="oncall", state="uncertain") == 1
    assert value(m, "reclaim_jobs", operation=OP, state="held") == 2
    assert sim.count("create", idem_key("late", OP)) == 1 and sim.count("create", idem_key("unsure", OP)) == 1


def test_a_verified_webhook_resolves_a_hold_and_a_refused_one_is_counted(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
    serve_metrics: Callable[..., str],
) -> None:
    doc = make_config(base_url=sim.url)
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    config = write_config(doc)
    env = {"RECLAIM_TEST_WHSEC": SECRET}
    receiver = start_cli("receiver", "--port", "0", ledger=ledger_path, config=config, env=env)
    assert receiver.stdout is not None
    line = receiver.stdout.readline()
    assert "receiver listening on" in line, receiver.communicate(timeout=10)
    hook = line.strip().rsplit(" ", 1)[-1]
    sim.configure(webhook_url=hook, webhook_secret=SECRET)
    url = serve_metrics(ledger=ledger_path, config=config)
    before = scrape(url)

    sim.add_fault("complete_lose_reply", match_idem=idem_key("heard", OP))
    assert run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", "heard", ledger=ledger_path,
                   config=config, env=env).rc == 4  # held: the reply was lost
    wait_for(lambda: sim.pending_webhooks() == 0 and len(sim.webhook_deliveries()) >= 1, timeout=30,
             what="the simulator to deliver the webhook")

    def resolved() -> bool:
        run_cli("tick", ledger=ledger_path, config=config, env=env)
        m = scrape(url)
        return value(m, "reclaim_holds_resolved_total", operation=OP, decision="reconcile", by="evidence") == 1

    wait_for(resolved, timeout=60, what="the held job to be reconciled on the webhook's evidence")
    with pytest.raises(urllib.error.HTTPError) as refused:  # an unsigned delivery: refused, counted
        urllib.request.urlopen(urllib.request.Request(hook, data=b"{}", method="POST"), timeout=30)
    assert refused.value.code == 401

    # The receiver writes its refusal counts in one batch within FLUSH_SECONDS, not per request.
    wait_for(lambda: value(scrape(url), "reclaim_webhook_deliveries_refused_total", reason="unsigned") == 1,
             timeout=30, what="the receiver to write its refusal count")
    m = scrape(url)
    assert value(before, "reclaim_holds_resolved_total", operation=OP, decision="reconcile", by="evidence") == 0
    assert value(m, "reclaim_webhook_deliveries_refused_total", reason="unsigned") == 1
    verified = {k: v for k, v in m.items() if k[0] == "reclaim_webhook_deliveries_verified_total"}
    assert sum(verified.values()) == len(sim.webhook_deliveries()) >= 1
    assert all(dict(k[1])["recorded"] == "true" for k in verified)
    assert value(m, "reclaim_holds_resolved_total", operation=OP, decision="reconcile", by="person") == 0
    assert value(m, "reclaim_evidence_to_resolution_seconds_count", operation=OP) == 1
    assert value(m, "reclaim_duplicate_sends_total", operation=OP) == 0
    assert sim.count("create", idem_key("heard", OP)) == 1
    receiver.send_signal(signal.SIGTERM)
    receiver.communicate(timeout=30)


def test_served_only_at_metrics_and_only_on_loopback(
    sim: Simulator, config_path: Path, ledger_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[..., str],
    serve_metrics: Callable[..., str], tmp_path: Path,
) -> None:
    url = serve_metrics(ledger=ledger_path, config=config_path)
    with pytest.raises(urllib.error.HTTPError) as other:
        urllib.request.urlopen(url.replace("/metrics", "/"), timeout=30)
    assert other.value.code == 404
    assert value(scrape(url), "reclaim_ledger_up") == 1

    done = run_cli("metrics", "--json", ledger=ledger_path, config=config_path)
    assert done.rc == 0, done.stderr
    doc = json.loads(done.stdout)
    by_name = {(x["name"], tuple(sorted(x["labels"].items()))): x["value"] for x in doc["samples"]}
    assert by_name[("reclaim_ledger_up", ())] == 1
    assert by_name[("reclaim_worker_last_pass_age_seconds", ())] == "+Inf"  # no worker pass yet
    assert by_name[("reclaim_quota_used", (("operation", OP),))] == 0

    before = fingerprint(ledger_path)
    for spec, words in [("0.0.0.0:9464", "not a loopback address"), ("10.1.2.3:0", "not a loopback address"),
                        ("example.org:80", "loopback IP address"), ("127.0.0.1", "expected HOST:PORT"),
                        ("127.0.0.1:70000", "expected HOST:PORT")]:
        done = run_cli("metrics", "--listen", spec, ledger=ledger_path, config=config_path)
        assert done.rc == 2, (spec, done)
        assert words in done.stderr and "--listen" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    missing = run_cli("metrics", ledger=tmp_path / "nope.db", config=config_path)
    assert missing.rc == 7 and "not found" in missing.stderr and "Traceback" not in missing.stderr
    assert fingerprint(ledger_path) == before


def test_a_port_in_use_is_refused_and_an_unreadable_ledger_is_up_0_not_a_failed_scrape(
    sim: Simulator, cfg: Config, config_path: Path, ledger_path: Path, tmp_path: Path, run_cli: Callable[..., Any],
) -> None:
    import socket

    from ledger import metrics

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("metrics", "--listen", f"127.0.0.1:{port}", ledger=ledger_path, config=config_path)
    assert done.rc == 2 and f"port {port} on 127.0.0.1 is in use" in done.stderr

    # A served exporter whose ledger cannot be read (here: gone) answers every scrape with reclaim_ledger_up 0.
    collector = metrics.LedgerCollector(lambda: connect(tmp_path / "gone.db", readonly=True), cfg, SystemClock())
    text = metrics.exposition(metrics.registry_for(collector)).decode()
    assert value(parse(text), "reclaim_ledger_up") == 0
    assert "reclaim_jobs" not in text
