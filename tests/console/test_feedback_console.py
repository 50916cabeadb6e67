"""Feedback you can trust: a line that is only true for a while is taken back when it stops being true, and the
message log (`L`) keeps what was said, the taken-back line included."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_demo import ARTICLE, held_storm
from console_helpers import wait_loaded, wait_until

from console.app import make_app
from console.screens.jobs import JobListScreen
from console.screens.messages import MessagesScreen
from console.screens.overview import OverviewScreen
from console.widgets.job_table import JobTable
from ledger import triage
from ledger.db import connect
from ledger.model import idem_key
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, submit_now

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_the_list_is_empty_now_is_taken_back_when_a_job_is_listed(tmp_path: Path,
                                                                         console_sim: Simulator) -> None:
    ledger, config, clock, [key] = held_storm(tmp_path, console_sim, 1)
    app = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("j")
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        table = screen.query_one(JobTable)
        await wait_until(pilot, lambda: table.key_at_cursor() == key, what="the held job")

        conn = connect(ledger)
        try:
            triage.reject(conn, config, key, actor="bob", clock=clock, reason="closed elsewhere")
        finally:
            conn.close()
        app.wake_follower()
        await wait_until(pilot, lambda: "the list is empty now" in screen.feedback_text, what="the job left")

        conn = connect(ledger)
        try:
            job_id = f"storm-{tmp_path.name}-late"
            console_sim.add_fault("status", status=503, match_idem=idem_key(job_id, ARTICLE))
            res = submit_now(conn, config, ARTICLE, {"input": "late"}, clock=clock, job_id=job_id,
                             remotes=RemoteCache(config))
            assert res.state == "held"
        finally:
            conn.close()
        app.wake_follower()
        await wait_until(pilot, lambda: table.key_at_cursor() == res.key, what="the new held job listed")
        await wait_until(pilot, lambda: "the list is empty now" not in screen.feedback_text, what="the line taken back")
        said = [m for m in app.messages if "the list is empty now" in m.text]
        assert [m.kind for m in said] == ["info", "expired"]

        await pilot.press("L")
        await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), what="the message log")
        log = app.screen.query_one("#messages-table")
        assert log.row_count == len(app.messages) >= 2
