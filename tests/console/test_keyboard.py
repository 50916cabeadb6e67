"""The console's keyboard flow: every key counted from a held job at the cursor to a recorded release over two
seats; a disabled key says why and goes no further; Esc asks before throwing typed text away; letters typed in a
field stay in the field; the cursor follows its job across live updates; the command mode (`:`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE, SUMMARY, Demo
from console_helpers import wait_loaded, wait_until
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, Select

from console.app import ReclaimApp, make_app
from console.bindings import parse_keymap
from console.screens.command import CommandScreen
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.notifications import NotificationsScreen
from console.screens.overview import OverviewScreen
from console.screens.pick import PickJobScreen
from console.screens.triage import TriageScreen
from console.widgets.guarded_action import GuardedAction
from console.widgets.held_table import HeldTable
from console.widgets.job_table import JobTable
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config, load_config
from ledger.db import connect, create_ledger
from ledger.model import JobKey, idem_key
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.views import save_view
from ledger.worker import RemoteCache, submit_now

pytestmark = pytest.mark.anyio
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z
CLEANUP = "storage.cleanup"

SEATS_CONFIG = """\
timezone = "UTC"

[identity]
source = "declared"

[policy]
four_eyes = true
release_requires_finding = true

[operators]
alice = ["triage"]
bob = ["triage", "approver"]

[remotes.storage]
kind = "http"
url = "{url}/cleanup"
lookup_url = "{url}/cleanup/{{handle}}?key={{idem_key}}"
dedupes_by_key = false
timeout_seconds = 5

[operations."storage.cleanup"]
remote = "storage"
daily_quota = 10
sink = "results"
"""


class KeyCounter:
    """Presses keys through the pilot and counts them; typed text is counted apart (as texts, not keys)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.texts: list[str] = []

    async def press(self, pilot: Pilot[Any], *keys: str) -> None:
        self.keys += keys
        await pilot.press(*keys)

    async def type(self, pilot: Pilot[Any], text: str) -> None:
        self.texts.append(text)
        await pilot.press(*text)


def held_cleanup(folder: Path, sim: Simulator) -> tuple[Path, Config, ManualClock, JobKey]:
    """The demo's two seats over a clean-up whose POST was dropped before the remote accepted it: held, and the
    remote can be searched by idem key (it will answer: no such job)."""
    path = folder / "reclaim.toml"
    path.write_text(SEATS_CONFIG.format(url=sim.url), encoding="utf-8")
    config = load_config(path)
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    key = JobKey(f"retention-check {folder.name} bucket-a", CLEANUP)
    sim.add_fault("drop_before_accept", method="cleanup", match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    try:
        res = submit_now(conn, config, CLEANUP, {"bucket": "bucket-a", "older_than_days": 30}, clock=clock,
                         job_id=key.job_id, target="bucket-a", remotes=RemoteCache(config))
    finally:
        conn.close()
    assert res.state == "held"
    clock.set(T)
    return ledger, config, clock, key


async def confirm_open(pilot: Pilot[Any]) -> ConfirmScreen:
    """Wait for the confirmation with Cancel focused (the default)."""
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.focused is not None
                     and app.focused.id == "cancel", what="the confirmation, Cancel focused")
    modal = app.screen
    assert isinstance(modal, ConfirmScreen)
    return modal


def focused_id(app: ReclaimApp) -> str | None:
    return app.focused.id if app.focused is not None else None


