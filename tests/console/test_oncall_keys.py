"""The on-call flow counted key by key over two seats on one ledger, following the screen's own guidance.

A held Gemini job with no handle (Gemini cannot be searched by idem key): a query cannot help, so step 1 says what
is known and step 2 is preset; alice records a finding, bob releases: 8 keys, one typed text per seat. A held
Gemini job whose reply was lost but whose handle evidence already names: alice records the finding evidence points
to, bob reconciles with the handle the form offers (verified with the remote at confirm): 8 keys, no handle typed.
Both at 160x48 and at 80x24. The remote is counted at the HTTP level; the ledger is read back from a fresh
connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE, write_config
from console_helpers import wait_loaded, wait_until
from test_keyboard import KeyCounter, confirm_open, focused_id

from console.app import make_app
from console.screens.confirm import ConfirmScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from console.widgets.guarded_action import GuardedAction
from console.widgets.held_table import HeldTable
from ledger.clock import ManualClock
from ledger.config import Config, load_config
from ledger.db import connect, create_ledger, write_tx
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, submit_now

pytestmark = pytest.mark.anyio
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z
SIZES = pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])


def held_gemini(folder: Path, sim: Simulator, fault: str) -> tuple[Path, Config, ManualClock, JobKey]:
    """A fresh ledger with one Gemini job held by `fault` on its create (no handle recorded)."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    key = JobKey(f"oncall {folder.name}", ARTICLE)
    sim.add_fault(fault, match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    try:
        res = submit_now(conn, config, ARTICLE, {"input": "write the on-call post"}, clock=clock, job_id=key.job_id,
                         target=f"blog/{folder.name}", remotes=RemoteCache(config))
    finally:
        conn.close()
    assert res.state == "held"
    clock.set(T)
    return ledger, config, clock, key


def read_back(ledger: Path, key: JobKey) -> tuple[Any, dict[str, Any]]:
    fresh = connect(ledger, readonly=True)
    try:
        job = jobs_store.find_job(fresh, key)
        events = {e.kind: e for e in events_store.job_events(fresh, key)}
    finally:
        fresh.close()
    return job, events


async def alice_records_the_finding(a: Any, alice: Any, key: JobKey, counter: KeyCounter, category: str,
                                    note: str) -> None:
    """alice: t on the held row at her cursor, f (step 2 preset, so the note), her note, Enter, y."""
    await wait_loaded(a, OverviewScreen)
    held = alice.screen.query_one(HeldTable)
    await wait_until(a, lambda: held.key_at_cursor() == key, what="the held job at alice's cursor")
    await counter.press(a, "t")
    await wait_loaded(a, TriageScreen)
    screen = alice.screen
    assert isinstance(screen, TriageScreen) and screen.key == key
    await wait_until(a, lambda: f"step 2 is set to {category}" in screen.feedback_text, what="the guidance")
    await counter.press(a, "f")
    await wait_until(a, lambda: focused_id(alice) == "finding-note", what="the note field")
    await counter.type(a, note)
    await counter.press(a, "enter")
    modal = await confirm_open(a)
    assert f"category: {category}" in modal.lines
    await counter.press(a, "y")
    await wait_until(a, lambda: screen.detail is not None and screen.detail.latest_finding is not None,
                     what="alice's finding recorded")


async def bob_decides(b: Any, bob: Any, key: JobKey, counter: KeyCounter, action: str, guidance: str,
                      reason: str) -> TriageScreen:
    """bob: t on the held row at his cursor, the key the screen names, his reason, Enter, y."""
    await wait_loaded(b, OverviewScreen)
    held = bob.screen.query_one(HeldTable)
    await wait_until(b, lambda: held.key_at_cursor() == key, what="the held job at bob's cursor")
    await counter.press(b, "t")
    await wait_loaded(b, TriageScreen)
    screen = bob.screen
    assert isinstance(screen, TriageScreen)
    await wait_until(b, lambda: screen.query_one(f"#action-{action}", GuardedAction).allowed is True
                     and guidance in screen.feedback_text, what=f"{action} offered to bob")
    await counter.press(b, {"release": "e", "reconcile": "c"}[action])
    await wait_until(b, lambda: focused_id(bob) == "decision-reason", what="the reason field")
    await counter.type(b, reason)
    await counter.press(b, "enter")
    await confirm_open(b)
    await counter.press(b, "y")
    return screen


@pytest.mark.slow
@SIZES
async def test_release_in_eight_keys_over_two_seats(tmp_path: Path, console_sim: Simulator,
                                                    size: tuple[int, int]) -> None:
    ledger, config, clock, key = held_gemini(tmp_path, console_sim, "drop_before_accept")
    idem = idem_key(key.job_id, key.operation)
    counter = KeyCounter()
    alice = make_app(ledger, config, "alice", clock=clock)
    bob = make_app(ledger, config, "bob", clock=clock)
    async with alice.run_test(size=size) as a, bob.run_test(size=size) as b:
        await alice_records_the_finding(a, alice, key, counter, "cannot_determine",
                                        "nothing labelled with this idem key on the remote console")
        alice_keys, alice_texts = len(counter.keys), len(counter.texts)
        screen = await bob_decides(b, bob, key, counter, "release", "e releases it",
                                   "alice found nothing at the remote")
        await wait_until(b, lambda: screen.detail is not None and screen.detail.job.state == "reserving",
                         what="the release recorded")

    assert counter.keys == ["t", "f", "enter", "y", "t", "e", "enter", "y"]
    assert len(counter.keys) <= 8 and alice_texts == 1 and len(counter.texts) - alice_texts == 1
    assert alice_keys == 4
    assert console_sim.count("create", idem=idem) == 1  # the console sends nothing; the next worker pass will
    assert console_sim.count("get", idem=idem) == 0  # and asks nothing that could not be answered
    job, events = read_back(ledger, key)
    assert job is not None and (job.state, job.attempt) == ("reserving", 2)
    assert "remote_query" not in events
    assert events["finding"].actor == "alice" and events["finding"].detail["category"] == "cannot_determine"
    assert events["release"].actor == "bob" and events["release"].detail["reason"] == "alice found nothing at the remote"


@pytest.mark.slow
@SIZES
async def test_reconcile_in_eight_keys_with_the_handle_evidence_names(tmp_path: Path, console_sim: Simulator,
                                                                      size: tuple[int, int]) -> None:
    ledger, config, clock, key = held_gemini(tmp_path, console_sim, "complete_lose_reply")
    idem = idem_key(key.job_id, key.operation)
    [interaction] = console_sim.find_by_idem(idem)
    handle = str(interaction["id"])
    conn = connect(ledger)
    try:  # a delivery naming the interaction arrived; no worker pass has acted on it yet
        job = jobs_store.find_job(conn, key)
        assert job is not None and job.handle is None
        with write_tx(conn):
            evidence_store.record(conn, at=T - 60, source="webhook", idem_key=idem, attempt=job.attempt, handle=handle,
                            remote_state="completed", job=key, ref="delivery-1")
    finally:
        conn.close()
    counter = KeyCounter()
    alice = make_app(ledger, config, "alice", clock=clock)
    bob = make_app(ledger, config, "bob", clock=clock)
    async with alice.run_test(size=size) as a, bob.run_test(size=size) as b:
        await alice_records_the_finding(a, alice, key, counter, "completed_reply_lost",
                                        "the remote console lists it as completed")
        alice_texts = len(counter.texts)
        screen = await bob_decides(b, bob, key, counter, "reconcile", "c reconciles with it",
                                   "the webhook named it and alice saw it completed")
        assert screen.query_one("#decision-handle").value == handle  # offered, never typed
        await wait_until(b, lambda: screen.detail is not None and screen.detail.job.state == "submitted",
                         what="the reconcile recorded")
        await b.press("escape")  # what was typed was written: leaving asks nothing
        await wait_until(b, lambda: bob.screen is not screen, what="triage left")
        assert not isinstance(bob.screen, ConfirmScreen)

    assert counter.keys == ["t", "f", "enter", "y", "t", "c", "enter", "y"]
    assert len(counter.keys) <= 8 and alice_texts == 1 and len(counter.texts) - alice_texts == 1
    assert handle not in counter.texts
    assert console_sim.count("create", idem=idem) == 1  # nothing sent again
    job, events = read_back(ledger, key)
    assert job is not None and job.state == "submitted" and job.handle == handle
    assert events["finding"].actor == "alice" and events["finding"].detail["category"] == "completed_reply_lost"
    assert events["reconcile"].actor == "bob" and events["reconcile"].detail["verified"] is True
    assert events["reconcile"].detail["handle"] == handle


@pytest.mark.slow
async def test_stage_and_awaiting_my_approval_across_two_seats(tmp_path: Path, console_sim: Simulator) -> None:
    """Two held jobs on one ledger; alice writes a finding on the first, bob on the second. bob's seat sees each
    row's stage change live, his header counts the one awaiting *his* approval (four-eyes leaves out his own), and
    his built-in view lists that one only; alice (no approver role) has no count and no such view."""
    from console.screens.jobs import JobListScreen
    from console.widgets.job_table import JobTable
    from ledger import triage

    config = load_config(write_config(tmp_path, console_sim.url))
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    keys = [JobKey(f"stage {n}", ARTICLE) for n in ("one", "two")]
    conn = connect(ledger)
    try:
        for key in keys:
            console_sim.add_fault("drop_before_accept", match_idem=idem_key(key.job_id, key.operation))
            res = submit_now(conn, config, ARTICLE, {"input": key.job_id}, clock=clock, job_id=key.job_id,
                             target=key.job_id, remotes=RemoteCache(config))
            assert res.state == "held"
    finally:
        conn.close()
    clock.set(T)
    alice = make_app(ledger, config, "alice", clock=clock)
    bob = make_app(ledger, config, "bob", clock=clock)
    async with alice.run_test(size=(80, 24)) as a, bob.run_test(size=(80, 24)) as b:
        await wait_loaded(a, OverviewScreen)
        await wait_loaded(b, OverviewScreen)
        held = bob.screen.query_one(HeldTable)

        def stages() -> list[str]:
            return [str(held.get_row_at(i)[2].plain) for i in range(held.row_count)]

        # at 80 columns the stage is said in its short words (short_stage)
        await wait_until(b, lambda: stages() == ["needs finding", "needs finding"], what="both need a finding")
        assert bob.awaiting_me == 0 and alice.awaiting_me is None
        conn = connect(ledger)
        try:  # written by each seat's own operator through the ledger, as the triage screen does
            triage.record_finding(conn, config, keys[0], "not_received", "nothing at the remote", actor="alice",
                                  clock=clock)
            triage.record_finding(conn, config, keys[1], "not_received", "nothing there either", actor="bob",
                                  clock=clock)
        finally:
            conn.close()
        await wait_until(b, lambda: stages() == ["approve (alice)", "approve (bob)"], what="the stages, live")
        await wait_until(b, lambda: bob.awaiting_me == 1, what="bob's count")
        from console.widgets.ledger_header import LedgerHeader
        header = bob.screen.query_one(LedgerHeader)
        await wait_until(b, lambda: "1 to approve" in str(header.query_one("#hdr-awaiting").content),
                         what="the count in bob's header")
        assert alice.awaiting_me is None

        bob.run_command("view awaiting my approval")
        await wait_until(b, lambda: isinstance(bob.screen, JobListScreen) and bob.screen.page is not None
                         and bob.screen.page.filter_text == "stage:awaiting-my-approval", what="bob's view")
        jobs = bob.screen
        assert isinstance(jobs, JobListScreen)
        await wait_until(b, lambda: jobs.page is not None and [j.key for j in jobs.page.jobs] == [keys[0]],
                         what="only the job alice found")
        assert "stage" in [str(c.label.plain) for c in jobs.query_one(JobTable).columns.values()]
        jobs.set_filter("stage:awaiting-approval")
        await wait_until(b, lambda: jobs.page is not None and jobs.page.filter_text == "stage:awaiting-approval"
                         and [j.key for j in jobs.page.jobs] == keys, what="both awaiting approval")
        alice.run_command("view awaiting my approval")
        await wait_until(a, lambda: "no such saved view" in getattr(alice.screen, "feedback_text", ""),
                         what="alice has no such view")
