"""Notifications through the outbox: written with the state change, POSTed once, never re-sent when unsure.

Counted at the receiving end: the loopback WebhookReceiver counts POSTs by X-Reclaim-Event-Id. Jobs are
held through the simulator's clean-up API (a 5xx on the POST). Ledger reads use fresh connections.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from child_env import inherited_env
from ledger_reads import job_fingerprint
from webhook_receiver import EVENT_ID_HEADER, WebhookReceiver

from ledger import triage
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, load_config
from ledger.db import connect, create_ledger, write_tx
from ledger.dispatch import dispatch_outbox, list_outbox, resolve_uncertain
from ledger.errors import BadInput, Refused
from ledger.model import JobKey
from ledger.remotes import remote_for
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.transitions import apply
from ledger.worker import submit_now, tick

CLOCKED = Path(__file__).parents[1] / "support" / "clocked_reclaim.py"  # the CLI with a test clock (test-only)
ROOT = Path(__file__).resolve().parents[2]
OP = "storage.cleanup"
T0 = parse_time("2026-12-01T10:00:00Z")
LEASE = 60.0
BACKOFF = 30.0
PAYLOAD = {"bucket": "bucket-a"}


def config_text(sim_url: str, hook_url: str, *, events: str = '["held", "resolved", "consumed"]',
                operations: str | None = None) -> str:
    ops = f"operations = {operations}\n" if operations else ""
    return f"""
timezone = "UTC"

[policy]
lease_seconds = {LEASE}
stale_reserving_seconds = 120
retry_backoff_seconds = {BACKOFF}

[identity]
source = "declared"

[operators]
scheduler = ["sender"]
bob = ["triage"]
carol = ["approver"]
vic = ["viewer"]

[remotes.cleaner]
kind = "http"
url = "{sim_url}/cleanup"
lookup_url = "{sim_url}/cleanup/{{handle}}?key={{idem_key}}"
timeout_seconds = 5
dedupes_by_key = true

[operations."{OP}"]
remote = "cleaner"
daily_quota = 50
sink = "results"

[operations."other.cleanup"]
remote = "cleaner"
daily_quota = 50
sink = "results"