@pytest.mark.slow
async def test_held_to_release_in_at_most_ten_keys(
    tmp_path: Path, console_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, config, clock, key = held_cleanup(tmp_path, console_sim)
    idem = idem_key(key.job_id, key.operation)
    confirmations: list[str] = []
    shown = ConfirmScreen.on_mount

    def noted(self: ConfirmScreen) -> None:
        confirmations.append(self.title_text.plain)
        shown(self)

    monkeypatch.setattr(ConfirmScreen, "on_mount", noted)
    counter = KeyCounter()
    alice = make_app(ledger, config, "alice", clock=clock)
    bob = make_app(ledger, config, "bob", clock=clock)
    # Both seats are open at once, on the same ledger file, each with its own connections.
    async with alice.run_test(size=(120, 40)) as a, bob.run_test(size=(120, 40)) as b:
        await wait_loaded(a, OverviewScreen)
        await wait_loaded(b, OverviewScreen)
        held = alice.screen.query_one(HeldTable)
        await wait_until(a, lambda: held.key_at_cursor() == key, what="the held job at alice's cursor")

        # alice (triage): t triages the row at the cursor; r asks the remote (a read: no confirmation).
        await counter.press(a, "t")
        await wait_loaded(a, TriageScreen)
        screen = alice.screen
        assert isinstance(screen, TriageScreen) and screen.key == key
        await counter.press(a, "r")
        assert not isinstance(alice.screen, ConfirmScreen)
        await wait_until(a, lambda: "step 2 is set to not_received" in screen.feedback_text, what="the suggestion")
        assert screen.query_one("#finding-category", Select).value == "not_received"  # a search found nothing
        assert confirmations == []
        # f: the category is set, so the cursor goes to the note; Enter records (after y).
        await counter.press(a, "f")
        await wait_until(a, lambda: focused_id(alice) == "finding-note", what="the note field")
        await counter.type(a, "GET /cleanup?key= answers 404 and the bucket is unchanged")
        await counter.press(a, "enter")
        modal = await confirm_open(a)
        assert "records what you found" in modal.summary
        await counter.press(a, "y")
        await wait_until(a, lambda: screen.detail is not None and screen.detail.latest_finding is not None,
                         what="alice's finding recorded")
        assert focused_id(alice) != "finding-note"  # done typing: the next letter is a key again
        alice_keys = len(counter.keys)

        # bob (approver), in his own console: t, e (the cursor goes to the reason), Enter, y.
        bob_held = bob.screen.query_one(HeldTable)
        await wait_until(b, lambda: bob_held.key_at_cursor() == key, what="the held job at bob's cursor")
        await counter.press(b, "t")
        await wait_loaded(b, TriageScreen)
        bscreen = bob.screen
        assert isinstance(bscreen, TriageScreen)
        await wait_until(b, lambda: bscreen.query_one("#action-release", GuardedAction).allowed is True,
                         what="release allowed for bob")
        await counter.press(b, "e")
        await wait_until(b, lambda: focused_id(bob) == "decision-reason", what="the reason field")
        assert "Enter previews the release" in bscreen.feedback_text
        await counter.type(b, "alice found no job for the key at the remote")
        await counter.press(b, "enter")
        modal = await confirm_open(b)
        assert "sends 1 new request to storage (attempt 2, same idem key)" in modal.summary
        await counter.press(b, "y")
        await wait_until(b, lambda: bscreen.detail is not None and bscreen.detail.job.state == "reserving",
                         what="the release recorded")

    assert counter.keys == ["t", "r", "f", "enter", "y", "t", "e", "enter", "y"]
    assert alice_keys == 5 and len(counter.keys) - alice_keys == 4
    assert len(counter.keys) <= 10 and len(counter.texts) == 2
    assert len(confirmations) == 2  # the finding and the release; the query asked nothing
    assert console_sim.count("cleanup", idem=idem) == 1  # the console itself sends nothing
    fresh = connect(ledger, readonly=True)
    try:
        job = jobs_store.find_job(fresh, key)
        events = events_store.job_events(fresh, key)
    finally:
        fresh.close()
    assert job is not None and (job.state, job.attempt) == ("reserving", 2)
    by_kind = {e.kind: e for e in events}
    assert by_kind["remote_query"].actor == "alice" and by_kind["remote_query"].detail["remote_state"] == "not_found"
    assert by_kind["finding"].actor == "alice" and by_kind["finding"].detail["category"] == "not_received"
    assert by_kind["release"].actor == "bob"
    assert by_kind["release"].detail["reason"] == "alice found no job for the key at the remote"


@pytest.mark.slow
async def test_disabled_key_says_why_and_goes_no_further(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    # alice may not release; her release key is remapped onto `n`, which everywhere else opens Notifications.
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock,
                   keymap=parse_keymap({"triage.release": "n"}))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        await pilot.press("n")
        await wait_until(pilot, lambda: "alice lacks the approver role" in screen.feedback_text,
                         what="the reason on the feedback line")
        assert app.screen is screen and not isinstance(app.screen, NotificationsScreen)
        assert screen.feedback_text.startswith("not available:")

    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(demo.jobs["resolved"])  # rejected: nothing to triage
        await wait_loaded(pilot, JobScreen)
        job_screen = app.screen
        assert isinstance(job_screen, JobScreen)
        await pilot.press("t")
        await wait_until(pilot, lambda: "the job is rejected; only held or failed jobs are triaged"
                         in job_screen.feedback_text, what="why t does nothing")
        assert app.screen is job_screen

        # A confirmation whose action was refused: y says why and leaves it open; n closes it.
        said: list[str] = []
        notify = app.notify
        monkeypatch.setattr(app, "notify", lambda message, *a, **kw: (said.append(str(message)), notify(message, *a, **kw)))
        app.push_screen(ConfirmScreen(Text("Release?"), "sends 1 new request", [], "four-eyes: no", "Release"))
        await confirm_open(pilot)
        await pilot.press("y")
        assert isinstance(app.screen, ConfirmScreen) and said == ["refused: four-eyes: no"]
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is job_screen, what="n to close the confirmation")


