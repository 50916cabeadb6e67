"""Guided triage against the simulator: query, finding, release by another approver, exactly one more send.

Also: the four-eyes refusal, a refusal at write time, a viewer and a read-only console seeing no enabled action,
and quitting while a remote query is still waiting for its answer.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE, Demo, held_with_handle, write_config
from console_helpers import wait_loaded, wait_until, widget_text
from ledger_reads import job_fingerprint
from textual.pilot import Pilot
from textual.widgets import Button, Input, Select, Static

from console.app import ReclaimApp, make_app
from console.screens.confirm import ConfirmScreen
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from console.times import full_time
from console.widgets.guarded_action import GuardedAction
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config, load_config
from ledger.db import connect, create_ledger
from ledger.model import JobKey, idem_key
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, submit_now, tick

pytestmark = pytest.mark.anyio
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z


def fingerprint(path: Path) -> str:
    conn = connect(path, readonly=True)
    try:
        return job_fingerprint(conn)
    finally:
        conn.close()


def held_ledger(folder: Path, sim: Simulator) -> tuple[Path, Config, ManualClock, JobKey]:
    """A fresh ledger with one job whose send was reset after the request went out: held, 1 create counted."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    key = JobKey("triage-me 2026-12-01", ARTICLE)
    sim.add_fault("drop_before_accept", match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    res = submit_now(conn, config, ARTICLE, {"input": "write the triage post"}, clock=clock, job_id=key.job_id,
                     target="blog/triage-me", remotes=RemoteCache(config))
    conn.close()
    assert res.state == "held"
    clock.set(T)
    return ledger, config, clock, key


async def open_triage(pilot: Pilot[Any], key: JobKey) -> TriageScreen:
    """Overview -> held job -> job screen -> t."""
    app = pilot.app
    assert isinstance(app, ReclaimApp)
    await wait_loaded(pilot, OverviewScreen)
    await pilot.press("enter")
    await wait_loaded(pilot, JobScreen)
    assert isinstance(app.screen, JobScreen) and app.screen.key == key
    await pilot.press("t")
    await wait_loaded(pilot, TriageScreen)
    screen = app.screen
    assert isinstance(screen, TriageScreen)
    return screen


async def confirm(pilot: Pilot[Any], accept: bool = True) -> ConfirmScreen:
    """Wait for the confirmation; check Cancel is focused; then confirm (or cancel)."""
    app = pilot.app
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
    modal = app.screen
    assert isinstance(modal, ConfirmScreen)
    await wait_until(pilot, lambda: app.focused is not None and app.focused.id == "cancel", what="Cancel focused")
    if accept:
        await pilot.click("#confirm")
    else:
        await pilot.press("enter")  # Enter on the default button cancels
    await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="the confirmation to close")
    return modal


def guard(screen: TriageScreen, action: str) -> GuardedAction:
    return screen.query_one(f"#action-{action}", GuardedAction)


