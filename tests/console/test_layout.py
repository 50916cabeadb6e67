"""The console at 80x24 and 160x48: enough held rows, tiles that keep their names, a visible feedback line."""

from __future__ import annotations

import re

import pytest
from console_demo import ARTICLE, Demo
from console_helpers import screen_text, wait_loaded, wait_until, widget_text
from textual.widgets import Static

from console.app import make_app
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from console.widgets.held_table import HeldTable
from console.widgets.timeline import Timeline
from ledger import Ledger
from ledger.db import connect
from ledger.leases import claim_for_send
from ledger.reservation import reserve
from ledger.worker import RemoteCache, TickReport, recover_stale

pytestmark = pytest.mark.anyio


def hold_many(demo: Demo, n: int) -> None:
    """`n` more held jobs: each claimed for a send by a worker that died, then held by the recovery pass."""
    conn = connect(demo.ledger)
    try:
        for i in range(n):
            job_id = f"layout held #{i:02d}"
            key = reserve(conn, demo.config, ARTICLE, {"input": job_id}, clock=demo.clock, job_id=job_id).key
            assert claim_for_send(conn, demo.config, key, owner="worker-9", now=demo.clock.now()) is not None
        demo.clock.advance(demo.config.policy.stale_reserving_seconds + 3600)
        recover_stale(conn, demo.config, RemoteCache(demo.config), clock=demo.clock, owner="worker-1",
                      report=TickReport())
    finally:
        conn.close()


async def test_overview_at_80x24_shows_ten_held_rows_and_tile_names(demo: Demo) -> None:
    hold_many(demo, 14)
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        table = app.screen.query_one(HeldTable)
        await wait_until(pilot, lambda: table.row_count >= 14, what="the held rows")
        shown = screen_text(app)
        visible = [line for line in shown.splitlines() if re.match(r"│ \d+[hms]", line)]  # a row starts with its age
        assert len(visible) >= 10, shown
        tiles = shown.splitlines()[1]
        for name in ("reserv", "submit", "done", "consu", "held", "failed", "resolved"):
            assert name in tiles, tiles
        assert "…" in shown  # a cut cell says so


async def test_held_panel_says_how_many_it_does_not_show(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Ledger.overview
    monkeypatch.setattr(Ledger, "overview", lambda self, held_limit=50: real(self, 3))
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: "3 of 4 held — j for all" in screen_text(app), what="the held count")
        assert app.screen.query_one(HeldTable).row_count == 3


@pytest.mark.slow
async def test_triage_feedback_and_keys_visible_at_80x24(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(demo.jobs["held_reset"])
        await wait_loaded(pilot, JobScreen)
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        await pilot.press("e")  # release with no reason: the line asks for one
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        await wait_until(pilot, lambda: screen.feedback_text.startswith("release:"), what="the feedback")
        lines = screen_text(app).splitlines()
        assert any(line.strip().startswith("release: write a reason first") for line in lines[-4:]), lines
        assert "esc" in lines[-1] and "palette" in lines[-1]


@pytest.mark.slow
async def test_job_times_to_the_second_and_an_event_expands_whole(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(demo.jobs["held_reset"])
        await wait_loaded(pilot, JobScreen)
        screen = app.screen
        assert isinstance(screen, JobScreen)
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ · 4h 10m 00s ago", widget_text(app)), widget_text(app)
        timeline = screen.query_one(Timeline)
        events = [e for e in (screen.detail.events if screen.detail else []) if "lease_until" in e.detail]
        assert events, "the held job's send has a lease"
        timeline.focus()
        timeline.move_cursor(row=[e.id for e in screen.detail.events].index(events[0].id))  # type: ignore[union-attr]
        await pilot.press("enter")
        shown = screen.query_one("#job-event-detail", Static)
        await wait_until(pilot, lambda: "lease_until" in widget_text(app).split("Event #", 1)[-1],
                         what="the expanded event")
        expanded = str(shown.render())
        assert f"Event #{events[0].seq}" in expanded
        for key in events[0].detail:
            assert f'"{key}"' in expanded, (key, expanded)
        assert re.search(r'"lease_until": "\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"', expanded), expanded
        await pilot.press("enter")
        await wait_until(pilot, lambda: str(shown.render()) == "", what="the event to fold away")


@pytest.mark.slow
async def test_nothing_a_person_must_read_is_cut_at_80x24(demo: Demo) -> None:
    """The header's count to approve and live time, every held job's id (one with an owner too) and its stage in
    the overview and the job list, and the triage title's state, all whole at 80x24."""
    from console.screens.jobs import JobListScreen
    from ledger import assign

    conn = connect(demo.ledger)
    try:
        key = demo.jobs["held_reset"]
        assign(conn, demo.config, key, "someone with a long name", demo.clock.now() + 3600, actor="bob",
               clock=demo.clock, reason="knows the remote")
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: app.awaiting_me, what="carol's count to approve")
        await wait_until(pilot, lambda: f"{app.awaiting_me} to approve" in screen_text(app).splitlines()[0]
                         and re.search(r"● \d\d:\d\d:\d\d", screen_text(app).splitlines()[0]),
                         what="the whole header")
        header = screen_text(app).splitlines()[0]
        assert "unverified id" in header, header
        table = app.screen.query_one(HeldTable)
        await wait_until(pilot, lambda: table.row_count >= 1, what="the held rows")
        shown = screen_text(app)
        assert key.job_id in shown and "approve (bob)" in shown, shown  # the owner column gives way to the stage
        assert "awaitin…" not in shown

        await pilot.press("j")
        await wait_loaded(pilot, JobListScreen)
        shown = screen_text(app)
        assert key.job_id in shown, shown
        assert "awaitin…" not in shown and "approve (" in shown, shown

        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        title = str(app.screen.query_one("#triage-title", Static).render())
        assert title.rstrip().endswith("held") and key.job_id in title
        assert key.job_id in screen_text(app) and "·  held" in screen_text(app)