@pytest.mark.slow
async def test_letters_typed_in_a_field_stay_in_the_field(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        note = screen.query_one("#finding-note", Input)
        note.focus()
        await pilot.press("n", "o", "j", "u", "t", "e", "r", "colon", "question_mark", "1", "5")
        assert note.value == "nojuter:?15"
        assert app.screen is screen  # no Notifications, Overview, Jobs, Quotas, command line, help or group
        assert not isinstance(app.screen, (NotificationsScreen, CommandScreen, HelpScreen, JobListScreen))


@pytest.mark.slow
async def test_escape_asks_before_discarding_typed_text(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        # An empty form: Esc goes back at once.
        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="back without asking")

        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        await pilot.press("x")  # reject: no reason yet, so the cursor goes to the reason field
        await wait_until(pilot, lambda: focused_id(app) == "decision-reason", what="the reason field")
        await pilot.press(*"duplicate of the weekly")
        await pilot.press("escape")
        modal = await confirm_open(pilot)
        assert modal.confirm_label == "Discard and leave" and modal.cancel_label == "Keep editing"
        assert "reason: duplicate of the weekly" in modal.lines
        await pilot.press("n")  # keep editing
        await wait_until(pilot, lambda: app.screen is screen, what="back to the form")
        assert screen.query_one("#decision-reason", Input).value == "duplicate of the weekly"
        assert focused_id(app) == "decision-reason"
        await pilot.press("escape")
        await pilot.press("enter")  # Enter on the default button keeps editing too
        await wait_until(pilot, lambda: app.screen is screen, what="Enter keeps editing")
        await pilot.press("escape")
        await confirm_open(pilot)
        await pilot.press("y")  # discard
        await wait_until(pilot, lambda: isinstance(app.screen, OverviewScreen), what="discarded and back")


@pytest.mark.slow
async def test_enter_in_the_reason_without_a_decision_asks_for_one(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        screen.query_one("#decision-reason", Input).focus()
        await pilot.press(*"the newsletter went out by hand", "enter")
        await wait_until(pilot, lambda: "choose the decision: e release · c reconcile · x reject" in screen.feedback_text,
                         what="the decision keys")
        assert focused_id(app) == "triage-body"  # the next letter is a key
        await pilot.press("x")
        modal = await confirm_open(pilot)
        assert "reason: the newsletter went out by hand" in modal.lines
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is screen and "cancelled" in screen.feedback_text)


def resolve(demo: Demo, key: JobKey, actor: str = "carol") -> None:
    """Another seat closes a held job (a separate connection through the ledger API)."""
    conn = connect(demo.ledger)
    try:
        triage.reject(conn, demo.config, key, actor=actor, clock=demo.clock, reason="closed from another seat")
    finally:
        conn.close()


@pytest.mark.slow
async def test_cursor_follows_its_job_when_a_row_above_is_resolved(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        overview = app.screen
        table = overview.query_one(HeldTable)
        assert table.row_count == 4
        await pilot.press("down", "down", "down")
        assert table.key_at_cursor() == demo.jobs["held_orphan"]  # article today #12, the fourth row
        resolve(demo, demo.jobs["held_lost_reply"])  # #09, a row above the cursor
        await wait_until(pilot, lambda: table.row_count == 3, timeout=5.0, what="#09 gone from the held jobs")
        assert table.key_at_cursor() == demo.jobs["held_orphan"] and table.cursor_row == 2
        assert overview.feedback_text == ""  # its job is still there: nothing to say
        resolve(demo, demo.jobs["held_orphan"])  # now the job at the cursor itself
        await wait_until(pilot, lambda: table.row_count == 2, timeout=5.0, what="#12 gone")
        await wait_until(pilot, lambda: "left the held jobs" in overview.feedback_text, what="the feedback line")
        said = overview.feedback_text
        assert said.startswith("article today #12 · article.generate left the held jobs (reject by carol")
        assert said.endswith("the cursor is on summary today")
        assert table.key_at_cursor() == demo.jobs["held_503"]


@pytest.mark.slow
async def test_job_list_cursor_follows_its_job(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("5")  # held
        await wait_loaded(pilot, JobListScreen)
        screen = app.screen
        assert isinstance(screen, JobListScreen)
        table = screen.query_one(JobTable)
        await wait_until(pilot, lambda: table.row_count == 4, what="four held jobs")
        table.focus()
        await pilot.press("down", "down", "down")
        assert table.key_at_cursor() == demo.jobs["held_orphan"]
        resolve(demo, demo.jobs["held_reset"])  # #07, the first row
        await wait_until(pilot, lambda: table.row_count == 3, timeout=5.0, what="#07 gone from the page")
        assert table.key_at_cursor() == demo.jobs["held_orphan"]
        resolve(demo, demo.jobs["held_orphan"])
        await wait_until(pilot, lambda: "left the held jobs" in screen.feedback_text, timeout=5.0,
                         what="the feedback line")
        assert "article today #12" in screen.feedback_text and "the cursor is on summary today" in screen.feedback_text
        # `t` on the job list triages the held job at the cursor.
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        assert isinstance(app.screen, TriageScreen) and app.screen.key == demo.jobs["held_503"]


async def command(pilot: Pilot[Any], line: str) -> None:
    """Open the command line with `:`, type `line`, Enter."""
    await pilot.press("colon")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, CommandScreen), what="the command line")
    await pilot.press(*line, "enter")
    await wait_until(pilot, lambda: not isinstance(pilot.app.screen, CommandScreen), what="the command line closed")


@pytest.mark.slow
async def test_command_mode(demo: Demo) -> None:
    conn = connect(demo.ledger)
    try:
        for op in (ARTICLE, SUMMARY):  # one id, two operations
            assert reserve(conn, demo.config, op, {"input": "shared"}, clock=demo.clock,
                           job_id="shared 2026-12-01").outcome == "reserved"
        save_view(conn, "alice", "mine", "held", "owner:me", clock=demo.clock)
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        overview = app.screen
        assert isinstance(overview, OverviewScreen)

        await command(pilot, "frobnicate now")
        await wait_until(pilot, lambda: "unknown command ':frobnicate'" in overview.feedback_text)
        assert app.screen is overview

        await command(pilot, "job article today #12")
        await wait_loaded(pilot, JobScreen)
        assert isinstance(app.screen, JobScreen) and app.screen.key == demo.jobs["held_orphan"]

        await command(pilot, "job shared 2026-12-01")  # two operations share the id: pick one
        await wait_until(pilot, lambda: isinstance(app.screen, PickJobScreen), what="the picker")
        picker = app.screen
        assert isinstance(picker, PickJobScreen) and [j.operation for j in picker.jobs] == [ARTICLE, SUMMARY]
        await pilot.press("down", "enter")
        await wait_loaded(pilot, JobScreen)
        assert isinstance(app.screen, JobScreen) and app.screen.key == JobKey("shared 2026-12-01", SUMMARY)

        await command(pilot, f"job shared 2026-12-01 {ARTICLE}")  # or name the operation
        await wait_loaded(pilot, JobScreen)
        assert isinstance(app.screen, JobScreen) and app.screen.key == JobKey("shared 2026-12-01", ARTICLE)
        job_screen = app.screen

        await command(pilot, "job no such job")
        await wait_until(pilot, lambda: "no job id begins with or holds 'no such job'" in job_screen.feedback_text)

        await command(pilot, "held")
        await wait_loaded(pilot, JobListScreen)
        jobs = app.screen
        assert isinstance(jobs, JobListScreen)
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.group == "held" and not jobs.page.filter_text
                         and len(jobs.page.jobs) == 4, what="the held jobs")

        await command(pilot, "owner me")
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.filter_text == "owner:me"
                         and [j.job_id for j in jobs.page.jobs] == ["article today #07"], what="alice's jobs")

        await command(pilot, "held")
        await wait_until(pilot, lambda: jobs.page is not None and not jobs.page.filter_text)
        await command(pilot, "view mine")
        await wait_until(pilot, lambda: jobs.page is not None and jobs.page.filter_text == "owner:me"
                         and jobs.page.group == "held", what="the saved view")
        assert "saved view mine: held · owner:me" in jobs.feedback_text

        await command(pilot, "view nope")
        await wait_until(pilot, lambda: "view 'nope': no such saved view for alice" in jobs.feedback_text)
        await command(pilot, "view")
        await wait_until(pilot, lambda: "saved views of alice: mine" in jobs.feedback_text)

        # Esc closes the command line without running anything.
        await pilot.press("colon")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandScreen))
        await pilot.press(*"held", "escape")
        await wait_until(pilot, lambda: app.screen is jobs, what="the command line closed")


