"""The overview, the job list (groups, filter, sort, paging), the job screen, quotas, notifications, help."""

from __future__ import annotations

import pytest
from console_demo import Demo
from console_helpers import screen_text, wait_loaded, wait_until, widget_text
from textual.widgets import DataTable, Input, Sparkline, Static

from console.app import ReclaimApp, ReclaimCommands, make_app
from console.bindings import load_keymap, parse_keymap
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.notifications import NotificationsScreen
from console.screens.overview import OverviewScreen
from console.screens.quotas import QuotasScreen
from console.screens.triage import TriageScreen
from console.widgets.group_counts import GroupCounts
from console.widgets.held_table import HeldTable
from console.widgets.job_table import JobTable
from ledger import dispatch, queries
from ledger.db import connect

pytestmark = pytest.mark.anyio


def app_for(demo: Demo, operator: str = "carol", **kw: object) -> ReclaimApp:
    return make_app(demo.ledger, demo.config, operator, clock=demo.clock, **kw)  # type: ignore[arg-type]


def job_ids(table: DataTable) -> list[str]:  # type: ignore[type-arg]
    return [table.get_row_at(i)[1].plain for i in range(table.row_count)]


async def test_overview_shows_counts_held_quotas_and_events(demo: Demo) -> None:
    conn = connect(demo.ledger)
    expected = queries.group_counts(conn)
    conn.close()
    app = app_for(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        counts = app.screen.query_one(GroupCounts)
        assert {g: counts.count_of(g) for g in expected} == expected
        held = app.screen.query_one(HeldTable)
        assert job_ids(held) == ["article today #07", "article today #09", "summary today", "article today #12"]
        text = screen_text(app)
        assert "overdue 20m" in text  # alice's job was due 08:40; it is 09:00
        assert "12 / 200" in text and "2 / 50" in text
        assert "ledger.db" in text and "carol · approver" in text and "live 09:00:00" in text
        assert "article today #18" in text  # newest event on top of the feed


@pytest.mark.slow
async def test_groups_filter_sort_and_open(demo: Demo) -> None:
    app = app_for(demo, "alice")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("2")  # submitted
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        table = screen.query_one(JobTable)
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "submitted")
        assert job_ids(table) == ["article today #17"]

        await pilot.press("5")  # held
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "held")
        assert len(job_ids(table)) == 4

        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"owner:me")
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "owner:me")
        assert job_ids(table) == ["article today #07"]  # alice owns the oldest hold

        screen.query_one(Input).value = "op:summary.*"
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "op:summary.*")
        assert job_ids(table) == ["summary today"]
        screen.query_one(Input).value = "submitted op:article.*"  # a leading group name picks the group
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "submitted"
                         and screen.page.filter_text == "op:article.*")
        assert job_ids(table) == ["article today #17"]
        screen.query_one(Input).value = "held"
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "held")
        screen.query_one(Input).value = "held "
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "held"
                         and screen.page.filter_text == "")

        table.focus()
        await pilot.press("s")  # newest first
        await wait_until(pilot, lambda: screen.page is not None and not screen.page.oldest_first)
        assert job_ids(table)[0] == "article today #12"

        await pilot.press("7")  # resolved
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "resolved")
        assert job_ids(table) == ["article today #15"]
        table.focus()
        await pilot.press("enter")
        await wait_loaded(pilot, JobScreen)
        text = widget_text(app)
        assert "rejected" in text and "Published by hand" in text


@pytest.mark.slow
async def test_paging_reads_one_page_at_a_time(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        jobs = app.get_screen("jobs")
        assert isinstance(jobs, JobListScreen)
        jobs.page_size = 20
        await pilot.press("4")  # consumed: more than two pages of 20
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert screen is jobs
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.group == "consumed")
        total = app.counts["consumed"] if app.counts else 0
        assert total > 40
        assert jobs.query_one(JobTable).row_count == 20 and jobs.page is not None and jobs.page.has_more
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.offset == 20)
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.offset == 40)
        assert jobs.query_one(JobTable).row_count == total - 40 and not jobs.page.has_more
        assert f"rows 41–{total} of {total}" in screen_text(app)
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.offset == 20)


@pytest.mark.slow
async def test_job_screen_shows_everything(demo: Demo) -> None:
    app = app_for(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("enter")  # the oldest hold
        await wait_loaded(pilot, JobScreen)
        text = widget_text(app)
        assert "article today #07" in text and "blog/post-0007" in text
        assert "no handle recorded and Gemini interactions cannot be listed or searched" in text
        assert "1. Not delivered" in text and "2. Delivered and running" in text and "3. Completed, reply lost" in text
        assert "not_received" in text and "proxy log shows the connection reset" in text  # the finding
        assert '"asked": false' in text  # the latest remote snapshot
        screen = app.screen
        assert isinstance(screen, JobScreen) and screen.detail is not None
        timeline = screen.query_one("#job-timeline", DataTable)
        assert timeline.row_count == len(screen.detail.events) >= 6
        findings = str(screen.query_one("#job-findings", Static).render())
        assert "bob  not_received — No interaction labelled" in findings  # the section, not only "why held"
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))


