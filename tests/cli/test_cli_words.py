"""Every command that writes says what it did in one human line, and `--json` holds the same facts.

No Python repr reaches a person (`None`, `['...']`, `{'sent': 4}`); a query says what the remote said (or why
it was not asked) and what this remote can answer; a finding confirms what was recorded; assign names the owner
and the absolute due time; an empty listing says "none". Each line is checked against the ledger as a fresh
connection reads it back (the event ids it names are the events written).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
REPR = re.compile(r"\bNone\b|\[['\"]|\{['\"]|\b(?:state|handle|job_id|operation|can_answer|remote_state|owner)=")
"""What a Python repr or a key=value dump looks like in a line meant for a person."""


def _held(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, job_id: str) -> JobKey:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _last_event(ledger: Path, job_id: str) -> Any:
    fresh = connect(ledger, readonly=True)
    try:
        return events_store.job_events(fresh, JobKey(job_id, OP))[-1]
    finally:
        fresh.close()


def _one_line(r: Any) -> str:
    assert r.rc == 0, r
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    assert not REPR.search(lines[0]), lines[0]
    return lines[0]


@pytest.mark.slow
def test_each_triage_command_says_what_it_recorded(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    for job_id in ("w-1", "w-2", "w-3", "w-4"):
        _held(sim, conn, cfg, clock, job_id)
    now = clock.now()

    # query: Gemini cannot be searched and no handle is known: not asked, said in words, with what it can answer
    line = _one_line(run_cli("query", "w-1", operator="alice", now=now))
    assert line.startswith(f"queried w-1 / {OP} as alice: the remote was not asked: no handle recorded"), line
    assert "; no handle known; reply recorded, the job is still held; this remote can look a job up by its " \
           "handle; cannot be searched by idem key" in line, line
    doc = json.loads(run_cli("query", "w-1", "--json", operator="alice", now=now).stdout)
    assert (doc["action"], doc["actor"], doc["asked"], doc["handle"], doc["remote_state"]) == (
        "query", "alice", False, None, "error")
    assert doc["can_answer"] and all(isinstance(s, str) for s in doc["can_answer"])
    assert _last_event(ledger_path, "w-1").kind == "remote_query"

    # finding: confirms the category, the note and the event it wrote
    line = _one_line(run_cli("finding", "w-1", "--category", "not_received", "--note", "nothing in AI Studio",
                             operator="alice", now=now))
    ev = _last_event(ledger_path, "w-1")
    assert (ev.kind, ev.actor, ev.detail["category"]) == ("finding", "alice", "not_received")
    assert line == (f'recorded finding not_received on w-1 / {OP} as alice (event {ev.id}): "nothing in AI Studio"; '
                    "the job is still held, attempt 1; nothing was sent")
    doc = json.loads(run_cli("finding", "w-2", "--category", "cannot_determine", "--note", "n", "--json",
                             operator="alice", now=now).stdout)
    assert doc == {"job_id": "w-2", "operation": OP, "state": "held", "attempt": 1, "action": "finding",
                   "actor": "alice", "event_id": _last_event(ledger_path, "w-2").id, "category": "cannot_determine",
                   "note": "n"}

    # assign: the owner and the absolute due time (2h typed at 12:00 UTC), not "2h"
    line = _one_line(run_cli("assign", "w-2", "--owner", "carol", "--due", "2h", "--reason", "carol's shift",
                             operator="alice", now=now))
    ev = _last_event(ledger_path, "w-2")
    assert ev.kind == "assign"
    assert line == (f"assigned w-2 / {OP} to carol, due 2026-12-01 14:00:00Z · in 2h 00m 00s, as alice "
                    f"(event {ev.id}): \"carol's shift\"; nothing was sent")
    doc = json.loads(run_cli("assign", "w-3", "--owner", "bob", "--due", "tomorrow 09:00", "--reason", "r",
                             "--json", operator="alice", now=now).stdout)
    assert (doc["owner"], doc["due"], doc["reason"], doc["event_id"]) == (
        "bob", "2026-12-02T09:00:00Z", "r", _last_event(ledger_path, "w-3").id)

    # release (bob, not the finding's author): the new attempt and who sends it
    creates = sim.count("create")
    line = _one_line(run_cli("release", "w-1", "--reason", "nothing arrived", operator="bob", now=now))
    ev = _last_event(ledger_path, "w-1")
    assert ev.kind == "release" and ev.actor == "bob"
    assert line.startswith(f"released w-1 / {OP} as bob (event {ev.id}): attempt 2 is "), line
    assert sim.count("create") == creates  # the CLI's release sends nothing itself

    # reconcile (unverified), reject, remediate
    line = _one_line(run_cli("reconcile", "w-2", "--handle", "v1_seen", "--unverified", "--reason", "seen",
                             operator="bob", now=now))
    ev = _last_event(ledger_path, "w-2")
    assert line == (f"reconciled w-2 / {OP} as bob (event {ev.id}): handle v1_seen attached, UNVERIFIED (the "
                    "remote was not asked); the job is submitted; nothing was sent")
    line = _one_line(run_cli("reject", "w-3", "--reason", "cancelled upstream", operator="bob", now=now))
    assert line == (f'rejected w-3 / {OP} as bob (event {_last_event(ledger_path, "w-3").id}): "cancelled upstream"; '
                    "the job is rejected; nothing was sent")
    doc = json.loads(run_cli("remediate", "w-4", "--note", "done by hand, OPS-7", "--json", operator="bob",
                             now=now).stdout)
    assert (doc["action"], doc["note"], doc["state"], doc["event_id"]) == (
        "remediate", "done by hand, OPS-7", "remediated", _last_event(ledger_path, "w-4").id)
    assert sim.count("create") == creates


def test_query_with_a_handle_says_what_the_remote_answered(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    sim.add_fault("complete_lose_reply")
    res = submit_now(conn, cfg, OP, {"input": "lost"}, clock=clock, job_id="lost", remotes=RemoteCache(cfg))
    assert res.state == "held"
    (found,) = sim.find_by_idem(idem_key("lost", OP))
    run_cli("reconcile", "lost", "--handle", found["id"], "--unverified", "--reason", "r", operator="bob",
            now=clock.now())
    lookups = sim.count("get")
    line = _one_line(run_cli("query", "lost", operator="alice", now=clock.now()))
    assert sim.count("get") == lookups + 1  # one lookup by handle, counted at the remote
    assert line.startswith(f"queried lost / {OP} as alice: the remote says completed; handle {found['id']}; "
                           "reply recorded, the job is still submitted"), line


def test_tick_notifications_views_and_empty_listings_speak_in_words(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    now = clock.now()
    assert _one_line(run_cli("notifications", now=now)) == "notifications: none (the outbox is empty)"
    assert json.loads(run_cli("notifications", "--json", now=now).stdout) == []
    assert _one_line(run_cli("jobs", "held", now=now)) == "held jobs (page 1): none"
    assert _one_line(run_cli("jobs", "held", "--filter", "bucket", now=now)) == \
        "held jobs (page 1): none match the filter"
    assert _one_line(run_cli("evidence", "--orphans", now=now)) == "orphan evidence: none"
    assert _one_line(run_cli("views", operator="alice", now=now)) == "saved views of alice: none"
    assert _one_line(run_cli("tick", now=now)) == "tick: nothing to do"

    submit_now(conn, cfg, OP, {"input": "a"}, clock=clock, job_id="t-1", remotes=RemoteCache(cfg))
    ticked = run_cli("tick", now=now)
    assert ticked.rc == 0, ticked
    line = ticked.stdout.splitlines()[-1]  # after the progress lines a pipe gets
    assert line == "tick: polled 1, completed 1, delivered 1" and not REPR.search(line), ticked.stdout

    said = run_cli("views", "--save", "mine", "--filter", "owner:me", operator="alice", now=now)
    assert said.rc == 0 and said.stdout.splitlines()[0] == "saved view mine for alice: held jobs matching 'owner:me'"
    said = run_cli("views", "--delete", "mine", operator="alice", now=now)
    assert said.stdout.splitlines() == ["deleted view mine of alice", "saved views of alice: none"]