@pytest.mark.slow
async def test_a_query_that_cannot_help_is_not_offered(demo: Demo) -> None:
    # summary today: a 503 from Gemini, nothing asked yet. Gemini cannot be searched and no handle is recorded, so
    # r is not offered (it says why); step 1 says what is known; step 2 is preset; the list can still be changed.
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        assert screen.detail is not None and not screen.detail.query_helps
        assert "step 2 is set to cannot_determine (a query cannot help)" in screen.feedback_text
        await pilot.press("r")
        await wait_until(pilot, lambda: "a query cannot help" in screen.feedback_text, what="r explains itself")
        assert "Step 1 · What is known" in str(screen.query_one("#step-1").content)
        category = screen.query_one("#finding-category", Select)
        assert category.value == "cannot_determine"
        category.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: category.expanded, what="the category list open")
        await pilot.press("up", "up", "enter")  # cannot_determine -> in_progress
        await wait_until(pilot, lambda: category.value == "in_progress", what="in_progress chosen")
        screen.query_one("#finding-note", Input).value = "listed in AI Studio as running"
        await pilot.press("f")
        modal = await confirm_open(pilot)
        assert "category: in_progress" in modal.lines
        await pilot.press("y")
        await wait_until(pilot, lambda: screen.detail is not None and screen.detail.latest_finding is not None
                         and screen.detail.latest_finding.detail["category"] == "in_progress", what="the finding")
    assert not any(e.kind == "remote_query" for e in job_events_of(demo.ledger, demo.jobs["held_503"]))


