"""Orphan evidence: a signed delivery that names no job here is listed with its id, not lost (key `v`)."""

from __future__ import annotations

import pytest
from console_helpers import wait_loaded, wait_until, widget_text

from console.app import make_app
from console.fixtures import Demo
from console.screens.evidence import EvidenceScreen
from console.screens.overview import OverviewScreen
from ledger import evidence
from ledger.db import connect, write_tx

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_orphan_evidence_is_listed_with_what_the_remote_said(demo: Demo) -> None:
    conn = connect(demo.ledger)
    try:
        with write_tx(conn):
            evidence.record(conn, at=demo.clock.now(), source="webhook", idem_key="e" * 32, attempt=2,
                            handle="v1_orphan[red]x[/red]", remote_state="completed", job=None, ref="msg_orphan")
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "alice", clock=demo.clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await pilot.press("v")
        await wait_loaded(pilot, EvidenceScreen)
        await wait_until(pilot, lambda: "v1_orphan" in widget_text(app), what="the orphan row")
        text = widget_text(app)
        assert "evidence:" in text and "completed" in text and "awaiting attribution" in text
        assert "v1_orphan[red]x[/red]" in text  # shown literally, never as markup