@pytest.mark.slow
async def test_quotas_and_notifications(demo: Demo) -> None:
    app = app_for(demo, "bob")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("u")
        await wait_loaded(pilot, QuotasScreen)
        sparks = list(app.screen.query(Sparkline))
        assert len(sparks) == 2 and all(len(list(s.data or [])) == 14 for s in sparks)
        text = screen_text(app)
        assert "12 / 200" in text and "3 held" in text and "1 held" in text

        await pilot.press("n")
        await wait_loaded(pilot, NotificationsScreen)
        screen = app.screen
        assert isinstance(screen, NotificationsScreen)
        assert screen.rows and screen.rows[0]["state"] == "uncertain"
        event_id = screen.rows[0]["event_id"]
        screen.query_one("#notif-table", DataTable).focus()
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.focused is not None
                         and app.focused.id == "cancel", what="confirmation with Cancel focused")
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: any(r["event_id"] == event_id and r["state"] == "confirmed"
                                            for r in screen.rows), what="notification confirmed")
    conn = connect(demo.ledger)
    rows = {r["event_id"]: r["state"] for r in dispatch.list_outbox(conn)}
    conn.close()
    assert rows[event_id] == "confirmed"


async def test_notification_resend_needs_approver(demo: Demo) -> None:
    app = app_for(demo, "alice")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("n")
        await wait_loaded(pilot, NotificationsScreen)
        text = widget_text(app)
        assert "alice lacks the approver role to mark a notification resend" in text
        screen = app.screen
        assert screen.check_action("settle", ("resend",)) is None
        assert screen.check_action("settle", ("confirmed",)) is True


@pytest.mark.slow
async def test_help_lists_keys_and_keymap_from_config(demo: Demo) -> None:
    text = demo.config_path.read_text() + '\n[keys]\n"app.quotas" = "Q"\n"triage.release" = "ctrl+e"\n"nope" = "z"\n'
    demo.config_path.write_text(text)
    keymap = load_keymap(demo.config_path)
    assert keymap.keys == {"app.quotas": "Q", "triage.release": "ctrl+e"}
    assert keymap.problems and "nope" in keymap.problems[0]
    app = app_for(demo, config_path=demo.config_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = widget_text(app)
        assert "triage.release" in help_text and "^e" in help_text and "app.quotas" in help_text
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen))
        await pilot.press("Q")
        await wait_loaded(pilot, QuotasScreen)


def test_parse_keymap_rejects_bad_values() -> None:
    km = parse_keymap({"app.help": "", "app.jobs": 3, "app.overview": "O"})
    assert km.keys == {"app.overview": "O"} and len(km.problems) == 2


@pytest.mark.slow
async def test_command_palette_offers_every_action(demo: Demo) -> None:
    app = app_for(demo, "dave")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_triage(demo.jobs["held_reset"])
        await wait_loaded(pilot, TriageScreen)
        provider = ReclaimCommands(app.screen)
        commands = {title: help_text for title, help_text, _ in provider.entries()}
        for title in ("Overview", "Jobs", "Quotas", "Notifications", "Help", "Pause live", "Query remote",
                      "Record finding", "Release", "Reconcile", "Reject", "Remediate", "Assign"):
            assert title in commands
        assert commands["Release"].startswith("disabled: dave lacks the approver role")
        assert commands["Quotas"] == "key u"


@pytest.mark.slow
async def test_an_empty_outbox_says_none(demo: Demo, tmp_path: object) -> None:
    """The notifications screen over a ledger with no notification says so in words, not an empty table."""
    from ledger.db import create_ledger

    empty = demo.ledger.parent / "empty.db"
    create_ledger(empty)
    app = make_app(empty, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("n")
        await wait_loaded(pilot, NotificationsScreen)
        assert app.screen.query_one("#notif-table", DataTable).row_count == 0
        assert "None: the outbox is empty" in widget_text(app)
    # and the demo ledger, which has notifications, does not say so
    app = app_for(demo, "bob")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("n")
        await wait_loaded(pilot, NotificationsScreen)
        assert app.screen.query_one("#notif-table", DataTable).row_count > 0
        assert "the outbox is empty" not in widget_text(app)
