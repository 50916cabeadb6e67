"""ledger.coping on both backends: holds begun and ended per hour over the last 24 hours, by reclaim (the remote's
evidence) or by a person, the time to decision of the holds ended in the window, and every hold ended so far;
built through the ledger's own functions at known times and read back on a fresh connection."""

from __future__ import annotations

from pathlib import Path

import pytest
from hold_builder import HoldBuilder
from ledger_reads import fresh

from ledger.clock import ManualClock, parse_time
from ledger.config import Config
from ledger.coping import HOURS, read_coping
from ledger.errors import BadInput
from ledger.store import Connection

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
NOW = parse_time("2026-12-02T12:00:00Z")


def ago(hours: float) -> float:
    return NOW - hours * 3600


def test_an_empty_ledger_copes_with_nothing(conn: Connection) -> None:
    c = read_coping(conn, NOW)
    assert c.begun == c.by_reclaim == c.by_person == c.ended == [0] * HOURS
    assert c.time_to_decision.count == 0 and c.time_to_decision.p50 is None
    assert (c.resolved_by_reclaim, c.resolved_by_person, c.resolved) == (0, 0, 0)
    assert (c.since, c.until) == (NOW - HOURS * 3600, NOW)


def test_holds_begun_and_ended_per_hour_by_whom_and_how_fast(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    b = HoldBuilder(conn, cfg, clock)
    e = b.held("E", ago(30))
    old = b.held("OLD", ago(30) + 10)
    b.rejected(e, ago(29))  # before the window: counted in the totals only
    b.by_evidence(old, ago(23.5))  # held before the window, ended in its first hour after 6.5 h less 10 s
    a = b.held("A", ago(10))
    b.by_evidence(a, ago(10) + 2)
    bb = b.held("B", ago(10) + 60)
    b.rejected(bb, ago(8))
    c = b.held("C", ago(3))
    b.by_evidence(c, ago(3) + 90)
    b.held("D", ago(2))  # still held
    with fresh(ledger_path) as other:
        got = read_coping(other, NOW)
    begun, by_reclaim, by_person = [0] * HOURS, [0] * HOURS, [0] * HOURS
    begun[14], begun[21], begun[22] = 2, 1, 1
    by_reclaim[0], by_reclaim[14], by_reclaim[21] = 1, 1, 1
    by_person[16] = 1
    assert got.begun == begun
    assert got.by_reclaim == by_reclaim and got.by_person == by_person
    assert got.ended == [r + p for r, p in zip(by_reclaim, by_person, strict=True)]
    # ended in the window after 23390 (OLD), 2 (A), 7140 (B), 90 (C) seconds: nearest-rank p50 90, p90 23390
    t = got.time_to_decision
    assert (t.count, t.p50, t.p90, t.max) == (4, 90.0, 23390.0, 23390.0)
    assert (got.resolved_by_reclaim, got.resolved_by_person, got.resolved) == (3, 2, 5)


def test_a_shorter_window_counts_only_its_hours(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    b = HoldBuilder(conn, cfg, clock)
    a = b.held("A", ago(5))
    b.by_evidence(a, ago(5) + 30)
    x = b.held("X", ago(1.5))
    b.remediated(x, ago(0.25))
    with fresh(ledger_path) as other:
        got = read_coping(other, NOW, hours=2)
    assert got.begun == [1, 0] and got.by_reclaim == [0, 0] and got.by_person == [0, 1]
    assert got.time_to_decision.count == 1 and got.time_to_decision.p50 == 4500.0
    assert got.resolved == 2  # the totals are every hold ended so far, whatever the window


@pytest.mark.sqlite_only
def test_the_windows_reads_are_searches_by_index_never_a_scan_of_the_events(conn: Connection) -> None:
    plans = {}
    for name, params in (("coping.begun", (0.0, "[\"send_unknown\"]", 0.0, 1.0)),
                         ("coping.ended", ("[\"send_unknown\"]", "[\"reconcile\"]", 0.0, 1.0))):
        plans[name] = " | ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {conn.sql(name)}", params))
    assert "SEARCH events USING INDEX events_kind_at (kind=? AND at>? AND at<?)" in plans["coping.begun"]
    assert "SEARCH d USING INDEX events_kind_at (kind=? AND at>? AND at<?)" in plans["coping.ended"]
    assert "SEARCH x USING INDEX events_job_kind (job_id=? AND operation=? AND kind=? AND id<?)" in plans["coping.ended"]
    for plan in plans.values():
        assert "SCAN events" not in plan and "SCAN d" not in plan and "SCAN x" not in plan, plan


@pytest.mark.parametrize("hours", [0, -1, 24 * 14 + 1])
def test_a_window_out_of_range_is_refused(conn: Connection, hours: int) -> None:
    with pytest.raises(BadInput, match="hours"):
        read_coping(conn, NOW, hours=hours)
