"""Every `reclaim` command that touches a ledger, through the real CLI, on SQLite and on PostgreSQL.

One walk per backend, with the loopback simulator as the remote and a loopback webhook receiver as the
notification channel: init, submit, tick, status, jobs, show, events, evidence, quota, views (save / list /
delete), query, finding, assign, bulk-assign, release, reconcile, reject, remediate, notifications,
notification, resume, export and verify. Each step asserts its exit code, its JSON output, and its effect as a
FRESH connection reads it back. Every run uses the test launcher's clock frozen at T0, so the jobs share
one creation time and the listings' order among equals is exercised too.

Left to their own tests (they serve until stopped): receiver (test_webhook_flow.py), simulator
(test_simulator_cli.py), serve (test_browser_seat.py), console (tests/console/), demo
(test_readme_and_demo.py), worker (test_worker_process.py, test_postgres.py), events --follow
(test_follow.py, test_postgres.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gemini_deliveries import delivery
from ledger_reads import QmarkSql
from webhook_receiver import WebhookReceiver

from ledger.clock import ManualClock, parse_time
from ledger.config import load_config
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.receiver import receive
from ledger.simulator import Simulator
from ledger.store import events as events_store

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
NOW = "2026-12-01T12:00:00Z"
T0 = parse_time(NOW)
HELD = ("h-1", "h-2", "h-3", "h-4")
SECRET = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtMTIzNDU2Nzg="


@pytest.fixture
def rx() -> Iterator[WebhookReceiver]:
    """A loopback webhook receiver: the notification channel."""
    with WebhookReceiver().start() as r:
        yield r


@pytest.fixture
def walk_config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
                rx: WebhookReceiver, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The standard config with a notification channel for held jobs, a one-minute probe of a paused remote,
    and the remote's webhook secret (in WALK_WHSEC, which the CLI's subprocesses inherit)."""
    monkeypatch.setenv("WALK_WHSEC", SECRET)
    doc = make_config(policy={"remote_probe_seconds": 60.0})
    doc["remotes"]["gemini"]["webhook_secret_env"] = "WALK_WHSEC"
    doc["notify"] = {"oncall": {"kind": "webhook", "url": rx.url, "events": ["held"], "timeout_seconds": 5}}
    return write_config(doc)


