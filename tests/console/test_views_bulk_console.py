"""Saved views and bulk assign in the job list: `w` picks one of the operator's views and shows it, `W` saves the
list's group and filter (read back from a fresh connection), a filter with an unknown key is refused on the
feedback line and leaves the list as it was, `reason:` finds jobs by why they are held, and `b` counts the held
jobs the filter matches before a confirmation (Cancel changes nothing; `y` assigns exactly those, by the operator;
an operator without the role is told why and nothing opens)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE, Demo
from console_helpers import wait_loaded, wait_until
from textual.pilot import Pilot
from textual.widgets import Input

from console.app import ReclaimApp, make_app
from console.screens.bulk_assign import BulkAssignScreen
from console.screens.confirm import ConfirmScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.screens.pick import PickViewScreen
from console.screens.save_view import SaveViewScreen
from console.widgets.job_table import JobTable
from ledger.db import connect
from ledger.leases import claim_for_send
from ledger.model import JobFilter, JobKey
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.store import jobs as jobs_store
from ledger.views import list_views, save_view
from ledger.worker import record_send_outcome

NOW = 1_796_115_600.0  # 2026-12-01T09:00:00Z: what a since:/until: span in a filter counts back from

pytestmark = pytest.mark.anyio


def dump(path: Path) -> str:
    """Every row of the ledger, read through a fresh connection."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def held_matching(path: Path, filter_text: str, me: str) -> list[JobKey]:
    conn = connect(path, readonly=True)
    try:
        return [j.key for j in jobs_store.list_jobs(conn, "held", flt=JobFilter.parse(filter_text, me=me, now=NOW))]
    finally:
        conn.close()


async def job_list(pilot: Pilot[Any]) -> JobListScreen:
    """Overview -> 5 (the held jobs), loaded."""
    app = pilot.app
    await wait_loaded(pilot, OverviewScreen)
    await pilot.press("5")
    await wait_loaded(pilot, JobListScreen)
    screen = app.screen
    assert isinstance(screen, JobListScreen)
    await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "held", what="the held page")
    return screen


async def filtered(pilot: Pilot[Any], screen: JobListScreen, text: str) -> None:
    """Type `text` into the filter, wait for its page, and hand the keys back to the table."""
    screen.query_one("#jobs-filter", Input).value = text
    await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == text,
                     what=f"the page for {text!r}")
    screen.query_one(JobTable).focus()
    await pilot.pause()


def rows(screen: JobListScreen) -> list[str]:
    table = screen.query_one(JobTable)
    return [table.get_row_at(i)[1].plain for i in range(table.row_count)]


@pytest.mark.slow
async def test_w_picks_a_saved_view_and_shows_it(demo: Demo) -> None:
    conn = connect(demo.ledger)
    try:
        save_view(conn, "alice", "failures", "failed", "", clock=demo.clock)
        save_view(conn, "alice", "mine", "held", "owner:me", clock=demo.clock)
        save_view(conn, "bob", "bobs", "held", "owner:me", clock=demo.clock)  # not alice's: not offered
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, PickViewScreen), what="the view picker")
        picker = app.screen
        assert isinstance(picker, PickViewScreen) and [v.name for v in picker.views] == ["failures", "mine"]
        await pilot.press("enter")  # the first: the failed jobs, no filter
        await wait_until(pilot, lambda: app.screen is screen and screen.page is not None
                         and screen.page.group == "failed" and not screen.page.filter_text, what="the failed jobs")
        assert rows(screen) == [demo.jobs["failed"].job_id]
        assert "saved view failures: failed · no filter" in screen.feedback_text

        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, PickViewScreen), what="the view picker")
        await pilot.press("down", "enter")  # mine: held, owner:me
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "held"
                         and screen.page.filter_text == "owner:me", what="alice's held jobs")
        await wait_until(pilot, lambda: rows(screen) == [demo.jobs["held_reset"].job_id], what="the rows")
        assert screen.query_one("#jobs-filter", Input).value == "owner:me"
        assert "saved view mine: held · owner:me" in screen.feedback_text

        await pilot.press("w")  # Esc in the picker changes nothing
        await wait_until(pilot, lambda: isinstance(app.screen, PickViewScreen), what="the view picker")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="the picker closed")
        assert screen.filter_text == "owner:me" and screen.group == "held"


