"""An orphan is never out of sight of the job it may belong to (issue 38, item 4).

With label echo off, a delivery of the project's webhook names an interaction whose record names no idem key: it
stays orphan evidence. A held job (its create timed out) whose interaction completed lists that orphan as a
candidate in `show`; a release is refused naming it (exit 14, nothing written, nothing sent) until it is dismissed
by a person or reconciled from; an orphan created outside the job's send window, or of another model, is not a
candidate.

Nothing is crafted on the wire: the simulator's project webhook signs and sends, the receiver serves on a thread of
the test, the sends go through the real SDK, the CLI runs in process, and the ledger is read back fresh.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from ledger import candidates, make_webhook_server
from ledger.clock import SystemClock
from ledger.config import Config, load_config
from ledger.db import connect, write_tx
from ledger.errors import EXIT_UNDECIDED_CANDIDATES
from ledger.model import Evidence, Job, JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, tick

OP = "article.generate"
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
ENV = {"RECLAIM_TEST_WHSEC": SECRET}
WIDE = {**ENV, "COLUMNS": "250"}
MARGIN = 1.0


def labels_off(sim: Simulator) -> None:
    """The remote's GET echoes neither labels nor webhook_config."""
    sim.configure(echo_labels=False, echo_webhook_config=False)


@pytest.fixture
def setup(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
) -> Iterator[tuple[Config, Path]]:
    """A config whose gemini remote verifies the project's webhook, a receiver on a thread, and the simulator
    delivering to it with label echo off."""
    doc = make_config(base_url=sim.url, timeout_seconds=0.5, policy={"send_margin_seconds": MARGIN})
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    config = write_config(doc)
    cfg = load_config(config)
    with mock.patch.dict(os.environ, ENV):
        server = make_webhook_server(ledger_path, cfg, clock=SystemClock())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    sim.configure(webhook_url=f"http://127.0.0.1:{server.server_address[1]}/", webhook_secret=SECRET)
    labels_off(sim)
    try:
        yield cfg, config
    finally:
        server.shutdown()
        server.server_close()
        server.conn.close()


def _tick(ledger: Path, cfg: Config) -> None:
    conn = connect(ledger)
    try:
        tick(conn, cfg, clock=SystemClock(), remotes=RemoteCache(cfg), owner="w1")
    finally:
        conn.close()


def _job(ledger: Path, job_id: str) -> Job:
    conn = connect(ledger, readonly=True)
    try:
        job = jobs_store.find_job(conn, JobKey(job_id, OP))
        assert job is not None
        return job
    finally:
        conn.close()


def _held_by_timeout_then_delivered(
    sim: Simulator, ledger: Path, cfg: Config, job_id: str, wait_for: Callable[..., Any],
) -> tuple[Job, int, str]:
    """A job whose create timed out (held, no handle) though the remote ran it; the project webhook delivers the
    completion, and a worker pass leaves it orphan (no labels echoed). Returns the job, the orphan's evidence id and
    the interaction id."""
    conn = connect(ledger)
    try:
        res = reserve(conn, cfg, OP, {"input": job_id}, clock=SystemClock(), job_id=job_id)
        assert res.job is not None
        sim.add_fault("accept_then_hang", match_idem=res.job.idem_key)
        tick(conn, cfg, clock=SystemClock(), remotes=RemoteCache(cfg), owner="w1")
    finally:
        conn.close()
    job = _job(ledger, job_id)
    assert job.state == "held" and job.handle is None, job
    [stored] = sim.find_by_idem(job.idem_key)
    interaction = str(stored["id"])
    wait_for(lambda: _orphan_of(ledger, interaction) is not None, timeout=30,
             what="the project webhook's delivery of the completion to be recorded")
    _tick(ledger, cfg)
    orphan = _orphan_of(ledger, interaction)
    assert orphan is not None and orphan.outcome is not None and "names no idem key" in orphan.outcome, orphan
    return job, orphan.id, interaction


def _orphan_of(ledger: Path, interaction: str) -> Evidence | None:
    conn = connect(ledger, readonly=True)
    try:
        return next((e for e in evidence_store.orphans(conn) if e.handle == interaction), None)
    finally:
        conn.close()