def _read(ledger: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of `sql` on a fresh read-only connection (closed at once)."""
    c = connect(ledger, readonly=True)
    try:
        return [tuple(r) for r in QmarkSql(c).execute(sql, params)]
    finally:
        c.close()


def _events_of(ledger: Path, job_id: str) -> list[Any]:
    c = connect(ledger, readonly=True)
    try:
        return events_store.job_events(c, JobKey(job_id, OP))
    finally:
        c.close()


def _deliver(ledger: Path, config: Path, handle: str, msg_id: str) -> None:
    """One signed `interaction.completed` webhook in the documented envelope, as `reclaim receiver` takes it
    (ledger.receiver); signed now (the signature's timestamp is checked against the wall clock), recorded at T0."""
    body, headers = delivery(handle, SECRET, msg_id=msg_id)
    c = connect(ledger)
    try:
        got = receive(c, load_config(config), {"gemini": SECRET}, body, headers, clock=ManualClock(T0))
    finally:
        c.close()
    assert got.status == 202, got


def test_init_creates_a_ledger_then_finds_it(
    ledger_backend: str, tmp_path: Path, walk_config: Path, run_cli: Callable[..., Any], request: pytest.FixtureRequest,
) -> None:
    fresh: Any = (request.getfixturevalue("pg_server").new_database() if ledger_backend == "postgresql"
                  else tmp_path / "fresh.db")
    first = run_cli("init", "--json", ledger=fresh)
    assert first.rc == 0, first
    doc = json.loads(first.stdout)
    assert {k: doc[k] for k in ("ledger", "created", "wrote_config")} == {
        "ledger": str(fresh), "created": True, "wrote_config": False}
    # root made it: its owner, whose new signing key signs the first policy (its fingerprint printed to check)
    assert doc["policy"].startswith("recorded from") and doc["wrote_signing_key"], doc
    assert doc["owner_key"].startswith("SHA256:"), doc
    assert _read(fresh, "SELECT COUNT(*) FROM jobs") == [(0,)]
    again = run_cli("init", "--json", ledger=fresh)
    assert again.rc == 0 and json.loads(again.stdout)["created"] is False, again
    assert run_cli("status", "--json", ledger=fresh).rc == 0


@pytest.mark.slow
def test_every_command_on_one_ledger(
    sim: Simulator, rx: WebhookReceiver, ledger_path: Path, walk_config: Path, run_cli: Callable[..., Any],
    read_job: Callable[..., Any], fingerprint: Callable[[Path], str], ledger_backend: str,
) -> None:
    def cli(*args: str, rc: int = 0, operator: str | None = None) -> Any:
        out = run_cli(*args, now=NOW, operator=operator)
        assert out.rc == rc, (args, out)
        if "--json" not in args or not out.stdout.strip():
            return out
        return [json.loads(line) for line in out.stdout.splitlines()] if args[0] == "events" else json.loads(out.stdout)

    # -- submit: one sent, one duplicate, four held (the remote answers 503), one whose reply is lost ------
    sent = cli("submit", OP, "--payload", '{"input": "ok"}', "--job-id", "ok-1", "--json")
    assert (sent["job_id"], sent["operation"]) == ("ok-1", OP) and read_job(ledger_path, "ok-1").state == sent["state"]
    assert cli("submit", OP, "--payload", '{"input": "ok"}', "--job-id", "ok-1", "--json")["outcome"] == "duplicate"
    for i, job_id in enumerate(HELD, start=1):
        sim.add_fault("status", status=503)
        held = cli("submit", OP, "--payload", json.dumps({"input": job_id}), "--job-id", job_id,
                   "--target", f"bucket-{i}", "--json", rc=4)
        assert held["state"] == "held" and read_job(ledger_path, job_id).state == "held"
    sim.add_fault("complete_lose_reply")
    cli("submit", OP, "--payload", '{"input": "lost"}', "--job-id", "lost-1", rc=4)
    (found,) = sim.find_by_idem(idem_key("lost-1", OP))
    assert sim.count("create") == 6

    # -- tick: delivers ok-1 and posts the held notices; the first post's reply is lost (uncertain) -------
    rx.add_fault("drop_reply")
    report = cli("tick", "--json")
    assert isinstance(report, dict)
    assert read_job(ledger_path, "ok-1").state == "consumed"
    outbox = _read(ledger_path, "SELECT event_id, state FROM outbox ORDER BY created_at, event_id")
    assert len(outbox) == 5 and sorted(s for _, s in outbox) == ["sent"] * 4 + ["uncertain"]

    # -- status --------------------------------------------------------------------------------------------
    status = cli("status", "--json")
    assert status["audit"]["events"] == _read(ledger_path, "SELECT COUNT(*) FROM events")[0][0]
    assert json.dumps(status).count('"held"') >= 1

    # -- jobs: a page, a filter, pages that split jobs created at the same instant --------------------------
    listed = cli("jobs", "held", "--json")
    assert [j["job_id"] for j in listed["jobs"]] == [*HELD, "lost-1"]
    assert [j["job_id"] for j in cli("jobs", "held", "--filter", "bucket-2", "--json")["jobs"]] == ["h-2"]
    pages = [[j["job_id"] for j in cli("jobs", "held", "--limit", "2", "--page", str(p), "--json")["jobs"]]
             for p in (1, 2, 3)]
    assert pages == [["h-1", "h-2"], ["h-3", "h-4"], ["lost-1"]]
    newest = [j["job_id"] for j in cli("jobs", "held", "--newest-first", "--json")["jobs"]]
    assert newest == ["lost-1", *reversed(HELD)]
    assert [j["job_id"] for j in cli("jobs", "consumed", "--json")["jobs"]] == ["ok-1"]
    # h-1 leaves the held group (released) and comes back (the resend meets a 503): it keeps its place among
    # the jobs created with it, on every page
    cli("finding", "h-1", "--category", "not_received", "--note", "first look", operator="alice")
    cli("release", "h-1", "--reason", "try once more", operator="bob")
    sim.add_fault("status", status=503, match_idem=idem_key("h-1", OP))
    cli("tick", rc=4)  # 4: a job was held
    assert (read_job(ledger_path, "h-1").state, read_job(ledger_path, "h-1").attempt) == ("held", 2)
    assert [j["job_id"] for j in cli("jobs", "held", "--json")["jobs"]] == [*HELD, "lost-1"]
    pages = [[j["job_id"] for j in cli("jobs", "held", "--limit", "2", "--page", str(p), "--json")["jobs"]]
             for p in (1, 2, 3)]
    assert pages == [["h-1", "h-2"], ["h-3", "h-4"], ["lost-1"]]

    # -- show / events ---------------------------------------------------------------------------------------
    shown = cli("show", "h-1", "--json")
    assert shown["job"]["state"] == "held" and shown["job"]["target"] == "bucket-1"
    assert [e["id"] for e in shown["events"]] == [e.id for e in _events_of(ledger_path, "h-1")]
    all_ids = [r[0] for r in _read(ledger_path, "SELECT id FROM events ORDER BY id")]
    tail = cli("events", "--limit", "3", "--json")
    assert [e["id"] for e in tail] == all_ids[-3:]
    after = cli("events", "--after", str(all_ids[1]), "--json")
    assert [e["id"] for e in after] == all_ids[2:]

    # -- views: save, list, use, delete (per operator) ------------------------------------------------------
    assert cli("views", "--save", "b2", "--group", "held", "--filter", "bucket-2", "--json", operator="alice") == [
        {"name": "b2", "group": "held", "filter": "bucket-2"}]
    assert cli("views", "--json", operator="alice") == [{"name": "b2", "group": "held", "filter": "bucket-2"}]
    assert cli("views", "--json", operator="bob") == []
    assert [j["job_id"] for j in cli("jobs", "--view", "b2", "--json", operator="alice")["jobs"]] == ["h-2"]
    assert cli("views", "--delete", "b2", "--json", operator="alice") == []
    assert _read(ledger_path, "SELECT COUNT(*) FROM saved_views") == [(0,)]

    # -- query; evidence (a signed webhook about ok-1, one about an idem key no job has) ----------------------
    asked = cli("query", "lost-1", "--json", operator="alice")
    assert asked["state"] == "held" and asked["handle"] is None, asked  # Gemini cannot be searched by idem key
    last = _events_of(ledger_path, "lost-1")[-1]
    assert (last.kind, last.actor, last.detail["remote_state"]) == ("remote_query", "alice", asked["remote_state"])
    ok_handle = read_job(ledger_path, "ok-1").handle
    _deliver(ledger_path, walk_config, ok_handle, "msg_ok")
    _deliver(ledger_path, walk_config, "v1_zzz", "msg_orphan")
    ev = cli("evidence", "ok-1", "--json")["evidence"]
    assert [(e["source"], e["handle"], e["idem_key"]) for e in ev] == [("webhook", ok_handle, idem_key("ok-1", OP))]
    orphans = cli("evidence", "--orphans", "--json")["evidence"]
    assert [(e["handle"], e["outcome"]) for e in orphans] == [("v1_zzz", None)]  # awaiting attribution
    assert _read(ledger_path, "SELECT COUNT(*) FROM evidence") == [(2,)]

    # -- finding, assign, bulk-assign -------------------------------------------------------------------------
    before = fingerprint(ledger_path)
    cli("finding", "h-1", "--category", "not_received", "--note", "nothing in the console", "--dry-run",
        operator="alice")
    assert fingerprint(ledger_path) == before
    found_doc = cli("finding", "h-1", "--category", "not_received", "--note", "nothing in the console", "--json",
                    operator="alice")
    last = _events_of(ledger_path, "h-1")[-1]
    assert found_doc == {"job_id": "h-1", "operation": OP, "state": "held", "attempt": 2, "action": "finding",
                         "actor": "alice", "event_id": last.id, "category": "not_received",
                         "note": "nothing in the console"}
    assert (last.kind, last.actor, last.detail["category"]) == ("finding", "alice", "not_received")
    cli("assign", "h-1", "--owner", "alice", "--due", "2h", "--reason", "on call", "--json", operator="alice")
    job = read_job(ledger_path, "h-1")
    assert (job.owner, job.due_at) == ("alice", T0 + 7200)
    before = fingerprint(ledger_path)
    preview = cli("bulk-assign", "--owner", "carol", "--due", "1d", "--filter", "target:bucket-*", "--reason", "r",
                  "--json", operator="bob")
    assert preview["matched"] == 4 and fingerprint(ledger_path) == before  # without --yes: only the count
    bulk = cli("bulk-assign", "--owner", "carol", "--due", "1d", "--filter", "target:bucket-*", "--reason", "carol's week",
               "--yes", "--json", operator="bob")
    assert bulk["assigned"] == 4 and bulk["due"] == "2026-12-02T12:00:00Z"
    assert {read_job(ledger_path, j).owner for j in HELD} == {"carol"}
    assert read_job(ledger_path, "lost-1").owner is None
    # rows changed since: the order among jobs created at one instant is still the same on every page
    assert [j["job_id"] for j in cli("jobs", "held", "--json")["jobs"]] == [*HELD, "lost-1"]
    assert [j["job_id"] for j in cli("jobs", "held", "--limit", "2", "--page", "3", "--json")["jobs"]] == ["lost-1"]

    # -- release (four eyes: bob, not the finding's author), reconcile, reject, remediate ----------------------
    cli("release", "h-1", "--reason", "not received", operator="alice", rc=6)
    # the orphan v1_zzz (not attributed yet, arrived after h-1's send began) could be h-1's own: a release waits
    # until a person decides it
    assert [c["handle"] for c in cli("show", "h-1", "--json")["candidates"]] == ["v1_zzz"]
    before = fingerprint(ledger_path)
    assert "v1_zzz" in cli("release", "h-1", "--reason", "not received", operator="bob", rc=14).stderr
    assert fingerprint(ledger_path) == before
    dismissed = cli("dismiss-candidate", "h-1", "--evidence", str(orphans[0]["id"]), "--reason",
                    "another application's interaction (AI Studio)", "--json", operator="alice")
    assert (dismissed["evidence_id"], dismissed["candidates_left"]) == (orphans[0]["id"], [])
    released = cli("release", "h-1", "--reason", "not received", "--json", operator="bob")
    assert released["attempt"] == 3 and read_job(ledger_path, "h-1").state == released["state"] != "held"
    cli("reconcile", "lost-1", "--handle", found["id"], "--reason", "found in the console", "--json",
        operator="carol")
    job = read_job(ledger_path, "lost-1")
    assert (job.state, job.handle) == ("submitted", found["id"])
    assert cli("reject", "h-2", "--reason", "cancelled", "--json", operator="carol")["state"] == "rejected"
    assert cli("remediate", "h-3", "--note", "done by hand, OPS-12", "--json", operator="carol")["state"] == "remediated"
    assert (read_job(ledger_path, "h-2").state, read_job(ledger_path, "h-3").state) == ("rejected", "remediated")
    creates = sim.count("create")
    cli("tick", "--json")
    assert sim.count("create") == creates + 1  # the released h-1 only; reconcile sent nothing
    assert {read_job(ledger_path, j).state for j in ("h-1", "lost-1")} == {"consumed"}

    # -- quota: every reservation of today, as the ledger counts it ---------------------------------------------
    (used,) = _read(ledger_path, "SELECT used FROM quota_usage WHERE operation = ? AND day = ?", (OP, "2026-12-01"))
    assert used[0] >= 6
    assert cli("quota", "--json") == {OP: [{"day": "2026-12-01", "used": used[0], "limit": 100,
                                            "remaining": 100 - used[0]}]}
    assert len(cli("quota", "--days", "3", "--json")[OP]) == 3

    # -- notifications, notification --------------------------------------------------------------------------
    rows = cli("notifications", "--json")
    assert rows[0]["state"] == "uncertain" and [r["state"] for r in rows[1:]] == ["sent"] * (len(rows) - 1)
    eid = rows[0]["event_id"]
    before = fingerprint(ledger_path)
    cli("notification", eid, "--mark", "confirmed", operator="carol", rc=6)  # confirming needs triage
    assert fingerprint(ledger_path) == before
    assert cli("notification", eid, "--mark", "confirmed", "--note", "seen in the channel", "--json",
               operator="alice") == {"event_id": eid, "decision": "confirmed", "actor": "alice",
                                     "note": "seen in the channel"}
    assert _read(ledger_path, "SELECT state FROM outbox WHERE event_id = ?", (eid,)) == [("confirmed",)]

    # -- resume: the remote refuses the key, is paused; an approver lifts it -----------------------------------
    sim.add_fault("api_key_invalid", count=5)
    cli("submit", OP, "--payload", '{"input": "p"}', "--job-id", "p-1", rc=9)
    assert [r[0] for r in _read(ledger_path, "SELECT remote FROM remote_pauses")] == ["gemini"]
    assert "PAUSED" in cli("status").stdout
    cli("resume", "gemini", "--reason", "key rotated", operator="alice", rc=6)
    assert cli("resume", "gemini", "--reason", "key rotated", "--json", operator="bob") == {
        "remote": "gemini", "paused": False}
    assert _read(ledger_path, "SELECT remote FROM remote_pauses") == []
    sim.clear_faults()
    cli("tick")
    assert read_job(ledger_path, "p-1").state == "consumed"

    # -- export: jobs and events as JSON lines, read back against the ledger ------------------------------------
    exported = run_cli("export", "jobs", "--format", "jsonl", "--json", now=NOW)
    assert exported.rc == 0, exported
    assert [(j["job_id"], j["state"]) for j in map(json.loads, exported.stdout.splitlines())] == _read(
        ledger_path, "SELECT job_id, state FROM jobs ORDER BY job_id, operation")
    assert isinstance(json.loads(exported.stderr), dict)  # the summary: one JSON object on stderr
    ids = [r[0] for r in _read(ledger_path, "SELECT id FROM events ORDER BY id")]
    exported = run_cli("export", "events", "--after", str(ids[4]), "--format", "jsonl", now=NOW)
    assert exported.rc == 0, exported
    assert [e["id"] for e in map(json.loads, exported.stdout.splitlines())] == ids[5:]

    # -- verify: the whole walk left a chain that holds ---------------------------------------------------------
    verdict = cli("verify", "--json")
    (n_events,) = _read(ledger_path, "SELECT COUNT(*) FROM events")[0]
    (head,) = _read(ledger_path, "SELECT hash FROM events ORDER BY id DESC LIMIT 1")[0]
    assert verdict["ok"] and verdict["events"] == n_events and verdict["head_hash"] == head
    assert verdict["jobs"] == _read(ledger_path, "SELECT COUNT(*) FROM jobs")[0][0] == 7
    said = cli("verify").stdout
    assert head in said and "ok: the chain holds" in said
    assert ("every row read back" if ledger_backend == "postgresql" else "SQLite finds no damage") in said