async def test_w_without_saved_views_says_how_to_save_one(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await pilot.press("w")
        await wait_until(pilot, lambda: "alice has no saved views yet" in screen.feedback_text, what="the hint")
        assert "W saves this group and filter" in screen.feedback_text
        assert app.screen is screen


@pytest.mark.slow
async def test_W_saves_the_group_and_filter_as_a_view(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await filtered(pilot, screen, "op:article.* reason:reset")
        await pilot.press("W")
        await wait_until(pilot, lambda: isinstance(app.screen, SaveViewScreen), what="the save form")
        form = app.screen
        assert isinstance(form, SaveViewScreen)
        await pilot.press("enter")  # no name yet: asked for, nothing saved
        await wait_until(pilot, lambda: "type a name for the view first" in form.message, what="the name asked for")

        await pilot.press(*"resets")
        await pilot.press("escape")  # typed text: asks before throwing it away
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the discard question")
        assert ConfirmScreen is type(app.screen) and "name: resets" in app.screen.lines  # type: ignore[attr-defined]
        await pilot.press("n")  # keep editing
        await wait_until(pilot, lambda: app.screen is form, what="back in the form")

        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is screen, what="the form closed")
        await wait_until(pilot, lambda: "saved view resets: held · op:article.* reason:reset" in screen.feedback_text,
                         what="the saved message")
    conn = connect(demo.ledger, readonly=True)  # a fresh connection
    try:
        saved = [(v.operator, v.name, v.group, v.filter) for v in list_views(conn, "alice")]
    finally:
        conn.close()
    assert saved == [("alice", "resets", "held", "op:article.* reason:reset")]


@pytest.mark.slow
async def test_an_unknown_filter_key_is_refused_and_leaves_the_list_unchanged(demo: Demo) -> None:
    before = dump(demo.ledger)
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await wait_until(pilot, lambda: len(rows(screen)) == 4, what="the held rows")
        shown = rows(screen)
        await pilot.press("slash")
        screen.query_one("#jobs-filter", Input).value = "colour:red"  # pasted: the list shown is the unfiltered one
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "colour:red",
                         what="the refused filter's page")
        await wait_until(pilot, lambda: "filter refused: filter key 'colour:': unknown" in screen.feedback_text,
                         what="the refusal on the feedback line")
        assert "reason:" in screen.feedback_text  # the ledger's message names the keys it knows
        assert rows(screen) == shown  # the list is as it was
        screen.query_one("#jobs-filter", Input).value = ""
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == ""
                         and not screen.page.error, what="the unfiltered page")
        assert screen.feedback_text == "" and rows(screen) == shown
    assert dump(demo.ledger) == before


def hold_after_a_timeout(demo: Demo, job_id: str) -> JobKey:
    """A new job whose send got no reply within the deadline, recorded as the worker records it: held, 'timeout'."""
    conn = connect(demo.ledger)
    try:
        res = reserve(conn, demo.config, ARTICLE, {"input": job_id}, clock=demo.clock, job_id=job_id,
                      target=f"blog/{job_id}")
        key = JobKey(job_id, ARTICLE)
        assert res.outcome == "reserved"
        claim = claim_for_send(conn, demo.config, key, owner="worker-1", now=demo.clock.now())
        assert claim is not None
        record_send_outcome(conn, demo.config, claim, SendOutcome(
            "unknown", error="no reply within the total deadline of 5 s", reason="timeout"), now=demo.clock.now())
        job = jobs_store.find_job(conn, key)
        assert job is not None and job.state == "held" and "timeout" in (job.held_reason or "")
        return key
    finally:
        conn.close()


