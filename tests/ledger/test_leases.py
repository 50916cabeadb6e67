"""Lease arithmetic (edges and a hypothesis property) and the claim that fences out a second sender."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.leases import claim_for_send, claim_stale, lease_deadline, send_is_stale
from ledger.model import Job, JobKey
from ledger.reservation import reserve

OP = "article.generate"
NOW = 1_796_126_400.0  # 2026-12-01T12:00:00Z


def _job(**changes: Any) -> Job:
    base = Job(
        job_id="j", operation=OP, idem_key="k", target=None, payload={"input": "x"}, state="reserving", attempt=1,
        epoch=1, lease_owner="w", lease_until=NOW + 60, handle=None, quota_day="2026-12-01", created_at=NOW,
        updated_at=NOW, next_try_at=None, send_started_at=NOW, tries=1, last_error=None, held_reason=None,
        held_at=None, owner=None, due_at=None, result=None, result_at=None,
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("seconds", [0, 0.0, -1, -0.001, float("nan")])
def test_lease_deadline_refuses_a_non_positive_length(seconds: float) -> None:
    with pytest.raises(ValueError, match="lease length"):
        lease_deadline(NOW, seconds)


def test_lease_deadline_adds_the_length() -> None:
    assert lease_deadline(NOW, 60) == NOW + 60


def _expired(until: float | None, now: float) -> bool:
    """Whether a begun send's lease ended by `now`, as send_is_stale judges it (no stale window, no margin)."""
    return send_is_stale(_job(send_started_at=min(NOW, now), lease_until=until), now, 0)


def test_lease_expiry_is_inclusive() -> None:
    until = NOW + 60
    assert _expired(until, until) is True
    assert _expired(until, until - 0.001) is False
    assert _expired(until, until + 0.001) is True
    assert _expired(None, NOW) is True  # no lease held


def test_a_send_is_stale_only_after_its_lease_and_the_stale_window() -> None:
    job = _job()  # send began at NOW, lease until NOW + 60
    assert send_is_stale(job, NOW + 59, 30) is False  # lease still held
    assert send_is_stale(job, NOW + 60, 120) is False  # lease out, window not passed
    assert send_is_stale(job, NOW + 120, 120) is True  # window is inclusive too
    assert send_is_stale(_job(send_started_at=None), NOW + 10_000, 0) is False  # never began
    assert send_is_stale(_job(state="held"), NOW + 10_000, 0) is False


def test_a_clock_stepped_back_never_makes_a_send_stale() -> None:
    job = _job(lease_until=None)  # even with no lease at all
    assert send_is_stale(job, NOW - 1, 0) is False
    assert send_is_stale(job, NOW - 86_400, 0) is False


@given(
    now=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    seconds=st.floats(min_value=0.001, max_value=86_400, allow_nan=False),
    later=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)
def test_property_a_lease_holds_until_its_deadline_and_not_after(now: float, seconds: float, later: float) -> None:
    until = lease_deadline(now, seconds)
    assert until > now
    assert _expired(until, now) is False
    t = now + later
    assert _expired(until, t) is (t >= until)
    # Once expired, it stays expired as time moves forward.
    if _expired(until, t):
        assert _expired(until, t + abs(later) + 1)


@given(
    started=st.floats(min_value=1e9, max_value=4e9, allow_nan=False),
    back=st.floats(min_value=1e-3, max_value=1e7, allow_nan=False),
    stale_after=st.floats(min_value=0, max_value=1e5, allow_nan=False),
    lease=st.one_of(st.none(), st.floats(min_value=0, max_value=5e9, allow_nan=False)),
)
def test_property_a_clock_before_the_send_began_is_never_stale(
    started: float, back: float, stale_after: float, lease: float | None
) -> None:
    now = started - back
    assert math.isfinite(now) and now < started
    assert send_is_stale(_job(send_started_at=started, lease_until=lease), now, stale_after) is False


def test_claiming_twice_the_second_gets_nothing(
    conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, fingerprint: Callable[[Path], str],
    read_job: Callable[..., Any],
) -> None:
    key = JobKey("claim-me", OP)
    assert reserve(conn, cfg, OP, {"input": "x"}, clock=clock, job_id=key.job_id).outcome == "reserved"
    first = claim_for_send(conn, cfg, key, owner="A", now=clock.now())
    assert first is not None and first.epoch == 1 and first.owner == "A"
    before = fingerprint(ledger_path)
    assert claim_for_send(conn, cfg, key, owner="B", now=clock.now()) is None
    assert fingerprint(ledger_path) == before
    # Even after the lease ran out, a begun send is never claimed again for sending: only recovery takes it.
    clock.advance(cfg.policy.lease_seconds + 1)
    assert claim_for_send(conn, cfg, key, owner="B", now=clock.now()) is None
    assert claim_stale(conn, cfg, key, owner="B", now=clock.now()) is None  # stale window not passed yet
    assert fingerprint(ledger_path) == before
    clock.advance(cfg.policy.stale_reserving_seconds)
    taken = claim_stale(conn, cfg, key, owner="B", now=clock.now())
    assert taken is not None and taken.epoch == 2
    job = read_job(ledger_path, key.job_id)
    assert (job.epoch, job.lease_owner) == (2, "B")
