"""The overview shows how the system copes: holds begun and ended per hour over the last 24 hours, ended by reclaim
(the remote's evidence) or by a person, the time to decision, as figures and sparklines; its resolved tile counts
every hold ended (those the evidence ended too); its footer shows the Report key. The ledger is built with known
holds and endings, and every figure is checked against what a fresh connection reads from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import screen_text, wait_loaded, wait_until
from hold_builder import HoldBuilder
from ledger_reads import fresh

from console.app import make_app
from console.screens.overview import OverviewScreen
from console.screens.report import ReportScreen
from console.widgets.coping_panel import took
from console.widgets.group_counts import GroupCounts
from console.widgets.key_footer import KeyFooter
from ledger.clock import ManualClock, parse_time
from ledger.config import Config
from ledger.coping import read_coping
from ledger.queries import group_counts
from ledger.store import Connection

pytestmark = pytest.mark.anyio
NOW = parse_time("2026-12-02T12:00:00Z")


def ago(hours: float) -> float:
    return NOW - hours * 3600


def build(conn: Connection, cfg: Config, clock: ManualClock) -> HoldBuilder:
    """Three holds ended on the remote's evidence (one begun before the window), two by a person (one before the
    window), one still held."""
    b = HoldBuilder(conn, cfg, clock)
    e = b.held("E", ago(30))
    old = b.held("OLD", ago(30) + 10)
    b.rejected(e, ago(29))
    b.by_evidence(old, ago(23.5))
    a = b.held("A", ago(10))
    b.by_evidence(a, ago(10) + 2)
    bb = b.held("B", ago(10) + 60)
    b.remediated(bb, ago(8))
    c = b.held("C", ago(3))
    b.by_evidence(c, ago(3) + 90)
    b.held("D", ago(2))
    clock.set(NOW)
    return b


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_overview_shows_how_the_system_copes(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path, size: tuple[int, int],
) -> None:
    b = build(conn, cfg, clock)
    with fresh(ledger_path) as other:  # the expected figures, from a fresh connection
        expected = read_coping(other, NOW)
        groups = group_counts(other)
    assert sum(expected.by_reclaim) == 3 and sum(expected.by_person) == 1 and sum(expected.begun) == 4
    assert expected.resolved_by_reclaim == 3 and groups["resolved"] == 2  # rejected + remediated jobs only
    app = make_app(ledger_path, cfg, "carol", clock=clock)
    async with app.run_test(size=size) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        screen = app.screen
        text = " ".join(screen_text(app).split())
        begun, reclaim, person = sum(expected.begun), sum(expected.by_reclaim), sum(expected.by_person)
        t = expected.time_to_decision
        assert (took(t.p50), took(t.p90)) == ("1m 30s", "6h 29m")  # 90 s and 23,390 s (OLD, held before the window)
        if size == (80, 24):  # one line: the window, each count with its sparkline, p50 / p90
            assert f"24 h: {begun} begun" in text and f"{reclaim} by reclaim" in text
            assert f"{person} by a person" in text and f"p50 {took(t.p50)} p90 {took(t.p90)}" in text
        else:
            assert "How the system copes — last 24 h" in text
            assert f"{begun} begun · {reclaim + person} ended: {reclaim} by reclaim, {person} by a person" in text
            assert f"time to decision p50 {took(t.p50)} · p90 {took(t.p90)}" in text
        sparks = {s.id: list(s.data or []) for s in screen.query("CopingPanel Sparkline").results()}
        assert sparks == {"coping-begun": expected.begun, "coping-reclaim": expected.by_reclaim,
                          "coping-person": expected.by_person}
        # The resolved tile counts every hold ended, the three the evidence ended with them.
        tiles = screen.query_one(GroupCounts)
        assert tiles.count_of("resolved") == expected.resolved == 5
        assert f"{expected.resolved} resolved" in text
        shown = {(k[0], k[2]) for k in screen.query_one(KeyFooter).shown_keys()}
        assert ("R", "Report") in shown and "R Report" in text

        # A hold the evidence ends now: the figures and the tile follow the ledger.
        b.by_evidence(b.held("F", NOW - 30), NOW - 5)
        clock.set(NOW)  # the app reads on the same clock
        with fresh(ledger_path) as other:
            after = read_coping(other, NOW)
        assert after.resolved == 6 and sum(after.by_reclaim) == 4
        await wait_until(pilot, lambda: tiles.count_of("resolved") == after.resolved, 10.0, "the tile to count F")
        await wait_until(pilot, lambda: list(screen.query_one("#coping-reclaim").data or []) == after.by_reclaim,
                         10.0, "the sparkline to count F")

        await pilot.press("R")
        await wait_loaded(pilot, ReportScreen)
