"""A new job refused by a hold links to the held job: in the event feed (Enter opens it), its timeline, and why it is held."""

from __future__ import annotations

import pytest
from console_demo import ARTICLE, Demo
from console_helpers import wait_loaded, wait_until, widget_text
from textual.widgets import DataTable

from console.app import make_app
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from console.widgets.event_feed import EventFeed
from ledger.db import connect
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

pytestmark = pytest.mark.anyio


def reserve_on(demo: Demo, job_id: str, target: str) -> str:
    """Try a new job on `target` from another connection; the reserve outcome."""
    conn = connect(demo.ledger)
    try:
        return reserve(conn, demo.config, ARTICLE, {"input": job_id}, clock=demo.clock, job_id=job_id,
                       target=target, actor="scheduler").outcome
    finally:
        conn.close()


def timeline_details(screen: JobScreen) -> list[str]:
    table = screen.query_one("#job-timeline", DataTable)
    return [table.get_row_at(i)[6].plain for i in range(table.row_count)]


@pytest.mark.slow
async def test_refused_new_job_links_to_the_held_job(demo: Demo) -> None:
    held = demo.jobs["held_lost_reply"]  # article today #09, target blog/post-0009
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        assert reserve_on(demo, "article today #09 (again)", "blog/post-0009") == "blocked_by_hold"
        feed = app.screen.query_one(EventFeed)
        await wait_until(pilot, lambda: bool(feed.shown) and feed.shown[0].kind == "blocked_new_job", timeout=5.0,
                         what="the refusal at the top of the feed")
        top = [cell.plain for cell in feed.get_row_at(0)]
        assert top[1] == "article today #09" and top[3] == "blocked_new_job"
        assert top[4] == "refused article today #09 (again)"

        await pilot.press("e")
        assert app.focused is feed and feed.cursor_row == 0
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        screen = app.screen
        assert isinstance(screen, JobScreen) and screen.key == held  # the event's job: the held one, the link
        sentence = ("refused new job article today #09 (again) (article.generate) on target blog/post-0009: "
                    "this job is held")
        assert sentence in timeline_details(screen)
        text = widget_text(app)
        assert "Blocking: 1 new job on target blog/post-0009 was refused while this job is held" in text
        assert sentence in screen.query_one("#job-blocked").render().plain  # type: ignore[attr-defined]

    conn = connect(demo.ledger, readonly=True)
    try:  # refused: no job, and the refusal is an event on the held job
        assert jobs_store.find_job(conn, JobKey("article today #09 (again)", ARTICLE)) is None
        assert [e.detail["job_id"] for e in events_store.job_events(conn, held) if e.kind == "blocked_new_job"] == [
            "article today #09 (again)"
        ]
    finally:
        conn.close()


@pytest.mark.slow
async def test_feed_cursor_stays_on_its_event_while_new_ones_arrive(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        feed = app.screen.query_one(EventFeed)
        await pilot.press("e", "down")  # the demo's refusal recorded on article today #07, second from the top
        chosen = feed.event_at_cursor()
        assert chosen is not None and chosen.kind == "blocked_new_job" and chosen.job_id == "article today #07"
        assert reserve_on(demo, "a fresh post", "blog/fresh") == "reserved"
        await wait_until(pilot, lambda: feed.shown[0].job_id == "a fresh post", timeout=5.0, what="the new event")
        assert feed.cursor_row == 2 and feed.event_at_cursor() == chosen
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        assert isinstance(app.screen, JobScreen) and app.screen.key == demo.jobs["held_reset"]
