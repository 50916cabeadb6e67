"""`B` on the held list: a storm of 20 holds decided with one finding and one release, each job its own event.

alice records one finding for all 20 (20 finding events, one confirmation). bob wrote his own findings on 5 of them
too: four-eyes refuses him those 5 in his plan, which he cancels (nothing changes). carol releases the 20 in one
confirmation: 20 release events, by carol, read back from a fresh connection; the simulator saw no new create (the
next worker pass sends). Marks: space marks jobs and `B` decides only those.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE
from console_demo import held_storm as storm
from console_helpers import wait_loaded, wait_until
from textual.pilot import Pilot
from textual.widgets import Input, Select

from console.app import ReclaimApp, make_app
from console.screens.batch import BatchScreen
from console.screens.confirm import ConfirmScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.widgets.job_table import JobTable
from ledger import triage
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def kinds(ledger: Path, keys: list[JobKey], kind: str) -> list[tuple[int, set[str]]]:
    """Per job: how many `kind` events it has and by whom, from a fresh read-only connection."""
    fresh = connect(ledger, readonly=True)
    try:
        out = []
        for k in keys:
            found = [e for e in events_store.job_events(fresh, k) if e.kind == kind]
            out.append((len(found), {e.actor for e in found}))
        return out
    finally:
        fresh.close()


def fingerprint(ledger: Path) -> tuple[Any, ...]:
    fresh = connect(ledger, readonly=True)
    try:
        return tuple(fresh.execute("SELECT id, hash FROM events ORDER BY id").fetchall())
    finally:
        fresh.close()


async def open_batch(pilot: Pilot[Any], action: str, text: str, category: str | None = None) -> ConfirmScreen:
    """j (the held jobs), B, the action, its category, the text, Enter: the plan's confirmation."""
    app = pilot.app
    await wait_loaded(pilot, OverviewScreen)
    await pilot.press("j")
    await wait_loaded(pilot, JobListScreen)
    await pilot.press("B")
    await wait_until(pilot, lambda: isinstance(app.screen, BatchScreen), what="the batch form")
    form = app.screen
    form.query_one("#batch-action", Select).value = action
    if category is not None:
        await wait_until(pilot, lambda: form.query_one("#batch-category-field").display, what="the category")
        form.query_one("#batch-category", Select).value = category
    field = form.query_one("#form-text", Input)
    await wait_until(pilot, lambda: app.focused is field, what="the text field")
    await pilot.press(*text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the plan's confirmation")
    confirm = app.screen
    assert isinstance(confirm, ConfirmScreen)
    return confirm


async def confirm_and_wait(pilot: Pilot[Any], confirm: ConfirmScreen) -> str:
    """y; the form closes and the list says what was done."""
    app = pilot.app
    await pilot.press("y")
    await wait_until(pilot, lambda: isinstance(app.screen, JobListScreen), timeout=30, what="back on the list")
    screen = app.screen
    assert isinstance(screen, JobListScreen)
    return screen.feedback_text


async def test_a_storm_gets_one_finding_then_one_release_of_twenty(tmp_path: Path, console_sim: Simulator) -> None:
    ledger, config, clock, keys = storm(tmp_path, console_sim, 20)
    creates = sum(console_sim.count("create", idem=idem_key(k.job_id, k.operation)) for k in keys)

    alice = make_app(ledger, config, "alice", clock=clock)
    async with alice.run_test(size=(120, 40)) as a:
        confirm = await open_batch(a, "finding", "503 storm: never received", "not_received")
        assert "record the finding on 20 of 20 held jobs" in confirm.summary
        said = await confirm_and_wait(a, confirm)
    assert "recorded the finding on 20 of 20 jobs as alice" in said
    assert kinds(ledger, keys, "finding") == [(1, {"alice"})] * 20

    conn = connect(ledger)
    try:
        for k in keys[:5]:
            triage.record_finding(conn, config, k, "not_received", "bob looked too", actor="bob", clock=clock)
    finally:
        conn.close()

    before = fingerprint(ledger)
    bob = make_app(ledger, config, "bob", clock=clock)
    async with bob.run_test(size=(120, 40)) as b:
        confirm = await open_batch(b, "release", "the finding says not received")
        detail = str(confirm.shown.detail)
        assert confirm.refusal is None and "release 15 of 20 held jobs" in confirm.summary
        for k in keys[:5]:
            assert f"refused  {k.job_id} / {ARTICLE}: four-eyes: bob wrote a finding" in detail
        for k in keys[5:]:
            assert f"allowed  {k.job_id} / {ARTICLE}" in detail
        await b.press("n")
        await wait_until(b, lambda: isinstance(bob.screen, BatchScreen), what="back on the form")
    assert fingerprint(ledger) == before

    carol = make_app(ledger, config, "carol", clock=clock)
    async with carol.run_test(size=(120, 40)) as c:
        confirm = await open_batch(c, "release", "503 storm: never received")
        assert "release 20 of 20 held jobs" in confirm.summary
        assert f"{ARTICLE} quota today 20/" in " ".join(confirm.lines)
        said = await confirm_and_wait(c, confirm)
        assert not any(isinstance(s, ConfirmScreen) for s in carol.screen_stack)
    assert "released 20 of 20 jobs as carol" in said
    assert kinds(ledger, keys, "release") == [(1, {"carol"})] * 20
    fresh = connect(ledger, readonly=True)
    try:
        assert {jobs_store.find_job(fresh, k).state for k in keys} == {"reserving"}  # type: ignore[union-attr]
    finally:
        fresh.close()
    assert sum(console_sim.count("create", idem=idem_key(k.job_id, k.operation)) for k in keys) == creates


async def test_marked_jobs_are_the_batch(tmp_path: Path, console_sim: Simulator) -> None:
    ledger, config, clock, keys = storm(tmp_path, console_sim, 5)
    app: ReclaimApp = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("j")
        await wait_loaded(pilot, JobListScreen)
        table = app.screen.query_one(JobTable)
        await wait_until(pilot, lambda: table.key_at_cursor() == keys[0], what="the first held job")
        await pilot.press("space", "down", "space")  # marks the 1st and 3rd (space moves down)
        assert table.marks == {keys[0], keys[2]}
        assert "2 held jobs marked" in app.screen.feedback_text
        await pilot.press("B")
        await wait_until(pilot, lambda: isinstance(app.screen, BatchScreen), what="the batch form")
        form = app.screen
        form.query_one("#batch-action", Select).value = "reject"
        form.query_one("#form-text", Input).value = "duplicates of a manual run"
        form.query_one("#form-text", Input).focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the plan")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen) and "reject 2 of 2 held jobs" in confirm.summary
        said = await confirm_and_wait(pilot, confirm)
        assert "rejected 2 of 2 jobs as carol" in said
        assert table.marks == set()
    assert [n for n, _ in kinds(ledger, keys, "reject")] == [1, 0, 1, 0, 0]


async def test_a_viewer_is_told_why_b_does_nothing(tmp_path: Path, console_sim: Simulator) -> None:
    ledger, config, clock, _ = storm(tmp_path, console_sim, 1)
    app: ReclaimApp = make_app(ledger, config, "dave", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("j")
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert screen.check_action("batch", ()) is None
        await pilot.press("B")
        await wait_until(pilot, lambda: "dave has neither the triage nor the approver role" in screen.feedback_text,
                         what="why B does nothing")
        assert not isinstance(app.screen, BatchScreen)


async def test_y_takes_the_plan_the_confirmation_shows_after_a_change(tmp_path: Path, console_sim: Simulator) -> None:
    """While the plan is open another seat rejects one of its jobs: the confirmation is read again and says 3 of 4,
    and `y` rejects those 3 (each job ends with one reject: bob's, or carol's)."""
    ledger, config, clock, keys = storm(tmp_path, console_sim, 4)
    app: ReclaimApp = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        confirm = await open_batch(pilot, "reject", "duplicates of a manual run")
        assert "reject 4 of 4 held jobs" in confirm.summary
        conn = connect(ledger)
        try:
            triage.reject(conn, config, keys[0], actor="bob", clock=clock, reason="closed by bob first")
        finally:
            conn.close()
        app.wake_follower()
        await wait_until(pilot, lambda: "reject 3 of 4 held jobs" in confirm.summary, what="the plan read again")
        said = await confirm_and_wait(pilot, confirm)
        assert "rejected 3 of 4 jobs as carol" in said
    assert kinds(ledger, keys, "reject") == [(1, {"bob"}), (1, {"carol"}), (1, {"carol"}), (1, {"carol"})]
