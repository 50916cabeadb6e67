"""The demo's faults on storage clean-ups: a clean-up whose reply the demo's simulator loses is held, and a query in
triage presets the finding and the handle from the remote's answer.

The demo's own config (`console.demo.prepare`), job generator (`console.demo_feed.new_job`), clean-up fault rates and
seed (`CLEANUP_FAULT_RATES`, `SIMULATOR_SEED`) and worker passes, against a loopback simulator set as `reclaim demo`
sets its own; the console runs in process as alice.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import wait_loaded, wait_until
from textual.widgets import Input, Select

from console.app import make_app
from console.demo import CLEANUP_FAULT_RATES, SIMULATOR_SEED, prepare
from console.demo_feed import new_job
from console.screens.job import JobScreen
from console.screens.triage import TriageScreen
from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, tick

pytestmark = pytest.mark.anyio
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z
CLEANUP = "storage.cleanup"


def test_the_demo_injects_faults_on_cleanups_too() -> None:
    assert CLEANUP_FAULT_RATES and 0 < sum(CLEANUP_FAULT_RATES.values()) <= 1
    with Simulator().start() as sim:
        sim.set_fault_rates(CLEANUP_FAULT_RATES, seed=SIMULATOR_SEED, method="cleanup")
        assert sim.fault_rates("cleanup") == CLEANUP_FAULT_RATES
        assert sim.fault_rates() == {}  # Gemini's creates keep their own rates (and their own draws)


def held_cleanup_the_remote_ran(folder: Path, sim: Simulator) -> tuple[Path, ManualClock, JobKey]:
    """The demo's feed, clean-ups only, until one is held whose job the simulator holds (its reply was lost)."""
    ledger, config_path = prepare(folder, sim.url)
    config = load_config(config_path)
    clock = ManualClock(T)
    remotes = RemoteCache(config)
    conn = connect(ledger)
    try:
        for n in range(10, 810, 10):  # every 10th job of the feed is a clean-up
            key = new_job(conn, config, clock, n).key
            tick(conn, config, clock=clock, remotes=remotes)
            job = jobs_store.find_job(conn, key)
            ran = [j for j in sim.cleanup_jobs() if j["key"] == idem_key(key.job_id, CLEANUP)]
            if job is not None and job.state == "held" and ran:
                return Path(ledger), clock, key
            clock.advance(10)
    finally:
        conn.close()
    raise AssertionError("80 clean-ups of the demo's feed and none held whose reply was lost")


@pytest.mark.slow
async def test_the_demos_cleanup_fault_presets_the_finding_and_the_handle(tmp_path: Path) -> None:
    with Simulator().start() as sim:
        sim.set_fault_rates(CLEANUP_FAULT_RATES, seed=SIMULATOR_SEED, method="cleanup")
        ledger, clock, key = held_cleanup_the_remote_ran(tmp_path / "demo", sim)
        remote_job = next(j for j in sim.cleanup_jobs() if j["key"] == idem_key(key.job_id, CLEANUP))
        config = load_config(tmp_path / "demo" / "reclaim.toml")
        app = make_app(ledger, config, "alice", clock=clock, start_job=(key.job_id, key.operation))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_loaded(pilot, JobScreen)
            await pilot.press("t")
            await wait_loaded(pilot, TriageScreen)
            screen = app.screen
            assert isinstance(screen, TriageScreen) and screen.key == key
            category = screen.query_one("#finding-category", Select)
            assert category.is_blank()  # nothing known yet: the query decides
            await pilot.press("r")  # a read: no confirmation
            await wait_until(pilot, lambda: "step 2 is set to" in screen.feedback_text, timeout=20,
                             what="the query's answer and the preset")
            expected = "completed_reply_lost" if remote_job["status"] == "completed" else "in_progress"
            assert category.value == expected
            assert screen.query_one("#decision-handle", Input).value == remote_job["id"]
        conn = connect(ledger, readonly=True)
        try:
            events = events_store.job_events(conn, key)
        finally:
            conn.close()
        query = [e for e in events if e.kind == "remote_query"]
        assert [e.actor for e in query] == ["alice"] and query[0].detail["handle"] == remote_job["id"]
