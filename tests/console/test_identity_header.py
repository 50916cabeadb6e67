"""The console's header says who is at the keys and how that is known, and shows the audit chain's head."""

from __future__ import annotations

import dataclasses

import pytest
from console_demo import Demo
from console_helpers import wait_loaded
from textual.widgets import Label

from console.app import make_app
from ledger.db import connect
from ledger.identity import Identity

pytestmark = pytest.mark.anyio


async def test_a_declared_identity_is_marked_not_verified_and_the_head_hash_is_shown(demo: Demo) -> None:
    conn = connect(demo.ledger, readonly=True)
    try:
        head = conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    app = make_app(demo.ledger, demo.config, "bob", clock=demo.clock)  # the demo config declares names
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_loaded(pilot)
        header = app.screen.query_one("LedgerHeader")
        assert str(header.query_one("#hdr-identity", Label).render()) == "identity: declared, not verified"
        assert f"head {head[:8]}" in str(header.query_one("#hdr-live", Label).render())


@pytest.mark.slow
async def test_an_os_identity_carries_no_warning(demo: Demo) -> None:
    config = dataclasses.replace(demo.config, identity_source="os")
    app = make_app(demo.ledger, config, Identity("bob", "os"), clock=demo.clock)
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_loaded(pilot)
        header = app.screen.query_one("LedgerHeader")
        assert not header.query("#hdr-identity")
        assert "bob" in str(header.query_one("#hdr-operator", Label).render())
