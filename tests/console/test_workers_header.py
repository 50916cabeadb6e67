"""The header says whether workers are passing: '1 worker · 1m' over the demo ledger, red 'no worker pass 7m' once
the clock passes policy.worker_silence_seconds, and back to normal when a worker passes again. The heartbeats
are read on the follower's thread, never on the UI thread."""

from __future__ import annotations

import threading

import pytest
from console_demo import Demo
from console_helpers import screen_text, wait_loaded, wait_until
from textual.color import Color
from textual.widgets import Label

from console.app import make_app
from console.screens.overview import OverviewScreen
from console.widgets.ledger_header import LedgerHeader
from ledger import Ledger
from ledger.db import connect
from ledger.heartbeat import WorkerBeat
from ledger.status import LiveFigures

pytestmark = pytest.mark.anyio


async def test_the_header_shows_the_workers_and_their_silence(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[str] = []
    read = Ledger.live_figures

    def recording(self: Ledger) -> LiveFigures:
        readers.append(threading.current_thread().name)
        return read(self)

    monkeypatch.setattr(Ledger, "live_figures", recording)
    app = make_app(demo.ledger, demo.config, "carol", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        label = app.screen.query_one(LedgerHeader).query_one("#hdr-workers", Label)
        await wait_until(pilot, lambda: str(label.render()) == "1 worker · 1m", timeout=5.0, what="the worker line")
        assert not label.has_class("-silent") and "1 worker · 1m" in screen_text(app)
        assert label.tooltip == "1 worker, last pass 1 min ago"

        demo.clock.advance(400)  # 475 s since worker-1's last pass: past the 300 s threshold
        await wait_until(pilot, lambda: label.has_class("-silent"), timeout=5.0, what="the silent state")
        assert str(label.render()) == "no worker pass 7m"
        await wait_until(pilot, lambda: "no worker pass 7m" in screen_text(app), timeout=5.0, what="drawn")
        assert label.styles.background == Color.parse(app.get_css_variables()["error"])  # in the error colour
        assert str(label.tooltip).startswith("no worker pass for 7 min")

        conn = connect(demo.ledger)  # another worker passes (written by another connection)
        try:
            beat = WorkerBeat(conn, demo.clock, "worker-2", kind="worker", interval=1.0)
            assert beat.pass_started()
        finally:
            conn.close()
        await wait_until(pilot, lambda: not label.has_class("-silent"), timeout=5.0, what="the pass noticed")
        assert str(label.render()) == "1 worker · 0s"
    assert readers and threading.main_thread().name not in readers
