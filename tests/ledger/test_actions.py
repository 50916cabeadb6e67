"""The one action table (ledger/actions.py) drives the ledger's refusals, previews and required fields, and the
console's form: the same rule, from one place, at every front end. (The CLI's side is tests/cli/test_cli_triage.py.)

Every refusal here is checked against the ledger's fingerprint: nothing was written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console import live
from console.bindings import TRIAGE_ACTIONS
from ledger import Ledger, actions, triage
from ledger.clock import ManualClock, iso, parse_due, parse_time
from ledger.config import Config
from ledger.errors import BadInput, Refused
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
GOOD = {"category": "not_received", "note": "nothing labelled with the idem key", "reason": "the finding says so",
        "handle": "v1_some-handle", "owner": "alice", "due": parse_time("2026-12-02T09:00Z"), "evidence": "1"}
"""A valid value for every field the table knows (due in epoch seconds, as the ledger takes it)."""
WRITES = [a for a in actions.JOB_ACTIONS if actions.ACTIONS[a].fields]


def _held(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, job_id: str = "held-1") -> JobKey:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _given(action: str, **override: Any) -> dict[str, Any]:
    return {**{f.name: GOOD[f.name] for f in actions.ACTIONS[action].fields}, **override}


# -- the table itself --------------------------------------------------------------------------------------------
def test_every_job_action_is_in_the_table_and_every_write_asks_why() -> None:
    assert set(triage.ACTIONS) == set(actions.JOB_ACTIONS) <= set(actions.ACTIONS)
    for name in actions.ACTIONS:
        spec = actions.ACTIONS[name]
        assert spec.role in ("triage", "approver") and spec.summary and spec.help
        names = {f.name for f in spec.fields}
        if name != "query":  # a read of the remote; every write records who, when and why
            assert names & {"reason", "note"}, f"{name} records no reason"
    assert {f.name for f in actions.ACTIONS["assign"].fields} == {"reason", "owner", "due"}
    assert [f.option for f in actions.ACTIONS["reconcile"].fields] == ["--reason", "--handle"]
    with pytest.raises(BadInput, match="action 'launch': unknown"):
        actions.action("launch")


def test_refusal_words_come_from_the_table(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock,
) -> None:
    held = _held(sim, conn, cfg, clock)
    job = triage.get_job(conn, held)
    for name in actions.JOB_ACTIONS:
        spec = actions.ACTIONS[name]
        assert triage.refusal(conn, cfg, job, name, "dave", clock.now()) == spec.role_refusal("dave")
    sent = submit_now(conn, cfg, OP, {"input": "fine"}, clock=clock, job_id="sent-1", remotes=RemoteCache(cfg))
    assert sent.state == "submitted"
    submitted = triage.get_job(conn, sent.key)
    for name in actions.JOB_ACTIONS:
        spec = actions.ACTIONS[name]
        expected = spec.state_refusal("submitted")
        assert triage.refusal(conn, cfg, submitted, name, "bob", clock.now()) == expected
        assert (expected is None) == (spec.states is None)  # only the query applies to any state
    assert "the job is submitted; release applies to held or failed jobs" == \
        actions.ACTIONS["release"].state_refusal("submitted")


def test_previews_are_the_tables_text(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock) -> None:
    key = _held(sim, conn, cfg, clock)
    for name in actions.JOB_ACTIONS:
        p = triage.preview(conn, cfg, key, name, "bob", clock)
        if name == "release":
            assert p.summary == ("sends 1 new request to gemini (attempt 2, same idem key); "
                                 "article.generate quota today 1/100 -> 2/100")
            assert p.summary == actions.ACTIONS["release"].detailed.format(
                remote="gemini", attempt=2, operation=OP, used=1, after=2, limit=100)
        else:
            assert p.summary == actions.ACTIONS[name].summary


# -- a missing reason (or note, handle, owner, due, category) is refused by the ledger itself --------------------
@pytest.mark.parametrize("name", WRITES)
def test_the_ledger_refuses_each_missing_field_naming_its_option(
    name: str, sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for field in actions.ACTIONS[name].fields:
        for blank in ("", "   "):
            with pytest.raises(BadInput) as refused:
                triage.take(conn, cfg, key, name, _given(name, **{field.name: blank}), actor="carol", clock=clock,
                            unverified=True)
            assert f"{field.name} ({field.option}): required" in str(refused.value)
            assert str(refused.value) == f"{name}: {field.missing_text()}"
    assert fingerprint(ledger_path) == before


def test_each_ledger_function_refuses_a_blank_reason_before_anything_else(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    calls = {
        "assign": lambda: triage.assign(conn, cfg, key, "alice", GOOD["due"], actor="dave", clock=clock, reason=" "),
        "release": lambda: triage.release(conn, cfg, key, actor="dave", clock=clock, reason=""),
        "reconcile": lambda: triage.reconcile(conn, cfg, key, "v1_x", actor="dave", clock=clock, reason="",
                                              unverified=True),
        "reject": lambda: triage.reject(conn, cfg, key, actor="dave", clock=clock, reason="\t"),
        "remediate": lambda: triage.remediate(conn, cfg, key, "", actor="dave", clock=clock),
        "finding": lambda: triage.record_finding(conn, cfg, key, "not_received", " ", actor="dave", clock=clock),
    }
    for name, call in calls.items():
        # Input first: even a viewer (dave) is told what is missing, and nothing is written.
        with pytest.raises(BadInput, match=r"\((--reason|--note)\): required") as refused:
            call()
        assert str(refused.value).startswith(f"{name}: ")
    assert fingerprint(ledger_path) == before
    with pytest.raises(BadInput, match=r"category \(--category\) 'maybe': unknown"):
        triage.record_finding(conn, cfg, key, "maybe", "n", actor="bob", clock=clock)
    # With its reason, the same call is judged on role and policy.
    with pytest.raises(Refused, match="dave lacks the approver role"):
        triage.reject(conn, cfg, key, actor="dave", clock=clock, reason="not needed")
    assert fingerprint(ledger_path) == before
    triage.reject(conn, cfg, key, actor="carol", clock=clock, reason="not needed")
    events = [e for e in _events(conn, key) if e.kind == "reject"]
    assert events[-1].detail["reason"] == "not needed"


def _events(conn: Any, key: JobKey) -> list[Any]:
    return events_store.job_events(conn, key)


def test_dry_run_says_what_the_action_would_and_writes_nothing(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    triage.record_finding(conn, cfg, key, "not_received", "absent", actor="bob", clock=clock)
    before = fingerprint(ledger_path)
    ok = triage.dry_run(conn, cfg, key, "release", {"reason": "r"}, actor="carol", clock=clock)
    assert ok.allowed and ok.summary == triage.preview(conn, cfg, key, "release", "carol", clock).summary
    no = triage.dry_run(conn, cfg, key, "release", {"reason": "r"}, actor="bob", clock=clock)
    assert not no.allowed and no.reason == triage.refusal(conn, cfg, triage.get_job(conn, key), "release", "bob",
                                                           clock.now())
    with pytest.raises(BadInput, match="--reason"):
        triage.dry_run(conn, cfg, key, "release", {"reason": ""}, actor="carol", clock=clock)
    assert fingerprint(ledger_path) == before


# -- the console's form reads the same table ---------------------------------------------------------------------
def _form(action: str, **override: str) -> live.ActionInput:
    """What the triage screen would hand over for `action`: the one note box carries the note or the reason."""
    values = {"category": "not_received", "note": "typed", "handle": "v1_h", "owner": "alice", "due": "4h"}
    values.update(override)
    return live.ActionInput(**values)


@pytest.mark.parametrize("name", [a for a in WRITES if a in TRIAGE_ACTIONS])  # dismiss-candidate: CLI only
def test_the_console_asks_for_each_missing_field_in_the_tables_words(name: str) -> None:
    spec = actions.ACTIONS[name]
    assert live.check_input(name, _form(name)) is None
    box = {"category": "category", "note": "note", "reason": "note", "handle": "handle", "owner": "owner",
           "due": "due"}
    for field in spec.fields:
        assert live.check_input(name, _form(name, **{box[field.name]: " "})) == field.ask
        assert spec.missing(_form(name, **{box[field.name]: ""}).fields()) == field
    assert live.describe_input(name, _form(name)) == spec.describe(_form(name).fields())
    assert live.check_input("query", _form("query", note="")) is None  # a read asks for nothing


def test_the_console_refuses_a_missing_reason_through_the_ledger_too(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    """Even past its own form check (a stale screen, a script), `perform` writes nothing without the reason."""
    key = _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for name in ("release", "reject", "assign", "reconcile", "remediate"):
        with pytest.raises(BadInput, match="required"):
            live.perform(Ledger(ledger_path, conn, cfg, clock), RemoteCache(cfg), key, name, _form(name, note=""),
                         actor="carol")
    assert fingerprint(ledger_path) == before


# -- one due-time parser -----------------------------------------------------------------------------------------
T = parse_time("2026-12-01T12:00:00Z")  # 21:00 in Tokyo


@pytest.mark.parametrize(("text", "tz", "expected"), [
    ("2h", "UTC", "2026-12-01T14:00:00Z"),
    ("30m", "UTC", "2026-12-01T12:30:00Z"),
    ("1h30m", "UTC", "2026-12-01T13:30:00Z"),
    ("2d", "UTC", "2026-12-03T12:00:00Z"),
    ("tomorrow 09:00", "UTC", "2026-12-02T09:00:00Z"),
    ("tomorrow 09:00", "Asia/Tokyo", "2026-12-02T00:00:00Z"),
    ("today 23:30", "Asia/Tokyo", "2026-12-01T14:30:00Z"),
    ("Tomorrow 9:05", "America/New_York", "2026-12-02T14:05:00Z"),
    ("2026-12-03T09:00Z", "Asia/Tokyo", "2026-12-03T09:00:00Z"),
    ("2026-12-03T09:00", "Asia/Tokyo", "2026-12-03T09:00:00Z"),  # a naive ISO time is UTC, as before
    ("1796288400", "UTC", "2026-12-03T09:00:00Z"),
])
def test_due_times(text: str, tz: str, expected: str) -> None:
    assert iso(parse_due(text, T, tz)) == expected
    assert live.parse_due(text, T, tz) == parse_due(text, T, tz)  # the console's is the ledger's


@pytest.mark.parametrize(("text", "needle"), [
    ("", "required"), ("tomorrow", "tomorrow 09:00"), ("tomorrow 24:00", "not a time of day"),
    ("yesterday", "not a time"), ("2x", "not a time"), ("nan", "1970 and 9999"), ("inf", "1970 and 9999"),
    ("0001-01-01T00:00Z", "1970 and 9999"), ("99999999h", "1970 and 9999"), ("1" * 101, "at most 100"),
])
def test_due_times_refused(text: str, needle: str) -> None:
    with pytest.raises(BadInput, match=needle) as refused:
        parse_due(text, T, "UTC", name="--due")
    assert str(refused.value).startswith("--due")