@pytest.mark.slow
async def test_whole_triage_ends_in_one_more_send(tmp_path: Path, console_sim: Simulator) -> None:
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    idem = idem_key(key.job_id, key.operation)
    assert console_sim.count("create", idem=idem) == 1

    # bob (triage + approver) asks the remote and records what he found.
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        assert "no handle recorded and Gemini interactions cannot be listed or searched" in widget_text(app)
        assert guard(screen, "release").allowed is False  # no finding yet
        # No handle and Gemini cannot be searched: a query cannot help, so r is not offered and says why; step 1
        # says what is known instead, and step 2 is preset to cannot_determine (the operator may change it).
        assert guard(screen, "query").allowed is False
        await pilot.press("r")
        assert not isinstance(app.screen, ConfirmScreen)
        await wait_until(pilot, lambda: "a query cannot help" in screen.feedback_text, what="r explains itself")
        assert "Evidence: none for this attempt yet" in widget_text(app)
        assert screen.query_one("#finding-category", Select).value == "cannot_determine"
        screen.query_one("#finding-category", Select).value = "not_received"
        screen.query_one("#finding-note", Input).value = "Nothing labelled with this idem key in the Gemini console."
        await pilot.press("f")
        modal = await confirm(pilot)
        assert "records what you found; nothing is sent" in modal.summary
        await wait_until(pilot, lambda: screen.detail is not None and screen.detail.latest_finding is not None,
                         what="the finding recorded")
        # Four-eyes: bob wrote the finding, so bob may not release it.
        release = guard(screen, "release")
        assert release.allowed is False and release.reason is not None and release.reason.startswith("four-eyes")
        assert screen.query_one("#btn-release", Button).disabled
    assert console_sim.count("create", idem=idem) == 1

    # carol (approver) releases: the preview says what will be sent; Cancel is the default.
    app = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        assert guard(screen, "release").allowed is True
        screen.query_one("#decision-reason", Input).value = "bob found it never reached Gemini"
        await pilot.press("e")
        modal = await confirm(pilot, accept=False)  # first: cancel, nothing happens
        assert "sends 1 new request to gemini (attempt 2, same idem key)" in modal.summary
        assert "article.generate quota today 1/200 -> 2/200" in modal.summary
        assert screen.detail is not None and screen.detail.job.state == "held"
        await pilot.press("e")
        await confirm(pilot)
        await wait_until(pilot, lambda: screen.detail is not None and screen.detail.job.state == "reserving",
                         what="the release written")
        assert "released: attempt 2" in widget_text(app)
    assert console_sim.count("create", idem=idem) == 1  # the console itself sends nothing

    conn = connect(ledger)
    tick(conn, config, clock=clock, remotes=RemoteCache(config))
    conn.close()
    assert console_sim.count("create", idem=idem) == 2  # exactly one more create

    fresh = connect(ledger, readonly=True)
    job = jobs_store.find_job(fresh, key)
    events = events_store.job_events(fresh, key)
    fresh.close()
    assert job is not None and job.attempt == 2 and job.state == "consumed" and job.idem_key == idem
    by_kind = {e.kind: e for e in events}
    assert "remote_query" not in by_kind  # nothing was asked that could not be answered
    assert by_kind["finding"].actor == "bob" and by_kind["finding"].detail["category"] == "not_received"
    assert by_kind["release"].actor == "carol"
    assert by_kind["release"].detail["reason"] == "bob found it never reached Gemini"


@pytest.mark.slow
async def test_four_eyes_refusal_is_shown_and_changes_nothing(demo: Demo) -> None:
    before = fingerprint(demo.ledger)
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)  # bob wrote the finding on #07
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, demo.jobs["held_reset"])
        text = widget_text(app)
        assert "four-eyes: bob wrote a finding" in text and "an approver who did neither must release" in text
        assert screen.query_one("#btn-release", Button).disabled
        assert screen.check_action("act", ("release",)) is None
        screen.query_one("#decision-reason", Input).value = "let me"
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
    assert fingerprint(demo.ledger) == before


@pytest.mark.slow
async def test_refusal_at_write_time_is_shown(demo: Demo, demo_sim: Simulator) -> None:
    key = demo.jobs["held_reset"]
    idem = idem_key(key.job_id, key.operation)
    sends = demo_sim.count("create", idem=idem)
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        screen.query_one("#decision-reason", Input).value = "release it"
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        # Meanwhile, someone else closes the job from another process, before the console looks again (live
        # updates paused: the confirmation still shows the release as allowed).
        app.paused = True
        other = connect(demo.ledger)
        triage.reject(other, demo.config, key, actor="carol", clock=demo.clock, reason="closed elsewhere")
        other.close()
        before = fingerprint(demo.ledger)
        await pilot.click("#confirm")
        await wait_until(pilot, lambda: "release refused" in widget_text(app), what="the refusal shown")
        assert "the job is rejected" in widget_text(app)
        assert fingerprint(demo.ledger) == before
    assert demo_sim.count("create", idem=idem) == sends


