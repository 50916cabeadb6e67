"""Live: a change committed by another connection appears by itself; pause holds it; a vanished, unreadable or
locked ledger goes STALE while the console keeps answering keys, and it recovers by itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable

import pytest
from console_demo import ARTICLE, Demo
from console_helpers import screen_text, wait_loaded, wait_until
from textual.message import Message
from textual.widgets import DataTable

from console.app import ReclaimApp, make_app
from console.screens.help import HelpScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.widgets.event_feed import EventFeed
from console.widgets.group_counts import GroupCounts
from console.widgets.ledger_header import LedgerHeader
from ledger.db import connect
from ledger.reservation import reserve

pytestmark = pytest.mark.anyio


def feed_jobs(table: DataTable) -> list[str]:  # type: ignore[type-arg]
    return [table.get_row_at(i)[1].plain for i in range(table.row_count)]


def add_job(demo: Demo, job_id: str) -> None:
    conn = connect(demo.ledger)
    try:
        assert reserve(conn, demo.config, ARTICLE, {"input": job_id}, clock=demo.clock, job_id=job_id).outcome == "reserved"
    finally:
        conn.close()


def _recorded_pulses() -> tuple[list[ReclaimApp.LiveChanged], Callable[[Message], None]]:
    """A message hook for run_test that records every live change the app receives, and the list it records to."""
    pulses: list[ReclaimApp.LiveChanged] = []

    def hook(message: Message) -> None:
        if isinstance(message, ReclaimApp.LiveChanged):
            pulses.append(message)

    return pulses, hook


@pytest.mark.slow
async def test_change_from_another_connection_appears(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    pulses, hook = _recorded_pulses()
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        tiles = app.screen.query_one(GroupCounts)
        before = tiles.count_of("reserving") or 0
        add_job(demo, "written by another process")
        took = await wait_until(
            pilot, lambda: "written by another process" in feed_jobs(app.screen.query_one(EventFeed))
            and tiles.count_of("reserving") == before + 1, timeout=5.0, what="the new job on screen",
        )
        assert took < 1.5, f"took {took:.2f}s to appear"
        new = [e for p in pulses if not p.pulse.reset for e in p.pulse.events]
        assert [e.job_id for e in new] == ["written by another process"]  # by cursor, not a reload
        # The job list, when visible, refreshes its page too.
        await pilot.press("1")
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "reserving")
        add_job(demo, "and another one")
        await wait_until(pilot, lambda: screen.page is not None
                         and any(j.job_id == "and another one" for j in screen.page.jobs), timeout=5.0,
                         what="the visible page refreshed")


@pytest.mark.slow
async def test_pause_holds_live_refresh(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("p")
        assert app.paused
        # The class is set at once; the badge is on screen once the next frame is drawn.
        await wait_until(pilot, lambda: "PAUSED" in screen_text(app), timeout=5.0, what="PAUSED on screen")
        pulses = app.pulses
        add_job(demo, "while paused")
        polls = app.polls
        await wait_until(pilot, lambda: app.polls >= polls + 3, what="three poll intervals")
        assert app.pulses == pulses
        await pilot.press("p")
        await wait_until(pilot, lambda: "while paused" in feed_jobs(app.screen.query_one(EventFeed)), timeout=5.0)


async def test_vanished_ledger_goes_stale_and_recovers(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        header = app.screen.query_one(LedgerHeader)
        moved = demo.ledger.with_suffix(".moved")
        os.rename(demo.ledger, moved)
        await wait_until(pilot, lambda: header.has_class("-stale"), timeout=5.0, what="the STALE badge")
        # The class is set first; the badge is on screen once the next frame is drawn.
        await wait_until(pilot, lambda: "STALE" in screen_text(app), timeout=5.0, what="STALE on screen")
        assert "gone" in app.stale
        os.rename(moved, demo.ledger)
        await wait_until(pilot, lambda: not header.has_class("-stale"), timeout=15.0, what="recovery")
        add_job(demo, "after recovery")
        await wait_until(pilot, lambda: "after recovery" in feed_jobs(app.screen.query_one(EventFeed)), timeout=5.0)
        assert app.is_running


async def test_unreadable_ledger_goes_stale_and_recovers(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        header = app.screen.query_one(LedgerHeader)
        kept = demo.ledger.with_suffix(".kept")
        shutil.copy(demo.ledger, kept)
        junk = demo.ledger.with_suffix(".junk")
        junk.write_bytes(b"this is not a SQLite database\n" * 200)
        os.replace(junk, demo.ledger)  # a new file where the ledger was: the follower reopens it
        await wait_until(pilot, lambda: header.has_class("-stale"), timeout=5.0, what="the STALE badge")
        assert "not a SQLite database" in app.stale
        os.replace(kept, demo.ledger)
        await wait_until(pilot, lambda: not header.has_class("-stale"), timeout=15.0, what="recovery")


@pytest.mark.slow
async def test_locked_ledger_goes_stale_keeps_answering_and_recovers(demo: Demo) -> None:
    """What blocks a reader: BEGIN EXCLUSIVE on a rollback-journal ledger (a copy a backup tool may leave; the
    console opens it read-only, so it stays in that mode). In WAL mode (every ledger reclaim writes) nothing another
    connection does blocks a reader already connected, with SQLite 3.40: BEGIN EXCLUSIVE does not, and
    locking_mode=EXCLUSIVE cannot take its lock while the follower's connection is open."""
    raw = sqlite3.connect(demo.ledger, isolation_level=None)
    assert raw.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    raw.close()
    app = make_app(demo.ledger, demo.config, "carol", read_only=True, clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        header = app.screen.query_one(LedgerHeader)
        locker = sqlite3.connect(demo.ledger, isolation_level=None, timeout=10)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            await wait_until(pilot, lambda: header.has_class("-stale"), timeout=15.0, what="the STALE badge")
            await wait_until(pilot, lambda: "STALE" in screen_text(app), timeout=15.0, what="STALE drawn")
            assert "has not answered" in app.stale
            since = app.polling_since
            assert since is not None  # the follower is inside one poll, held by the lock ...
            await pilot.press("question_mark")  # ... and a key is handled all the same
            assert isinstance(app.screen, HelpScreen) and app.polling_since == since
            await pilot.press("escape")
            assert isinstance(app.screen, OverviewScreen)
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        await wait_until(pilot, lambda: not header.has_class("-stale"), timeout=15.0, what="recovery")
        add_job(demo, "after the lock")  # read-only console: written by another connection
        await wait_until(pilot, lambda: "after the lock" in feed_jobs(app.screen.query_one(EventFeed)), timeout=15.0)


async def test_a_live_change_or_a_worker_reply_arriving_as_the_app_closes_changes_nothing(demo: Demo) -> None:
    """The follower and workers post to the app from their own threads: one may land after the last screen
    was popped on quitting. It must then do nothing, not fail the app with "No screens on stack"."""
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    pulses, hook = _recorded_pulses()
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: bool(pulses), what="the follower's first pulse")
        assert app.shown_screen() is app.screen
    assert app.screen_stack == [] and app.shown_screen() is None
    seen = app.pulses
    app._live_changed(ReclaimApp.LiveChanged(pulses[-1].pulse))  # the late message, handled as the app would
    app.say("a worker's late reply")
    assert app.pulses == seen + 1  # handled (counted), and nothing raised


async def test_a_live_change_arriving_while_a_screen_lacks_its_widgets_waits_for_its_resume(demo: Demo) -> None:
    """A pulse can land between a screen's push and its compose, or while its widgets are removed as the app closes
    (the follower posts from its own thread): nothing raises, and the screen shows the counts kept by the app once it
    resumes."""
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    pulses, hook = _recorded_pulses()
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: bool(pulses), what="the follower's first pulse")
        fresh = OverviewScreen()
        app.push_screen(fresh)
        assert not fresh.is_mounted
        app._live_changed(ReclaimApp.LiveChanged(pulses[-1].pulse))  # before its compose: nothing raised
        await wait_loaded(pilot, OverviewScreen)
        counts = fresh.query_one(GroupCounts)
        await wait_until(pilot, lambda: app.counts is not None and counts.count_of("held") == app.counts["held"],
                         what="the kept counts shown after the resume")
        assert counts.is_mounted and app.screen is fresh
        await counts.remove()  # as the app's closing removes a screen's widgets while it is still on the stack
        app._live_changed(ReclaimApp.LiveChanged(pulses[-1].pulse))  # nothing raised
        assert app.screen is fresh