@pytest.mark.slow
async def test_reason_filter_finds_jobs_by_why_they_are_held(demo: Demo) -> None:
    hold_after_a_timeout(demo, "article slow #1")
    hold_after_a_timeout(demo, "article slow #2")
    conn = connect(demo.ledger, readonly=True)
    try:
        why = {j.job_id: f"{j.held_reason} {j.last_error}" for j in jobs_store.list_jobs(conn, "held")}
    finally:
        conn.close()
    timeouts = sorted(j for j, w in why.items() if "timeout" in w.lower())
    assert timeouts and len(timeouts) < len(why)  # the demo holds jobs for other reasons too
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await pilot.press("slash", *"reason:timeout")
        await wait_until(pilot, lambda: screen.page is not None and screen.page.filter_text == "reason:timeout",
                         what="the reason filter's page")
        await wait_until(pilot, lambda: sorted(rows(screen)) == timeouts, what="the jobs held for a timeout")
        assert screen.page is not None and screen.page.error is None


async def open_bulk(pilot: Pilot[Any], screen: JobListScreen, filter_text: str) -> BulkAssignScreen:
    await filtered(pilot, screen, filter_text)
    await pilot.press("b")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, BulkAssignScreen), what="the bulk assign form")
    form = pilot.app.screen
    assert isinstance(form, BulkAssignScreen)
    return form


@pytest.mark.slow
async def test_bulk_assign_previews_the_count_cancel_changes_nothing_and_y_assigns_exactly_those(demo: Demo) -> None:
    flt = "op:article.*"
    matched = held_matching(demo.ledger, flt, "alice")
    others = [k for k in held_matching(demo.ledger, "", "alice") if k not in matched]
    assert len(matched) >= 2 and others  # the filter picks some held jobs, not all
    before = dump(demo.ledger)
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        form = await open_bulk(pilot, screen, flt)
        # Enter with a field blank goes to that field and says what to type there, in the action table's words.
        await pilot.press(*"erin", "enter")
        await wait_until(pilot, lambda: "type a due time first" in form.message, what="the due time asked for")
        assert app.focused is not None and app.focused.id == "form-due"
        await pilot.press(*"2h", "enter")
        await wait_until(pilot, lambda: "write a reason first" in form.message, what="the reason asked for")
        assert app.focused is not None and app.focused.id == "form-reason"
        await pilot.press(*"night shift takes the articles", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the count preview")
        modal = app.screen
        assert isinstance(modal, ConfirmScreen)
        assert modal.summary.startswith(f"assign {len(matched)} held jobs matching `{flt}` to erin, due 2h (")
        assert modal.refusal is None and modal.confirm_label == f"Assign {len(matched)} — confirm"
        assert dump(demo.ledger) == before  # counting wrote nothing
        await wait_until(pilot, lambda: app.focused is not None and app.focused.id == "cancel", what="Cancel focused")
        await pilot.press("enter")  # the default button: Cancel
        await wait_until(pilot, lambda: app.screen is form, what="back in the form")
        assert "cancelled — nothing was changed" in form.message
        assert dump(demo.ledger) == before

        await pilot.press("enter")  # Enter in the reason counts again
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the count preview again")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is screen, what="the form closed")
        await wait_until(pilot, lambda: f"assigned {len(matched)} held jobs to erin" in screen.feedback_text,
                         what="the outcome")
    conn = sqlite3.connect(f"file:{demo.ledger}?mode=ro", uri=True)  # a fresh connection
    conn.row_factory = sqlite3.Row
    try:
        for key in matched:
            job = conn.execute("SELECT owner, due_at FROM jobs WHERE job_id = ? AND operation = ?",
                               (key.job_id, key.operation)).fetchone()
            assert job["owner"] == "erin" and job["due_at"] == pytest.approx(demo.clock.now() + 2 * 3600)
        for key in others:
            job = conn.execute("SELECT owner FROM jobs WHERE job_id = ? AND operation = ?",
                               (key.job_id, key.operation)).fetchone()
            assert job["owner"] != "erin"
        new = conn.execute("SELECT job_id, operation, kind, actor FROM events WHERE kind = 'assign' "
                           "AND actor = 'alice' AND detail LIKE '%night shift takes the articles%'").fetchall()
    finally:
        conn.close()
    assert sorted((r["job_id"], r["operation"]) for r in new) == sorted((k.job_id, k.operation) for k in matched)


@pytest.mark.slow
async def test_bulk_assign_is_refused_with_its_reason_for_an_operator_without_the_role(demo: Demo) -> None:
    before = dump(demo.ledger)
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)  # approver, not triage
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await filtered(pilot, screen, "op:article.*")
        assert screen.check_action("bulk_assign", ()) is None
        await pilot.press("b")
        await wait_until(pilot, lambda: "carol lacks the triage role needed to assign owners" in screen.feedback_text,
                         what="the refusal")
        assert app.screen is screen  # no form opened
    assert dump(demo.ledger) == before