def job_events_of(ledger: Path, key: JobKey) -> list[Any]:
    conn = connect(ledger, readonly=True)
    try:
        return events_store.job_events(conn, key)
    finally:
        conn.close()


@pytest.mark.slow
async def test_palette_runs_a_triage_action_and_explains_a_disabled_one(demo: Demo) -> None:
    from console.app import ReclaimCommands

    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_triage(demo.jobs["held_503"])
        await wait_loaded(pilot, TriageScreen)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        entries = {title: (help_text, run) for title, help_text, run in ReclaimCommands(screen).entries()}
        assert entries["Release"][0].startswith("disabled: alice lacks the approver role")
        assert entries["Query remote"][0].startswith("disabled: a query cannot help")
        await entries["Record finding"][1]()  # the same action as its key: the category is preset, so the note
        await wait_until(pilot, lambda: focused_id(app) == "finding-note", what="the note, from the palette")
        assert not isinstance(app.screen, ConfirmScreen)


@pytest.mark.slow
async def test_escape_on_notifications_asks_before_discarding_the_note(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("n")
        await wait_loaded(pilot, NotificationsScreen)
        screen = app.screen
        screen.query_one("#notif-note", Input).focus()
        await pilot.press(*"phoned the on-call", "enter")  # Enter keeps the note, the keys go back to the table
        assert focused_id(app) == "notif-table" and "settle the selected notification" in screen.feedback_text
        await pilot.press("escape")
        modal = await confirm_open(pilot)
        assert "note: phoned the on-call" in modal.lines
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is screen, what="kept")
        assert screen.query_one("#notif-note", Input).value == "phoned the on-call"
