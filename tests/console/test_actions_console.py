"""The console keeps the action table's rules: a decision without its reason is asked for, never written; the job
list's filter refuses an unknown key (saying so in the list's info line, the list unchanged) and finds jobs by why they are held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_demo import Demo
from console_helpers import wait_loaded, wait_until, widget_text
from ledger_reads import job_fingerprint
from textual.widgets import Input, Label

from console.app import make_app
from console.screens.confirm import ConfirmScreen
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from console.widgets.job_table import JobTable
from ledger import actions
from ledger.db import connect
from ledger.store import jobs as jobs_store

pytestmark = pytest.mark.anyio


def fingerprint(path: Path) -> str:
    conn = connect(path, readonly=True)
    try:
        return job_fingerprint(conn)
    finally:
        conn.close()


def held_reasons(path: Path) -> dict[str, str]:
    conn = connect(path, readonly=True)
    try:
        return {j.job_id: f"{j.held_reason} {j.last_error}" for j in jobs_store.list_jobs(conn, "held")}
    finally:
        conn.close()


@pytest.mark.slow
async def test_a_decision_without_its_reason_is_asked_for_and_writes_nothing(demo: Demo) -> None:
    before = fingerprint(demo.ledger)
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)  # carol may release: bob wrote the finding
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(demo.jobs["held_reset"])
        await wait_loaded(pilot, JobScreen)
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        assert screen.detail is not None and screen.detail.previews["release"].allowed
        for key, action in (("e", "release"), ("x", "reject"), ("m", "remediate")):
            screen.query_one("#decision-reason", Input).value = "   "
            await pilot.press(key)
            asked = actions.ACTIONS[action].fields[0].ask
            await wait_until(pilot, lambda asked=asked: asked in widget_text(app), what=f"the {action} prompt")
            assert not isinstance(app.screen, ConfirmScreen)
            if app.focused is not None and isinstance(app.focused, Input):
                screen.query_one("#triage-body").focus()  # back to keys for the next action
    assert fingerprint(demo.ledger) == before


async def test_the_filter_refuses_an_unknown_key_and_matches_the_held_reason(demo: Demo) -> None:
    reasons = held_reasons(demo.ledger)
    resets = sorted(j for j, why in reasons.items() if "reset" in why)
    assert resets and len(resets) < len(reasons)  # the demo holds jobs for different reasons
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("5")  # held
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        table = screen.query_one(JobTable)
        bar = screen.query_one(Input)
        info = screen.query_one("#jobs-info", Label)

        bar.value = "foo:bar"
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "foo:bar",
                         what="the refused filter's page")
        page = screen.page
        assert page is not None and page.error is not None and page.jobs == []
        assert "filter key 'foo:': unknown" in page.error and "reason:" in page.error
        text: Any = info.content
        assert "filter refused: filter key 'foo:': unknown" in str(getattr(text, "plain", text))
        assert table.row_count == 4  # the refused filter leaves the list as it was (the held jobs)

        bar.value = "reason:reset"
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "reason:reset",
                         what="the reason filter's page")
        assert screen.page is not None and screen.page.error is None
        assert sorted(table.get_row_at(i)[1].plain for i in range(table.row_count)) == resets


async def test_a_page_that_arrives_while_the_console_quits_is_dropped(demo: Demo) -> None:
    # A page read in a worker can arrive after the list's widgets were taken down (quitting): it used to raise
    # NoMatches in the handler, which made quitting fail.
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("5")  # held
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen) and screen.page is not None
        shown = screen.page
        await screen.query_one(JobTable).remove()  # as the app's teardown does
        screen.post_message(JobListScreen.Loaded(shown))
        await pilot.pause()
        assert screen.page is shown
        assert app._exception is None
