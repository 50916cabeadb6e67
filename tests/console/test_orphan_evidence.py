"""Orphan evidence: a signed delivery that names no job here is listed with its id, not lost (key `v`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_demo import ARTICLE, Demo, write_config
from console_helpers import wait_loaded, wait_until, widget_text
from test_triage import T, fingerprint, guard, open_triage

from console.app import make_app
from console.screens.evidence import EvidenceScreen
from console.screens.overview import OverviewScreen
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect, create_ledger, write_tx
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import evidence as evidence_store
from ledger.worker import RemoteCache, submit_now

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_orphan_evidence_is_listed_with_what_the_remote_said(demo: Demo) -> None:
    conn = connect(demo.ledger)
    try:
        with write_tx(conn):
            evidence_store.record(conn, at=demo.clock.now(), source="webhook", idem_key="e" * 32, attempt=2,
                            handle="v1_orphan[red]x[/red]", remote_state="completed", job=None, ref="msg_orphan")
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("v")
        await wait_loaded(pilot, EvidenceScreen)
        await wait_until(pilot, lambda: "v1_orphan" in widget_text(app), what="the orphan row")
        text = widget_text(app)
        assert "evidence:" in text and "completed" in text and "awaiting attribution" in text
        assert "v1_orphan[red]x[/red]" in text  # shown literally, never as markup


@pytest.mark.slow
async def test_a_held_jobs_screens_show_the_orphan_that_could_be_its_own_and_release_waits(
    tmp_path: Path, console_sim: Simulator,
) -> None:
    """Label echo off: a delivery whose interaction names no idem key, created within a held job's send window with
    its model, is shown on the job and triage screens (not 'Evidence: none'), and release is disabled naming it."""
    config = load_config(write_config(tmp_path, console_sim.url))
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    key = JobKey("unheard 2026-12-01", ARTICLE)  # its own idem key: the session's simulator counts per key
    console_sim.add_fault("drop_before_accept", match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    try:
        assert submit_now(conn, config, ARTICLE, {"input": "x"}, clock=clock, job_id=key.job_id,
                          remotes=RemoteCache(config)).state == "held"
        clock.set(T)
        job = triage.get_job(conn, key)
        assert job.send_started_at is not None
        with write_tx(conn):
            orphan = evidence_store.record(
                conn, at=job.send_started_at + 5, source="webhook", idem_key="", attempt=None,
                handle="v1_unlabelled[b]x[/b]", remote_state="completed", job=None, ref="msg_unlabelled",
                detail={"type": "interaction.completed", "remote": config.operations[key.operation].remote})
            evidence_store.mark_handled(conn, orphan, "orphan: the interaction's record names no idem key", clock.now(),
                                  {"created": job.send_started_at + 0.5, "model": config.remotes[
                                      config.operations[key.operation].remote].model})
        triage.record_finding(conn, config, key, "not_received", "nothing in the console", actor="alice", clock=clock)
    finally:
        conn.close()
    before = fingerprint(ledger)
    app = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        await wait_until(pilot, lambda: "Candidates: 1 orphan delivery" in widget_text(app), what="the candidate")
        text = widget_text(app)
        assert f"evidence:{orphan}" in text and "v1_unlabelled[b]x[/b]" in text  # literal, never markup
        assert "Evidence: none for this attempt yet" not in text
        release = guard(screen, "release")
        assert release.allowed is False and release.reason is not None
        assert release.reason.startswith("1 orphan delivery could be this job's own: evidence "
                                         f"{orphan} (interaction v1_unlabelled[b]x[/b], completed)"), release.reason
        assert screen.check_action("act", ("release",)) is None
    assert fingerprint(ledger) == before
