"""The Report screen: the figures `reclaim report` computes for the last 7 days, drawn at 80x24 and 160x48."""

from __future__ import annotations

import pytest
from console_demo import Demo
from console_helpers import screen_text, wait_loaded
from textual.widgets import DataTable, Sparkline

from console.app import make_app
from console.screens.report import WINDOW_SECONDS, ReportScreen, took
from ledger.db import connect
from ledger.report import ENDINGS, build

pytestmark = pytest.mark.anyio


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_report_screen_shows_the_reports_figures(demo: Demo, size: tuple[int, int]) -> None:
    conn = connect(demo.ledger, readonly=True)  # the expected figures, from a fresh connection
    try:
        now = demo.clock.now()
        expected = build(conn, demo.config, now - WINDOW_SECONDS, now)
    finally:
        conn.close()
    total = expected.total
    assert total.holds > 0 and total.time_to_decision.count > 0  # the demo has held and decided jobs to show
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        await pilot.press("R")
        await wait_loaded(pilot, ReportScreen)
        screen = app.screen
        text = " ".join(screen_text(app).split())
        assert f"{total.holds:,} holds" in text
        for e in ENDINGS:
            assert f"{total.endings.get(e, 0):,} {e}" in text, e
        t = total.time_to_decision
        assert f"p50 {took(t.p50)}" in text and f"p90 {took(t.p90)}" in text and f"max {took(t.max)}" in text
        assert list(screen.query_one("#report-held", Sparkline).data or []) == [d.held for d in expected.days]
        assert list(screen.query_one("#report-decided", Sparkline).data or []) == [d.decided for d in expected.days]
        assert "held per day" in text and "decided per day" in text
        table = screen.query_one("#report-table", DataTable)
        rows = {table.get_row_at(i)[0].plain: table.get_row_at(i) for i in range(table.row_count)}
        for f in [*expected.remotes, *expected.operations]:
            row = rows[f"{f.scope} {f.name}"]
            assert row[1] == f"{f.holds:,}" and row[2 + len(ENDINGS) - 1] == f"{f.endings.get('open', 0):,}"
        await pilot.press("escape")
        assert not isinstance(app.screen, ReportScreen)


@pytest.mark.slow
async def test_the_held_job_screens_show_what_the_remote_can_answer(demo: Demo) -> None:
    from console.screens.job import JobScreen
    from console.screens.triage import TriageScreen
    from ledger.remote_answers import answers

    key = demo.jobs["held_reset"]
    conn = connect(demo.ledger, readonly=True)
    try:
        remote = demo.config.operations[key.operation].remote
        expected = next(a.beyond_capabilities() for a in answers(conn, demo.config, demo.clock.now())
                        if a.name == remote)
    finally:
        conn.close()
    assert expected == f"{remote}: retention not declared"  # webhooks off: said once, above
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        shown = str(app.screen.query_one("#job-remote").content)
        assert expected in shown
        # Each thing once: what the remote can be asked, and whether webhooks are on.
        assert shown.count("look a job up by its handle") == 1 and "lookup by handle only" not in shown
        assert shown.count("webhooks are off") == 1 and "webhooks not configured" not in shown
        app.open_triage(key)
        await wait_loaded(pilot, TriageScreen)
        assert expected in str(app.screen.query_one("#triage-remote").content)
