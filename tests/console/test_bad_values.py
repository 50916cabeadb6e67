"""A time already stored out of range (inf, 1e20, -1e20: written before validation, or by hand) never
crashes a screen: the overview and the job screen draw, and say "invalid" where the time would be."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from console_demo import ARTICLE, write_config
from console_helpers import screen_text, wait_loaded, wait_until, widget_text

from console.app import make_app
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from console.widgets.held_table import HeldTable
from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect, create_ledger
from ledger.leases import claim_for_send
from ledger.model import JobKey
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.worker import record_send_outcome

pytestmark = pytest.mark.anyio
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z

BAD = {"due-inf": ("due_at", float("inf")), "due-1e20": ("due_at", 1e20), "due-neg": ("due_at", -1e20),
       "held-neg-inf": ("held_at", float("-inf")), "created-1e20": ("created_at", 1e20)}


def bad_times_ledger(folder: Path, sim: Simulator) -> Path:
    """Held jobs, then each given one bad stored time by a bare UPDATE (bypassing the ledger's checks)."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    conn = connect(ledger)
    try:
        for job_id in BAD:
            res = reserve(conn, config, ARTICLE, {"input": "x"}, clock=clock, job_id=job_id)
            claim = claim_for_send(conn, config, res.key, owner="worker-1", now=clock.now())
            assert claim is not None
            record_send_outcome(conn, config, claim, SendOutcome("unknown", error="reset", reason="reset"),
                                now=clock.now())
            clock.advance(60)
    finally:
        conn.close()
    raw = sqlite3.connect(ledger)
    try:
        for job_id, (column, value) in BAD.items():
            raw.execute(f"UPDATE jobs SET {column} = ?, owner = 'bob' WHERE job_id = ?", (value, job_id))
        raw.commit()
    finally:
        raw.close()
    return ledger


@pytest.mark.slow
async def test_overview_and_job_screen_show_a_bad_stored_time_as_invalid(
    tmp_path: Path, console_sim: Simulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    ledger = bad_times_ledger(tmp_path, console_sim)
    config = load_config(tmp_path / "reclaim.toml")
    app = make_app(ledger, config, "carol", clock=ManualClock(T))
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        held = app.screen.query_one(HeldTable)
        assert held.row_count == len(BAD)
        rows = {str(held.get_row_at(i)[1]): [str(c) for c in held.get_row_at(i)] for i in range(held.row_count)}
        due = [str(k.value) for k in held.columns].index("due")  # columns empty on every row are hidden
        for job_id in ("due-inf", "due-1e20", "due-neg"):
            assert rows[job_id][due] == "invalid", rows[job_id]
        assert rows["held-neg-inf"][0] == "invalid", rows["held-neg-inf"]  # the age column
        assert "invalid" in screen_text(app)

        for job_id, (column, _) in BAD.items():
            app.open_job(JobKey(job_id, ARTICLE))
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.detail is not None,
                             what=f"the job screen of {job_id}")
            assert "invalid" in widget_text(app), (job_id, column)
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, JobScreen))
        assert app.is_running