def _past_arrival(ledger: Path, job: Job, wait_for: Callable[..., Any]) -> None:
    """Wait until the held job's last request can no longer arrive (release waits for it too)."""
    from ledger import triage

    conn = connect(ledger, readonly=True)
    try:
        until = triage.may_arrive_until(conn, job)
    finally:
        conn.close()
    wait_for(lambda: until is None or time.time() > until + 0.05, timeout=MARGIN + 10, what="the arrival moment")


@pytest.mark.slow
def test_release_is_refused_naming_the_candidate_until_it_is_dismissed(
    sim: Simulator, setup: tuple[Config, Path], ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str], wait_for: Callable[..., Any],
) -> None:
    cfg, config = setup
    job, orphan_id, interaction = _held_by_timeout_then_delivered(sim, ledger_path, cfg, "timed-out", wait_for)

    shown = run_cli("show", "timed-out", "--json", config=config, env=ENV)
    assert shown.rc == 0, shown
    [cand] = json.loads(shown.stdout)["candidates"]
    assert (cand["evidence_id"], cand["handle"], cand["remote_state"], cand["matched_by"]) == (
        orphan_id, interaction, "completed", "created")
    assert cand["created"] and cand["arrived"]
    text = run_cli("show", "timed-out", config=config, env=WIDE)
    assert f"evidence:{orphan_id}" in text.stdout and interaction in text.stdout and "CANDIDATES: 1" in text.stdout

    assert run_cli("finding", "timed-out", "--category", "not_received", "--note", "nothing in the console",
                   operator="alice", config=config, env=ENV).rc == 0
    _past_arrival(ledger_path, job, wait_for)
    before, creates = fingerprint(ledger_path), sim.count("create")
    refused = run_cli("release", "timed-out", "--reason", "looks unsent", operator="carol", config=config, env=ENV)
    assert refused.rc == EXIT_UNDECIDED_CANDIDATES == 14, refused
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("reclaim: error: release refused for timed-out / article.generate: 1 orphan delivery "
                           "could be this job's own: ")
    assert f"evidence {orphan_id} (interaction {interaction}, completed)" in line
    assert f"'reclaim reconcile timed-out --handle evidence:{orphan_id} --unverified --reason TEXT' if it is" in line
    assert f"'reclaim dismiss-candidate timed-out --evidence {orphan_id} --reason TEXT' if it is not" in line
    dry = run_cli("release", "timed-out", "--reason", "x", "--dry-run", "--json", operator="carol", config=config,
                  env=ENV)
    assert json.loads(dry.stdout)["allowed"] is False
    assert fingerprint(ledger_path) == before and sim.count("create") == creates

    # A viewer may not dismiss; a triage account may, with a reason; the event is on the job.
    assert run_cli("dismiss-candidate", "timed-out", "--evidence", str(orphan_id), "--reason", "x",
                   operator="dave", config=config, env=ENV).rc == 6
    assert run_cli("dismiss-candidate", "timed-out", "--evidence", str(orphan_id), operator="alice", config=config,
                   env=ENV).rc == 2  # no reason: refused in one line
    assert fingerprint(ledger_path) == before
    done = run_cli("dismiss-candidate", "timed-out", "--evidence", f"evidence:{orphan_id}", "--reason",
                   "AI Studio shows that interaction under another project's key", operator="alice", config=config,
                   env=WIDE)
    assert done.rc == 0, done
    assert f"dismissed evidence {orphan_id}" in done.stdout and "no candidate left to decide" in done.stdout
    conn = connect(ledger_path, readonly=True)
    try:
        [ev] = [e for e in events_store.job_events(conn, job.key) if e.kind == "candidate_dismissed"]
    finally:
        conn.close()
    assert (ev.actor, ev.detail["evidence_id"], ev.detail["handle"]) == ("alice", orphan_id, interaction)
    again = run_cli("dismiss-candidate", "timed-out", "--evidence", str(orphan_id), "--reason", "twice",
                    operator="alice", config=config, env=ENV)
    assert again.rc == 6, again
    assert json.loads(run_cli("show", "timed-out", "--json", config=config, env=ENV).stdout)["candidates"] == []

    released = run_cli("release", "timed-out", "--reason", "the candidate was another project's", operator="carol",
                       config=config, env=ENV)
    assert released.rc == 0, released
    assert _job(ledger_path, "timed-out").state == "reserving"
    assert sim.count("create") == creates  # the release itself sends nothing; the next pass does
    verified = run_cli("verify", config=config, env=ENV)
    assert verified.rc == 0, verified


