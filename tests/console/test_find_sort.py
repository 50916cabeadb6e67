"""Find and sort on the job list: a click on a column header has the ledger sort by it (again: the other way), `s`
flips and `S` moves to the next column; `:job` and `/` find a job by prefix or substring in any group, and the
command line completes job ids."""

from __future__ import annotations

from typing import Any

import pytest
from console_demo import Demo
from console_helpers import wait_loaded, wait_until
from textual.pilot import Pilot

from console.app import ReclaimApp, make_app
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
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