@pytest.mark.slow
async def test_bulk_assign_says_why_when_the_list_is_not_the_held_jobs(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("6")  # failed
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        await wait_until(pilot, lambda: screen.page is not None and screen.page.group == "failed")
        await pilot.press("b")
        await wait_until(pilot, lambda: "bulk assign acts on held jobs" in screen.feedback_text, what="the reason")
        assert isinstance(app, ReclaimApp) and app.screen is screen


@pytest.mark.slow
async def test_bulk_assign_with_a_due_time_it_cannot_read_says_why_and_changes_nothing(demo: Demo) -> None:
    before = dump(demo.ledger)
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        form = await open_bulk(pilot, screen, "op:article.*")
        await pilot.press(*"erin", "tab", *"soonish", "tab", *"night shift", "enter")
        await wait_until(pilot, lambda: "bulk assign refused: due" in form.message, what="the due time refused")
        assert "'soonish'" in form.message and "nothing was changed" in form.message
        assert app.screen is form  # the form stays open to be corrected
        await pilot.press("escape")  # typed text: asks first; y discards
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the discard question")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is screen, what="back in the list")
    assert dump(demo.ledger) == before


@pytest.mark.slow
async def test_bulk_assign_touches_only_the_jobs_its_preview_counted(demo: Demo) -> None:
    """A job held by a worker while the confirmation is open matches the filter too, but the operator was shown a
    count that did not include it: confirming assigns the previewed jobs only, and says the counts differ."""
    flt = "op:article.*"
    matched = held_matching(demo.ledger, flt, "alice")
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await job_list(pilot)
        await open_bulk(pilot, screen, flt)
        await pilot.press(*"erin", "tab", *"2h", "tab", *"night shift", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the count preview")
        modal = app.screen
        assert isinstance(modal, ConfirmScreen)
        assert modal.summary.startswith(f"assign {len(matched)} held jobs matching `{flt}` to erin")
        late = hold_after_a_timeout(demo, "article late #1")  # held after the preview, before the confirm
        assert late in held_matching(demo.ledger, flt, "alice")
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is screen, what="the form closed")
        await wait_until(pilot, lambda: f"assigned {len(matched)} held jobs to erin" in screen.feedback_text,
                         what="the outcome")
    conn = sqlite3.connect(f"file:{demo.ledger}?mode=ro", uri=True)  # a fresh connection
    try:
        owners = {(r[0], r[1]): r[2] for r in conn.execute("SELECT job_id, operation, owner FROM jobs")}
        assigned = sorted(r[:2] for r in conn.execute(
            "SELECT job_id, operation, actor FROM events WHERE kind = 'assign' AND detail LIKE '%night shift%'"))
    finally:
        conn.close()
    assert owners[(late.job_id, late.operation)] != "erin"
    assert assigned == sorted((k.job_id, k.operation) for k in matched)
