"""The event table (ledger.event_table): one entry per event kind, and `apply()` writes a job only as it says.

Every effect (epoch, attempt, lease, handle, held reason, cleared columns) is derived from the table; a writer
gives only the columns the table names, and a step the table does not allow is refused before anything is
written. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger import event_table, replay
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect, write_tx
from ledger.leases import claim_for_send
from ledger.model import STATES, TERMINAL, JobKey
from ledger.reservation import reserve
from ledger.transitions import apply
from ledger.triage import get_job

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")
T0 = 1_800_000_000.0


def test_every_state_is_reached_and_the_terminal_ones_are_the_models() -> None:
    reached = {to for to in event_table.TRANSITIONS.values()}
    assert reached == set(STATES)
    assert set(event_table.TERMINAL_STATES) == TERMINAL
    assert all(set(k.starts) <= {None, *STATES} for k in event_table.KINDS.values())
    assert all(k.leads_to in (None, *STATES) for k in event_table.KINDS.values())
    # Only the reserve creates a job; an event beside no job (the ledger's policy) creates none.
    assert [k.name for k in event_table.KINDS.values() if None in k.starts and k.leads_to is not None] == ["reserve"]


def test_a_decision_fences_what_was_in_flight_and_a_release_is_a_new_attempt() -> None:
    for name in event_table.DECISION_KINDS:
        assert event_table.KINDS[name].bumps_epoch, name
    assert [k.name for k in event_table.KINDS.values() if k.bumps_attempt] == ["release"]
    assert {k.name for k in event_table.KINDS.values() if k.lease == "take"} == {"send_started", "stale_claimed"}


@pytest.fixture
def held(cfg: Config, ledger_path: Path) -> Any:
    """A job held after a send whose outcome was unknown, and the connection it was written on."""
    conn = connect(ledger_path)
    clock = ManualClock(T0)
    assert reserve(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="j").outcome == "reserved"
    key = JobKey("j", OP)
    claim = claim_for_send(conn, cfg, key, owner="w", now=T0)
    assert claim is not None and claim.job.lease_owner == "w" and claim.job.epoch == 1
    with write_tx(conn):
        done = apply(conn, key, "send_unknown", actor="w", now=T0 + 1, expected_state="reserving",
                     expected_epoch=claim.epoch, fields={"held_reason": "timeout", "last_error": "no reply"})
    assert done.ok and done.job is not None
    job = done.job
    assert (job.state, job.held_reason, job.held_at, job.lease_owner, job.lease_until) == (
        "held", "timeout", T0 + 1, None, None)
    yield conn, key
    conn.close()


def test_apply_derives_a_release_from_the_table(held: Any) -> None:
    conn, key = held
    before = get_job(conn, key)
    with write_tx(conn):
        done = apply(conn, key, "release", actor="bob", now=T0 + 2, expected_state="held")
    job = done.job
    assert done.ok and job is not None
    assert (job.state, job.epoch, job.attempt) == ("reserving", before.epoch + 1, before.attempt + 1)
    assert (job.handle, job.held_reason, job.last_error, job.send_started_at, job.lease_owner) == (
        None, None, None, None, None)
    bad: list[replay.BadStep] = []
    assert replay.mismatches(conn, bad) == [] and bad == []


@pytest.mark.parametrize(("event", "expected_state", "fields", "says"), [
    ("release", "held", {"attempt": 9}, "cannot set job columns ['attempt']"),
    ("release", "held", {"epoch": 9}, "cannot set job columns ['epoch']"),
    ("reconcile", "held", {}, "needs job columns ['handle']"),
    ("reconcile", "held", {"handle": "h", "held_at": 1.0}, "cannot set job columns ['held_at']"),
    ("completed", "held", {}, "transition not allowed: held --completed-->"),
    ("blocked_new_job", "held", {}, "transition not allowed: held --blocked_new_job-->"),
    ("no_such_event", "held", {}, "transition not allowed: held --no_such_event-->"),
])
def test_apply_refuses_what_the_table_does_not_allow(
    held: Any, event: str, expected_state: str, fields: dict[str, Any], says: str,
) -> None:
    conn, key = held
    before = get_job(conn, key)
    with pytest.raises(ValueError, match=re.escape(says)), write_tx(conn):
        apply(conn, key, event, actor="bob", now=T0 + 2, expected_state=expected_state, fields=fields)
    assert get_job(conn, key) == before