@pytest.mark.slow
async def test_an_open_confirmation_is_checked_again_when_the_ledger_changes(demo: Demo, demo_sim: Simulator) -> None:
    """The quota moves while a release's confirmation is open: its preview says the new figures; the job is closed
    elsewhere: the confirmation says so and `y` does nothing."""
    key = demo.jobs["held_reset"]
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        screen.query_one("#decision-reason", Input).value = "release it"
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        m = re.search(r"quota today (\d+)/(\d+) -> (\d+)/", confirm.summary)
        assert m is not None, confirm.summary
        used = int(m.group(1))
        other = connect(demo.ledger)
        reserve(other, demo.config, key.operation, {"input": "quota moves"}, clock=demo.clock, job_id="quota-moves")
        other.close()
        app.wake_follower()
        await wait_until(pilot, lambda: f"quota today {used + 1}/" in confirm.summary, what="the preview rechecked")
        assert f"quota today {used + 1}/{m.group(2)} -> {used + 2}/" in str(confirm.query_one("#confirm-summary",
                                                                                              Static).render())
        other = connect(demo.ledger)
        triage.reject(other, demo.config, key, actor="carol", clock=demo.clock, reason="closed elsewhere")
        other.close()
        app.wake_follower()
        await wait_until(pilot, lambda: confirm.refusal is not None, what="the refusal rechecked")
        before = fingerprint(demo.ledger)
        await pilot.press("y")
        assert isinstance(app.screen, ConfirmScreen) and "the job is rejected" in str(confirm.refusal)
        await pilot.press("escape")
        await wait_until(pilot, lambda: "release refused" in widget_text(app), what="the refusal said")
        assert fingerprint(demo.ledger) == before


@pytest.mark.slow
async def test_viewer_sees_every_action_disabled_with_reason(demo: Demo) -> None:
    app = make_app(demo.ledger, demo.config, "dave", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, demo.jobs["held_reset"])
        guards = list(screen.query(GuardedAction))
        # every job action but dismiss-candidate (taken with the CLI; the held screen names its command)
        assert {g.action for g in guards} == set(triage.ACTIONS) - {"dismiss-candidate"}
        for g in guards:
            assert g.allowed is False and g.reason is not None and g.reason.startswith("dave lacks the")
            assert g.query_one(Button).disabled
            assert screen.check_action("act", (g.action,)) is None
        assert "viewer" in widget_text(app) or "dave · viewer" in app.operator_label


@pytest.mark.slow
async def test_read_only_console_writes_nothing(demo: Demo) -> None:
    before = fingerprint(demo.ledger)
    app = make_app(demo.ledger, demo.config, "carol", read_only=True, clock=demo.clock)
    assert app.source.read_only
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, demo.jobs["held_reset"])
        for g in screen.query(GuardedAction):
            assert g.allowed is False and g.reason is not None and "read-only" in g.reason
        screen.query_one("#decision-reason", Input).value = "try"
        for key in "rfecxma":
            await pilot.press(key)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert "READ-ONLY" in widget_text(app)
        conn = app.source.connect()  # the console's own connections are mode=ro
        with pytest.raises(Exception, match=r"(?i)read-?only"):
            triage.assign(conn, demo.config, demo.jobs["held_reset"], "bob", 0.0, actor="bob", clock=demo.clock,
                          reason="r")
        conn.close()
    assert fingerprint(demo.ledger) == before


