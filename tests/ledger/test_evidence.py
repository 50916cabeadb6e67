"""Evidence: the remote's records decide, and reclaim never forgets what they said.

Through the real google-genai SDK against the simulator (POSTs counted there), signed webhook
deliveries verified by the real `standardwebhooks` package, and the ledger read back fresh.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from gemini_deliveries import delivery

from ledger import evidence, triage
from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.errors import Refused
from ledger.leases import claim_for_send, claim_stale
from ledger.receiver import receive
from ledger.remotes import remote_for
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, record_send_outcome, tick

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtMTIzNDU2Nzg="
OTHER = "whsec_" + "b3RoZXItb3RoZXItb3RoZXItMTIzNDU2Nzg5MA=="


@pytest.fixture
def wh_cfg(make_config: Callable[..., dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", SECRET)
    doc = make_config()
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    return parse_config(doc, base_dir=tmp_path)


def _delivery(handle: str, *, kind: str = "interaction.completed", secret: str = SECRET,
              msg_id: str | None = None, at: datetime | None = None) -> tuple[bytes, dict[str, str]]:
    """A signed delivery in the documented envelope: it names the interaction only."""
    return delivery(handle, secret, kind, msg_id=msg_id, at=at)


def _receive(ledger: Path, cfg: Config, body: bytes, headers: dict[str, str], clock: ManualClock) -> Any:
    conn = connect(ledger)
    try:
        return receive(conn, cfg, {"gemini": SECRET}, body, headers, clock=clock)
    finally:
        conn.close()


def _held_lost_reply(sim: Simulator, conn: sqlite3.Connection, cfg: Config, clock: ManualClock, job_id: str) -> Any:
    """A job whose create completed remotely but whose reply was lost: held, no handle."""
    res = reserve(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id)
    assert res.job is not None
    sim.add_fault("complete_lose_reply", match_idem=res.job.idem_key)
    tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w1")
    job = jobs_store.find_job(conn, res.key)
    assert job is not None and job.state == "held" and job.handle is None
    [stored] = sim.find_by_idem(job.idem_key)
    return job, stored["id"]


def test_complete_then_lose_the_reply_ends_consumed_through_a_webhook_with_one_post_and_no_release(
    sim: Simulator, ledger_path: Path, wh_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
) -> None:
    job, handle = _held_lost_reply(sim, conn, wh_cfg, clock, "lost-1")
    answer = _receive(ledger_path, wh_cfg, *_delivery(handle), clock)
    assert answer.status == 202
    report = tick(conn, wh_cfg, clock=clock, remotes=RemoteCache(wh_cfg), owner="w2")
    assert report.reconciled_by_evidence == 1
    tick(conn, wh_cfg, clock=clock, remotes=RemoteCache(wh_cfg), owner="w2")
    fresh = connect(ledger_path, readonly=True)
    try:
        done = jobs_store.find_job(fresh, job.key)
        kinds = [e.kind for e in events_store.job_events(fresh, job.key)]
    finally:
        fresh.close()
    assert done is not None and done.state == "consumed" and done.handle == handle
    assert "release" not in kinds and kinds.count("reconcile") == 1
    reconcile = next(e for e in events_store.job_events(conn, job.key) if e.kind == "reconcile")
    assert reconcile.actor == "reclaim" and answer and "webhook msg_" in reconcile.detail["reason"]
    assert sim.count("create", job.idem_key) == 1


def test_without_the_webhook_the_job_stays_held(
    sim: Simulator, wh_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
) -> None:
    job, _ = _held_lost_reply(sim, conn, wh_cfg, clock, "lost-2")
    tick(conn, wh_cfg, clock=clock, remotes=RemoteCache(wh_cfg), owner="w2")
    assert jobs_store.find_job(conn, job.key).state == "held"  # type: ignore[union-attr]


def test_with_reconcile_on_evidence_off_a_finding_by_reclaim_names_the_handle(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path,
    clock: ManualClock, conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", SECRET)
    doc = make_config(policy={"reconcile_on_evidence": False})
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    cfg = parse_config(doc, base_dir=tmp_path)
    job, handle = _held_lost_reply(sim, conn, cfg, clock, "lost-3")
    _receive(ledger_path, cfg, *_delivery(handle), clock)
    tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w2")
    after = jobs_store.find_job(conn, job.key)
    assert after is not None and after.state == "held"
    finding = triage.latest_finding(conn, job.key)
    assert finding is not None and finding.actor == "reclaim" and finding.detail["suggested_handle"] == handle
    # ... and the release the evidence contradicts is refused.
    why = triage.refusal(conn, cfg, after, "release", "bob", clock.now())
    assert why is not None and "signed webhook" in why and "completed" in why


@pytest.mark.parametrize("forgery", ["unsigned", "wrong_secret", "stale", "garbage_signature"])
def test_forged_unsigned_and_stale_deliveries_get_a_4xx_and_change_nothing(
    forgery: str, sim: Simulator, ledger_path: Path, wh_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
    fingerprint: Callable[[Path], str],
) -> None:
    _, handle = _held_lost_reply(sim, conn, wh_cfg, clock, "lost-4")
    if forgery == "wrong_secret":
        body, headers = _delivery(handle, secret=OTHER)
    elif forgery == "stale":
        body, headers = _delivery(handle, at=datetime.fromtimestamp(time.time() - 600, UTC))
    else:
        body, headers = _delivery(handle)
        if forgery == "unsigned":
            del headers["webhook-signature"]
        else:
            headers["webhook-signature"] = "v1"  # malformed: no comma, no base64
    before = fingerprint(ledger_path)
    answer = _receive(ledger_path, wh_cfg, body, headers, clock)
    assert 400 <= answer.status < 500
    assert fingerprint(ledger_path) == before
    assert sum(evidence_store.refusal_counts(conn).values()) == 1


def test_a_replay_and_a_redelivery_are_acknowledged_and_keep_one_evidence_record(
    sim: Simulator, ledger_path: Path, wh_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
    fingerprint: Callable[[Path], str],
) -> None:
    job, handle = _held_lost_reply(sim, conn, wh_cfg, clock, "lost-5")
    body, headers = _delivery(handle, msg_id="msg_fixed")
    assert _receive(ledger_path, wh_cfg, body, headers, clock).status == 202
    before = fingerprint(ledger_path)
    assert _receive(ledger_path, wh_cfg, body, headers, clock).status == 200  # the exact same bytes again
    later = datetime.fromtimestamp(time.time() + 2, UTC)
    body2, headers2 = _delivery(handle, msg_id="msg_fixed", at=later)  # the sender's retry
    assert _receive(ledger_path, wh_cfg, body2, headers2, clock).status == 200
    assert fingerprint(ledger_path) == before
    assert evidence_store.refusal_counts(conn) == {"redelivered": 1, "replayed": 1}
    tick(conn, wh_cfg, clock=clock, remotes=RemoteCache(wh_cfg), owner="w2")
    assert len([e for e in evidence_store.for_job(conn, job) if e.source == "webhook"]) == 1


def test_an_interaction_the_remote_does_not_know_stays_orphan_evidence_with_its_id_and_reason(
    sim: Simulator, ledger_path: Path, wh_cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
    run_cli: Callable[..., Any], write_config: Callable[..., Path], config_dict: dict[str, Any],
) -> None:
    assert _receive(ledger_path, wh_cfg, *_delivery("v1_zzz"), clock).status == 202
    [pending] = evidence_store.orphans(conn)
    assert pending.handle == "v1_zzz" and pending.job is None and pending.outcome is None
    report = tick(conn, wh_cfg, clock=clock, remotes=RemoteCache(wh_cfg), owner="w1")
    assert report.evidence_attributed == 0
    [orphan] = evidence_store.orphans(conn)
    assert orphan.outcome is not None and "no longer knows v1_zzz" in orphan.outcome
    write_config({**config_dict, "remotes": {"gemini": {**config_dict["remotes"]["gemini"],
                                                         "webhook_secret_env": "RECLAIM_TEST_WHSEC"}}})
    out = run_cli("evidence", "--orphans", "--json", env={"RECLAIM_TEST_WHSEC": SECRET})
    assert out.rc == 0, out.stderr
    [shown] = json.loads(out.stdout)["evidence"]
    assert shown["handle"] == "v1_zzz" and "no longer knows" in shown["outcome"]


def test_reconcile_with_another_jobs_handle_or_another_idem_key_is_refused_and_changes_nothing(
    sim: Simulator, ledger_path: Path, cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
    fingerprint: Callable[[Path], str],
) -> None:
    other, other_handle = _held_lost_reply(sim, conn, cfg, clock, "ferries")
    job, _ = _held_lost_reply(sim, conn, cfg, clock, "dunes")
    remote = remote_for(cfg, OP)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="not this job's"):  # the ferries interaction carries the ferries key
        triage.reconcile(conn, cfg, job.key, other_handle, actor="bob", clock=clock, reason="x", remote=remote)
    with pytest.raises(Refused, match="does not know"):
        triage.reconcile(conn, cfg, job.key, "v1_nothing", actor="bob", clock=clock, reason="x", remote=remote)
    assert fingerprint(ledger_path) == before
    # ferries is reconciled with its own handle; then dunes cannot take it, even unverified.
    triage.reconcile(conn, cfg, other.key, other_handle, actor="bob", clock=clock, reason="seen", remote=remote)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="already attached"):
        triage.reconcile(conn, cfg, job.key, other_handle, actor="bob", clock=clock, reason="x", unverified=True)
    assert fingerprint(ledger_path) == before


@pytest.mark.slow
def test_evidence_that_it_completed_survives_a_later_failed_query(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path,
    clock: ManualClock, conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", SECRET)
    doc = make_config(policy={"reconcile_on_evidence": False})
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    cfg = parse_config(doc, base_dir=tmp_path)
    job, handle = _held_lost_reply(sim, conn, cfg, clock, "cleanup-1")
    _receive(ledger_path, cfg, *_delivery(handle), clock)
    tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w2")  # attributes the delivery by its record
    remote = remote_for(cfg, OP)
    st = triage.query_job(conn, cfg, job.key, remote, actor="alice", clock=clock)
    assert (st.state, st.handle) == ("completed", handle)  # the query used the webhook's handle
    triage.record_finding(conn, cfg, job.key, "cannot_determine", "outage", actor="alice", clock=clock)
    sim.add_fault("status", status=503, method="get", count=5)
    assert triage.query_job(conn, cfg, job.key, remote, actor="alice", clock=clock).state == "error"
    with pytest.raises(Refused, match="completed"):
        triage.release(conn, cfg, job.key, actor="bob", clock=clock, reason="the outage is over")
    assert sim.count("create", job.idem_key) == 1


def test_a_fenced_accepted_outcome_is_evidence_that_query_and_show_report(
    sim: Simulator, ledger_path: Path, cfg: Config, clock: ManualClock, conn: sqlite3.Connection,
    run_cli: Callable[..., Any], config_path: Path,
) -> None:
    res = reserve(conn, cfg, OP, {"input": "fenced"}, clock=clock, job_id="fenced-1")
    claim = claim_for_send(conn, cfg, res.key, owner="slow", now=clock.now())
    assert claim is not None
    out = remote_for(cfg, OP).send(claim.job.payload, claim.job.idem_key, claim.job.attempt)
    assert out.kind == "accepted" and out.handle
    clock.advance(cfg.policy.lease_seconds + cfg.policy.send_margin_seconds + cfg.policy.stale_reserving_seconds)
    assert claim_stale(conn, cfg, res.key, owner="recovery", now=clock.now()) is not None
    applied = record_send_outcome(conn, cfg, claim, SendOutcome("accepted", handle=out.handle), now=clock.now())
    assert not applied.ok and applied.refusal == "fenced"
    shown = run_cli("show", "fenced-1", "--json")
    assert shown.rc == 0
    assert [e["handle"] for e in json.loads(shown.stdout)["evidence"]] == [out.handle]
    job = jobs_store.find_job(conn, res.key)
    assert job is not None and job.handle is None
    st = triage.query_remote(cfg, job, remote_for(cfg, OP), evidence.known_handle(conn, job).handle)  # type: ignore[union-attr]
    assert st.handle == out.handle and st.state in ("running", "completed")


def test_a_second_interaction_for_one_idem_key_is_recorded_cancelled_and_never_delivered(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path, clock: ManualClock,
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", SECRET)
    with Simulator(complete_after=3600) as slow:
        doc = make_config(base_url=slow.url)
        doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
        cfg = parse_config(doc, base_dir=tmp_path)
        res = reserve(conn, cfg, OP, {"input": "dup"}, clock=clock, job_id="dup-1")
        tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w1")
        job = jobs_store.find_job(conn, res.key)
        assert job is not None and job.state == "submitted" and job.handle
        # A stale sender slipped through the window: a second create for the same idem key and attempt.
        stray = remote_for(cfg, OP).send({"input": "dup"}, job.idem_key, 1)
        assert stray.kind == "accepted" and stray.handle != job.handle
        body, headers = _delivery(stray.handle or "", kind="interaction.requires_action")
        conn2 = connect(ledger_path)
        try:
            assert receive(conn2, cfg, {"gemini": SECRET}, body, headers, clock=clock).status == 202
        finally:
            conn2.close()
        report = tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w2")
        assert report.duplicates == 1
        assert slow.count("cancel") == 1 and slow.interaction(stray.handle or "")["status"] == "cancelled"
        [dup] = [e for e in events_store.job_events(conn, res.key) if e.kind == "duplicate_send"]
        assert dup.detail["handle"] == stray.handle and dup.detail["cancel"] is not None
        after = jobs_store.find_job(conn, res.key)
        assert after is not None and after.handle == job.handle  # the job's own interaction stays its result
        assert events_store.duplicate_count(conn) == 1
