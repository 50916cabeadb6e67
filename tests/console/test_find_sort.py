"""Find and sort on the job list: a click on a column header has the ledger sort by it (again: the other way), `s`
flips and `S` moves to the next column; `:job` and `/` find a job by prefix or substring in any group, and the
command line completes job ids."""

from __future__ import annotations

from typing import Any

import pytest
from console_demo import Demo
from console_helpers import wait_loaded, wait_until
from textual.pilot import Pilot
from textual.widgets import Input, Static

from console.app import ReclaimApp, make_app
from console.screens.command import CommandScreen
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.screens.pick import PickMatchScreen
from console.widgets.filter_bar import FilterBar
from console.widgets.job_table import JobTable
from ledger import JobKey
from ledger.db import connect
from ledger.store import jobs as jobs_store

pytestmark = pytest.mark.anyio


def app_for(demo: Demo) -> ReclaimApp:
    return make_app(demo.ledger, demo.config, "carol", clock=demo.clock)  # type: ignore[arg-type]


def ledger_order(demo: Demo, group: str, sort: str, ascending: bool, limit: int) -> list[JobKey]:
    """The order the ledger gives, read on a fresh connection."""
    conn = connect(demo.ledger)
    try:
        return [j.key for j in jobs_store.list_jobs(conn, group, sort=sort, oldest_first=ascending, limit=limit)]
    finally:
        conn.close()


async def click_header(pilot: Pilot[Any], table: JobTable, label: str) -> None:
    """Click the header of the column `label` (by where the table draws it)."""
    x = 0
    for column in table.ordered_columns:
        if column.key.value == label:
            await pilot.click(JobTable, offset=(x + 1, 0))
            return
        x += column.get_render_width(table)
    raise AssertionError(f"no column {label!r} in {[c.key.value for c in table.ordered_columns]}")


async def test_a_header_click_sorts_by_its_column_both_ways_in_the_ledgers_order(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("5")  # the held jobs
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        table = screen.query_one(JobTable)
        await wait_until(pilot, lambda: screen.page is not None and screen.page.jobs, what="held jobs")
        size = screen.page_size

        def shows(sort: str, ascending: bool) -> bool:
            page = screen.page
            return page is not None and (page.sort, page.oldest_first) == (sort, ascending) and \
                table.visible_keys() == [j.key for j in page.jobs]

        for label, sort in (("owner", "owner"), ("last word", "reason"), ("job", "job"), ("age", "age")):
            await click_header(pilot, table, label)
            await wait_until(pilot, lambda s=sort: shows(s, True), what=f"sorted by {sort}")
            assert table.visible_keys() == ledger_order(demo, "held", sort, True, size)
            head = next(c for c in table.ordered_columns if c.key.value == label)
            assert head.label.plain.endswith("▲")
            await click_header(pilot, table, label)  # again: the other way
            await wait_until(pilot, lambda s=sort: shows(s, False), what=f"sorted by {sort}, descending")
            assert table.visible_keys() == ledger_order(demo, "held", sort, False, size)
            assert next(c for c in table.ordered_columns if c.key.value == label).label.plain.endswith("▼")
        assert ledger_order(demo, "held", "owner", True, size) != ledger_order(demo, "held", "owner", False, size)

        table.focus()
        await pilot.press("S")  # from age to the next column (job), ascending
        await wait_until(pilot, lambda: shows("job", True), what="S sorts by job id")
        await pilot.press("s")  # flips it
        await wait_until(pilot, lambda: shows("job", False), what="s flips the order")
        assert table.visible_keys() == ledger_order(demo, "held", "job", False, size)
        assert "by job id Z→A" in str(screen.query_one("#jobs-info").render())

        await click_header(pilot, table, "stage")  # computed, not a column of the ledger: said, not sorted
        await wait_until(pilot, lambda: "cannot be sorted" in screen.feedback_text, what="stage refused")
        assert screen.page is not None and screen.page.sort == "job"


DONE = JobKey("article today #16", "article.generate")
"""The demo's one done job."""


async def held_list(pilot: Pilot[Any]) -> JobListScreen:
    await wait_loaded(pilot, OverviewScreen)
    await pilot.press("5")  # the held jobs
    await wait_loaded(pilot, JobListScreen)
    screen = pilot.app.screen
    assert isinstance(screen, JobListScreen) and screen.group == "held"
    return screen


async def command_line(pilot: Pilot[Any], text: str) -> Input:
    """Open `:` and type `text` into it."""
    await pilot.press("colon")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CommandScreen), what="the command line")
    line = pilot.app.screen.query_one("#command-input", Input)
    line.value = text
    return line


async def test_job_by_a_part_of_its_id_opens_a_job_of_another_group(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(160, 40)) as pilot:
        await held_list(pilot)
        await command_line(pilot, "job #16")  # held in no group but done: a substring, matched in every group
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        assert app.screen.key == DONE

        await pilot.press("escape")
        await wait_loaded(pilot, JobListScreen)
        await command_line(pilot, "job article today #1")  # a prefix of six jobs of five groups: a choice
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PickMatchScreen), what="the matches")
        picker = app.screen
        assert isinstance(picker, PickMatchScreen)
        assert [job.job_id for job in picker.jobs] == [f"article today #{n}" for n in (12, 14, 15, 16, 17, 18)]
        assert {job.state for job in picker.jobs} == {"held", "failed", "rejected", "done", "submitted", "reserving"}
        for _ in range(3):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        assert app.screen.key == DONE


async def test_tab_completes_a_job_id_from_the_ledger(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(160, 40)) as pilot:
        await held_list(pilot)
        line = await command_line(pilot, "job summ")
        hint = app.screen.query_one("#command-hint", Static)
        await wait_until(pilot, lambda: "6 match" in str(hint.render()), what="the matches in the hint")
        await wait_until(pilot, lambda: line._suggestion == "job summary d-03", what="the suggestion")
        await pilot.press("tab")  # the longest beginning the six ids share
        assert line.value == "job summary "
        await pilot.press("tab")  # then each match in turn
        assert line.value == "job summary d-03"
        await pilot.press("tab")
        assert line.value == "job summary d-06"

        line.value = "job (retr"  # held by one id only, not at its beginning
        await wait_until(pilot, lambda: "1 match" in str(hint.render()), what="the one match")
        await pilot.press("tab")
        assert line.value == "job summary today (retry)"
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        assert app.screen.key == JobKey("summary today (retry)", "summary.generate")


async def test_a_filter_matching_no_held_job_says_where_it_matches_and_g_goes_there(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await held_list(pilot)
        await pilot.press("slash")
        screen.query_one(FilterBar).value = "#16"
        await wait_until(pilot, lambda: "1 in done" in screen.feedback_text, what="where the filter matches")
        assert "no held job matches '#16'" in screen.feedback_text
        await pilot.press("enter")  # back to the list
        await pilot.press("g")
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "done"
                         and screen.page.filter_text == "#16", what="the done jobs, filtered")
        assert screen.query_one(JobTable).visible_keys() == [DONE]