def remote_queries(ledger: Path, key: JobKey) -> int:
    conn = connect(ledger, readonly=True)
    try:
        return sum(e.kind == "remote_query" for e in events_store.job_events(conn, key))
    finally:
        conn.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_quit_does_not_wait_for_a_remote_query(tmp_path: Path) -> None:
    with Simulator().start() as sim:
        ledger, config_path, clock, key = held_with_handle(tmp_path, sim, job_id="asked while quitting 2026-12-01",
                                                           target="blog/quit", timeout_s=3)
        config = load_config(config_path)
        clock.set(T)
        idem = idem_key(key.job_id, key.operation)
        sim.add_fault("slow", seconds=8, method="get")  # the triage query's GET: no answer before the 3 s timeout
        gets = sim.count("get")
        app = make_app(ledger, config, "bob", clock=clock)

        async def session() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                await open_triage(pilot, key)
                await pilot.press("r")  # no confirmation: the query is a read
                await wait_until(pilot, lambda: sim.count("get") > gets, what="the query's GET at the remote")
                await pilot.press("ctrl+q")

        # Like `reclaim console`: asyncio.run joins its default executor (every thread worker) on the way out.
        asyncio.run(session())
        # The query cannot end before the remote's 3 s timeout, and nothing is recorded yet: neither the app nor
        # asyncio.run waited for it. Its thread is a daemon, so a process that exits now does not wait either.
        assert remote_queries(ledger, key) == 0
        asking = [t for t in threading.enumerate() if t.name == "reclaim-query" and t.is_alive()]
        assert asking and all(t.daemon for t in asking)
        # Decided: this process lives on, so the abandoned query records the remote's answer when it comes: one
        # append-only query event, nothing else; the job stays held and nothing was sent again.
        wait_for(lambda: remote_queries(ledger, key) == 1, timeout=20.0, what="the abandoned query's record")
        conn = connect(ledger, readonly=True)
        job = jobs_store.find_job(conn, key)
        conn.close()
        assert job is not None and job.state == "held"
        assert sim.count("create", idem=idem) == 1


@pytest.mark.slow
async def test_a_decision_waits_while_attempt_1_could_still_arrive(tmp_path: Path, console_sim: Simulator) -> None:
    path = write_config(tmp_path, console_sim.url)
    path.write_text(path.read_text(encoding="utf-8").replace("timeout_seconds = 5", "timeout_seconds = 0.3"),
                    encoding="utf-8")
    config = load_config(path)
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T)
    key = JobKey("hung 2026-12-01", ARTICLE)
    console_sim.add_fault("accept_then_hang", match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    res = submit_now(conn, config, ARTICLE, {"input": "no answer"}, clock=clock, job_id=key.job_id,
                     remotes=RemoteCache(config))
    triage.record_finding(conn, config, key, "not_received", "nothing in the console", actor="alice", clock=clock)
    conn.close()
    assert res.state == "held"
    clock.set(T + 1)  # the send margin is 2 s: attempt 1 could still arrive until T + 2

    app = make_app(ledger, config, "carol", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        assert "Attempt 1 could still arrive until 09:00:02 (UTC): release, reject and remediate wait" in (
            widget_text(app))
        for name in ("release", "reject", "remediate"):
            g = guard(screen, name)
            assert g.allowed is False and g.reason is not None and g.reason.startswith(
                "attempt 1 could still arrive until 09:00:02 (UTC)"), (name, g.reason)
        assert guard(screen, "reconcile").reason is None or "could still arrive" not in guard(screen, "reconcile").reason
        clock.set(T + 2)  # the moment passes: the screen reads the job again by itself, and the decisions open
        await wait_until(pilot, lambda: guard(screen, "release").allowed, timeout=15, what="release allowed")
        assert "could still arrive" not in widget_text(app)
        assert guard(screen, "reject").allowed and guard(screen, "remediate").allowed


@pytest.mark.slow
async def test_after_an_assign_the_form_is_clear_and_esc_asks_nothing(demo: Demo) -> None:
    """An assign's confirmation says the time a typed span means; once written, its fields are empty and Esc leaves."""
    key = demo.jobs["held_reset"]
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(pilot, key)
        screen.query_one("#assign-owner", Input).value = "alice"
        screen.query_one("#assign-due", Input).value = "45m"
        screen.query_one("#decision-reason", Input).value = "alice knows this remote"
        await pilot.press("a")
        modal = await confirm(pilot)
        due_at = demo.clock.now() + 45 * 60
        assert any(line.startswith("due: 45m (") and full_time(due_at, "UTC") in line for line in modal.lines), \
            modal.lines
        await wait_until(pilot, lambda: screen.detail is not None and screen.detail.job.owner == "alice",
                         what="the assign recorded")
        assert full_time(due_at, "UTC") in screen.feedback_text
        assert screen.typed() == []
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is not screen, what="triage left")
        assert not isinstance(app.screen, ConfirmScreen)