[notify.oncall]
kind = "webhook"
url = "{hook_url}"
events = {events}
timeout_seconds = 5
{ops}"""


@dataclass
class Env:
    sim: Simulator
    rx: WebhookReceiver
    tmp: Path
    config_path: Path
    ledger: Path
    clock: ManualClock

    @property
    def cfg(self) -> Config:
        return load_config(self.config_path)

    def write_config(self, **kw: Any) -> Config:
        self.config_path.write_text(config_text(self.sim.url, self.rx.url, **kw), encoding="utf-8")
        return self.cfg

    def tick(self) -> Any:
        conn = connect(self.ledger)
        try:
            return tick(conn, self.cfg, clock=self.clock)
        finally:
            conn.close()

    def dispatch(self) -> dict[str, int]:
        conn = connect(self.ledger)
        try:
            return dispatch_outbox(conn, self.cfg, clock=self.clock)
        finally:
            conn.close()

    def hold(self, job_id: str, target: str = "bucket-a") -> JobKey:
        """Submit a clean-up that the remote answers with a 503: held, its notice queued."""
        self.sim.add_fault("status", status=503, method="cleanup")
        conn = connect(self.ledger)
        try:
            res = submit_now(conn, self.cfg, OP, PAYLOAD, clock=self.clock, job_id=job_id, target=target)
        finally:
            conn.close()
        assert res.state == "held"
        return res.key

    def outbox(self) -> list[dict[str, Any]]:
        conn = connect(self.ledger, readonly=True)
        try:
            return [dict(r) for r in conn.execute("SELECT * FROM outbox ORDER BY created_at, event_id")]
        finally:
            conn.close()

    def row(self, event_id: str) -> dict[str, Any]:
        return next(r for r in self.outbox() if r["event_id"] == event_id)

    def jobs_and_events(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        conn = connect(self.ledger, readonly=True)
        try:
            return ([tuple(r) for r in conn.execute("SELECT * FROM jobs ORDER BY created_at, job_id, operation")],
                    [tuple(r) for r in conn.execute("SELECT * FROM events ORDER BY id")])
        finally:
            conn.close()

    def fingerprint(self) -> str:
        conn = connect(self.ledger, readonly=True)
        try:
            return job_fingerprint(conn)
        finally:
            conn.close()

    def held_event_id(self, key: JobKey) -> str:
        conn = connect(self.ledger, readonly=True)
        try:
            ev = next(e for e in events_store.job_events(conn, key) if e.to_state == "held" and e.from_state != "held")
        finally:
            conn.close()
        return f"evt-{ev.id}-oncall"

    def reclaim(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        inherited = inherited_env()
        penv = {**inherited, "RECLAIM_TEST_NOW": str(self.clock.now()), "RECLAIM_CONFIG": str(self.config_path),
                "RECLAIM_OPERATOR": "scheduler", **extra}
        return subprocess.run(
            [sys.executable, str(CLOCKED), *args, "--ledger", str(self.ledger)],
            env=penv, cwd=ROOT, capture_output=True, text=True, timeout=60,
        )


@pytest.fixture
def env(tmp_path: Path, ledger_backend: str, request: pytest.FixtureRequest) -> Iterator[Env]:
    with Simulator().start() as sim, WebhookReceiver().start() as rx:
        ledger = request.getfixturevalue("pg_url") if ledger_backend == "postgresql" else tmp_path / "ledger.db"
        create_ledger(ledger)
        e = Env(sim, rx, tmp_path, tmp_path / "reclaim.toml", ledger, ManualClock(T0))
        e.write_config()
        yield e


# -- the normal case ------------------------------------------------------------------------------------
def test_held_job_is_notified_once_with_its_event_id(env: Env) -> None:
    key = env.hold("check 2026-12-01 bucket-a")
    eid = env.held_event_id(key)
    [row] = env.outbox()
    assert (row["event_id"], row["state"], row["kind"]) == (eid, "pending", "held")
    assert env.rx.count() == 0  # submit reserves and sends; notices go out with the next pass

    env.tick()
    assert env.rx.by_event_id() == {eid: 1}
    [post] = env.rx.received()
    assert {k.lower(): v for k, v in post.headers.items()}[EVENT_ID_HEADER.lower()] == eid
    assert post.body["kind"] == "held" and post.body["job_id"] == key.job_id and post.body["event_id"] == eid
    assert env.row(eid)["state"] == "sent"
    for _ in range(3):
        env.clock.advance(6 * 3600)
        env.tick()
    assert env.rx.count() == 1


def test_each_notice_of_a_job_is_posted_once(env: Env) -> None:
    key = env.hold("check 2026-12-01 bucket-a")
    env.tick()
    conn = connect(env.ledger)
    cfg = env.cfg
    triage.query_job(conn, cfg, key, remote_for(cfg, OP), actor="bob", clock=env.clock)
    triage.record_finding(conn, cfg, key, "not_received", "404 by key", actor="bob", clock=env.clock)
    triage.release(conn, cfg, key, actor="carol", clock=env.clock, reason="not received")
    conn.close()
    env.tick()  # sends once more, completes, delivers, and notifies
    env.tick()
    counts = env.rx.by_event_id()
    assert len(counts) == 3 and set(counts.values()) == {1}
    assert sorted(r.body["kind"] for r in env.rx.received()) == ["consumed", "held", "resolved"]
    assert all(r["state"] == "sent" for r in env.outbox())
    assert env.sim.count("cleanup") == 2


def test_channel_filters_by_event_and_operation(env: Env) -> None:
    env.write_config(events='["consumed"]')
    env.hold("a")
    assert env.outbox() == []
    env.write_config(operations='["other.cleanup"]')
    env.hold("b", target="bucket-b")
    assert env.outbox() == []
    env.write_config(operations=f'["{OP}"]')
    env.hold("c", target="bucket-c")
    assert len(env.outbox()) == 1


# -- failures ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["drop_reply", "status 500", "status 503"])
def test_lost_reply_or_5xx_is_uncertain_and_never_posted_again(env: Env, fault: str) -> None:
    key = env.hold("check 2026-12-01 bucket-a")
    eid = env.held_event_id(key)
    kind, _, status = fault.partition(" ")
    env.rx.add_fault(kind, status=int(status or 503))
    before = env.jobs_and_events()
    counts = env.dispatch()
    assert counts == {"sent": 0, "not_delivered": 0, "uncertain": 1}
    row = env.row(eid)
    assert row["state"] == "uncertain" and row["tries"] == 1 and row["last_error"]
    assert env.jobs_and_events() == before  # a notification never changes its job
    for _ in range(3):
        env.clock.advance(86400)
        env.tick()
    assert env.rx.by_event_id() == {eid: 1}
    assert env.row(eid)["state"] == "uncertain"
    assert list_outbox(connect(env.ledger, readonly=True))[0]["event_id"] == eid  # uncertain ones first


@pytest.mark.parametrize("how", ["refused", "status 429"])
def test_not_delivered_is_pending_then_posted_exactly_once_after_next_try(env: Env, how: str) -> None:
    if how == "refused":
        env.rx.refuse()
    else:
        env.rx.add_fault("status", status=429)
    key = env.hold("check 2026-12-01 bucket-a")
    eid = env.held_event_id(key)
    before = env.jobs_and_events()
    assert env.dispatch()["not_delivered"] == 1
    assert env.jobs_and_events() == before
    row = env.row(eid)
    assert row["state"] == "pending" and row["tries"] == 1 and row["next_try_at"] == T0 + BACKOFF
    assert ("could not connect" if how == "refused" else "HTTP 429") in row["last_error"]
    assert env.rx.count() == (0 if how == "refused" else 1)
    posts_before = env.rx.count()

    env.rx.start()  # the receiver is up again (same port)
    env.clock.advance(BACKOFF - 1)
    env.tick()
    assert env.rx.count() == posts_before  # not due yet
    env.clock.set(row["next_try_at"])
    env.tick()
    assert env.rx.count() == posts_before + 1 and env.row(eid)["state"] == "sent"
    env.clock.advance(86400)
    env.tick()
    assert env.rx.count() == posts_before + 1


def test_notice_rolls_back_with_its_state_change_and_is_not_queued_for_a_refused_one(env: Env) -> None:
    cfg = env.cfg
    conn = connect(env.ledger)
    res = reserve(conn, cfg, OP, PAYLOAD, clock=env.clock, job_id="j", target="t")
    before = env.fingerprint()
    with pytest.raises(RuntimeError), write_tx(conn):
        applied = apply(conn, res.key, "send_unknown", actor="w", now=env.clock.now(), expected_state="reserving",
                        expected_epoch=0, fields={"held_reason": "x"}, notify=cfg.notify)
        assert applied.ok and conn.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 1
        raise RuntimeError("die before commit")
    assert env.fingerprint() == before and env.outbox() == []
    with write_tx(conn):  # a fenced write (stale epoch) changes nothing and queues nothing
        applied = apply(conn, res.key, "send_unknown", actor="w", now=env.clock.now(), expected_state="reserving",
                        expected_epoch=7, fields={"held_reason": "x"}, notify=cfg.notify)
    conn.close()
    assert not applied.ok and applied.refusal == "fenced" and env.outbox() == []


# -- crashes ---------------------------------------------------------------------------------------------
def _due_job_the_remote_fails(env: Env) -> JobKey:
    conn = connect(env.ledger)
    res = reserve(conn, env.cfg, OP, PAYLOAD, clock=env.clock, job_id="check crash", target="bucket-a")
    conn.close()
    env.sim.add_fault("status", status=503, method="cleanup")
    return res.key


def test_killed_between_the_state_change_and_the_dispatch_sends_the_notice_once_after_restart(env: Env) -> None:
    key = _due_job_the_remote_fails(env)
    proc = env.reclaim("tick", RECLAIM_CRASH_AT="before_dispatch")
    assert proc.returncode == -9, proc.stderr
    eid = env.held_event_id(key)
    [row] = env.outbox()  # committed with the hold, though the process died before dispatching
    assert (row["event_id"], row["state"]) == (eid, "pending")
    assert env.rx.count() == 0 and env.sim.count("cleanup") == 1

    proc = env.reclaim("tick")
    assert proc.returncode == 0, proc.stderr
    assert env.rx.by_event_id() == {eid: 1} and env.row(eid)["state"] == "sent"
    env.clock.advance(3600)
    assert env.reclaim("tick").returncode == 0
    assert env.rx.count() == 1 and env.sim.count("cleanup") == 1


def test_killed_after_marking_sending_is_uncertain_and_never_posted(env: Env) -> None:
    key = _due_job_the_remote_fails(env)
    proc = env.reclaim("tick", RECLAIM_CRASH_AT="after_outbox_claim")
    assert proc.returncode == -9, proc.stderr
    eid = env.held_event_id(key)
    assert env.row(eid)["state"] == "sending" and env.rx.count() == 0

    env.clock.advance(LEASE - 1)  # could still be in flight in another process: left alone
    assert env.reclaim("tick").returncode == 0
    assert env.row(eid)["state"] == "sending" and env.rx.count() == 0

    env.clock.advance(2)
    assert env.reclaim("tick").returncode == 0
    row = env.row(eid)
    assert row["state"] == "uncertain" and row["last_error"] == "process died while sending"
    env.clock.advance(86400)
    assert env.reclaim("tick").returncode == 0
    assert env.rx.count() == 0 and env.row(eid)["state"] == "uncertain"


def test_a_second_dispatcher_leaves_an_in_flight_notice_alone(env: Env) -> None:
    key = env.hold("check 2026-12-01 bucket-a")
    eid = env.held_event_id(key)
    env.rx.add_fault("gate")
    results: list[dict[str, int]] = []
    first = threading.Thread(target=lambda: results.append(env.dispatch()))
    first.start()
    try:
        assert env.rx.wait_gated(10.0)
        assert env.dispatch() == {"sent": 0, "not_delivered": 0, "uncertain": 0}
        assert env.row(eid)["state"] == "sending"
    finally:
        env.rx.open_gate()
        first.join(10.0)
    assert results == [{"sent": 1, "not_delivered": 0, "uncertain": 0}]
    assert env.row(eid)["state"] == "sent" and env.rx.by_event_id() == {eid: 1}


# -- a person settles an uncertain notice ----------------------------------------------------------------
def test_resolve_uncertain_roles_and_events(env: Env) -> None:
    k1 = env.hold("check 2026-12-01 bucket-a")
    k2 = env.hold("check 2026-12-01 bucket-b", target="bucket-b")
    e1, e2 = env.held_event_id(k1), env.held_event_id(k2)
    env.rx.add_fault("drop_reply", count=2)
    env.dispatch()
    assert env.row(e1)["state"] == env.row(e2)["state"] == "uncertain"
    cfg = env.cfg
    conn = connect(env.ledger)

    def settle(eid: str, decision: str, actor: str, note: str = "") -> None:
        resolve_uncertain(conn, cfg, eid, decision, actor=actor, clock=env.clock, note=note)

    before = env.fingerprint()
    for eid, decision, actor, err, match in [
        (e1, "confirmed", "vic", Refused, "lacks the triage role"),
        (e1, "confirmed", "carol", Refused, "lacks the triage role"),
        (e1, "resend", "bob", Refused, "lacks the approver role"),
        (e1, "ignore", "bob", BadInput, "use 'confirmed' or 'resend'"),
        ("evt-nope", "confirmed", "bob", BadInput, "not in the outbox"),
    ]:
        with pytest.raises(err, match=match):
            settle(eid, decision, actor)
    assert env.fingerprint() == before

    settle(e1, "confirmed", "bob", note="on-call saw it in the channel")
    settle(e2, "resend", "carol", note="phoned the storage owner")
    conn.close()
    assert (env.row(e1)["state"], env.row(e2)["state"]) == ("confirmed", "resent_other_route")
    conn = connect(env.ledger, readonly=True)
    for key, eid, kind, actor in [(k1, e1, "notification_confirmed", "bob"), (k2, e2, "notification_resend", "carol")]:
        ev = events_store.job_events(conn, key)[-1]
        assert (ev.kind, ev.actor, ev.from_state, ev.to_state) == (kind, actor, "held", "held")
        assert ev.detail["event_id"] == eid and ev.detail["note"]
    conn.close()
    with pytest.raises(Refused, match="it is confirmed"):
        resolve_uncertain(connect(env.ledger), cfg, e1, "confirmed", actor="bob", clock=env.clock)

    env.clock.advance(86400)
    env.tick()
    assert env.rx.by_event_id() == {e1: 1, e2: 1}  # settling re-sends nothing through the webhook


def test_cli_settles_and_refuses_with_exit_codes(env: Env) -> None:
    key = env.hold("check 2026-12-01 bucket-a")
    eid = env.held_event_id(key)
    env.rx.add_fault("drop_reply")
    env.dispatch()
    before = env.fingerprint()
    proc = env.reclaim("notification", eid, "--mark", "confirmed", "--operator", "carol")
    assert proc.returncode == 6 and "lacks the triage role" in proc.stderr + proc.stdout
    assert env.fingerprint() == before
    proc = env.reclaim("notification", eid, "--mark", "confirmed", "--operator", "bob", "--note", "seen")
    assert proc.returncode == 0, proc.stderr
    out = env.reclaim("notifications", "--json")
    rows = json.loads(out.stdout)
    assert [(r["event_id"], r["state"]) for r in rows] == [(eid, "confirmed")]