def test_reconcile_from_the_candidate_ends_it_and_nothing_is_sent_twice(
    sim: Simulator, setup: tuple[Config, Path], ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    cfg, config = setup
    job, orphan_id, interaction = _held_by_timeout_then_delivered(sim, ledger_path, cfg, "ran", wait_for)
    done = run_cli("reconcile", "ran", "--handle", f"evidence:{orphan_id}", "--unverified", "--reason",
                   "created 2 s after our send, same model; the console shows our input", operator="bob",
                   config=config, env=ENV)
    assert done.rc == 0, done
    after = _job(ledger_path, "ran")
    assert after.state == "submitted" and after.handle == interaction
    assert json.loads(run_cli("show", "ran", "--json", config=config, env=ENV).stdout)["candidates"] == []
    _tick(ledger_path, cfg)
    assert _job(ledger_path, "ran").state in ("done", "consumed")
    assert sim.count("create", job.idem_key) == 1


def test_an_orphan_outside_the_window_or_of_another_model_is_not_a_candidate(
    sim: Simulator, setup: tuple[Config, Path], ledger_path: Path, run_cli: Callable[..., Any],
    wait_for: Callable[..., Any],
) -> None:
    cfg, config = setup
    job, orphan_id, _ = _held_by_timeout_then_delivered(sim, ledger_path, cfg, "windowed", wait_for)
    window = None
    conn = connect(ledger_path)
    try:
        window = candidates.send_window(conn, cfg, job)
        assert window is not None
        now = time.time()
        with write_tx(conn):
            ids = {}
            for name, created, model in (
                ("before", window[0] - 600, cfg.remotes["gemini"].model),  # created long before the send
                ("after", window[1] + 600, cfg.remotes["gemini"].model),  # created long after the hold
                ("model", (window[0] + window[1]) / 2, "models/some-other-model"),  # in time, another model
                ("same", (window[0] + window[1]) / 2, f"models/{cfg.remotes['gemini'].model}"),  # could be it
            ):
                ids[name] = evidence_store.record(
                    conn, at=now, source="webhook", idem_key="", attempt=None, handle=f"v1_{name}",
                    remote_state="completed", job=None, ref=f"msg_{name}",
                    detail={"type": "interaction.completed", "remote": "gemini"})
                evidence_store.mark_handled(conn, ids[name], "orphan: the interaction's record names no idem key", now,
                                      {"created": created, "model": model})
            # signed for a remote no operation of this job uses: not this job's either
            ids["other-remote"] = evidence_store.record(
                conn, at=now, source="webhook", idem_key="", attempt=None, handle="v1_elsewhere",
                remote_state="completed", job=None, ref="msg_elsewhere",
                detail={"type": "interaction.completed", "remote": "another-remote"})
            # not read yet (the GET failed so far): a candidate by its arrival
            ids["unread"] = evidence_store.record(
                conn, at=now, source="webhook", idem_key="", attempt=None, handle="v1_unread",
                remote_state="completed", job=None, ref="msg_unread",
                detail={"type": "interaction.completed", "remote": "gemini"})
        found = {c.evidence_id: c for c in candidates.candidates(conn, cfg, job)}
    finally:
        conn.close()
    assert set(found) == {orphan_id, ids["same"], ids["unread"]}, found
    assert found[ids["unread"]].matched_by == "arrival" and found[ids["same"]].matched_by == "created"
    shown = json.loads(run_cli("show", "windowed", "--json", config=config, env=ENV).stdout)
    assert {c["evidence_id"] for c in shown["candidates"]} == set(found)
    refused = run_cli("dismiss-candidate", "windowed", "--evidence", str(ids["before"]), "--reason", "x",
                      operator="alice", config=config, env=ENV)
    assert refused.rc == 6 and f"evidence {ids['before']} is not a candidate" in refused.stderr, refused
