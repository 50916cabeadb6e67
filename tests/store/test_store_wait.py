"""ledger.store.wait_for_change on both backends: a wait given the change token taken before a read returns as soon
as another connection has committed since, even when the commit came before the wait began; a wake ends it.

On PostgreSQL the token is the server's snapshot, which any commit on the server moves (other databases' too),
so "nothing changed" is asserted on SQLite only."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ledger_reads import fresh

from ledger import store
from ledger.db import write_tx
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import remote_pauses as pauses_store

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z
OP = "article.generate"
LONG = 30.0
"""A wait that only a seen commit (or a wake) ends early: far longer than any of these tests takes."""


def _commit_elsewhere(ledger: Path, remote: str) -> None:
    with fresh(ledger) as other, write_tx(other):
        pauses_store.pause(other, remote, JobKey("j1", OP), reason="test", error=None, now=T, probe_at=T + 60)


def test_a_commit_made_after_the_token_ends_the_wait_even_before_it_began(conn: Connection, ledger_path: Path) -> None:
    token = store.change_token(conn)
    _commit_elsewhere(ledger_path, "gemini")
    started = time.monotonic()
    assert store.wait_for_change(conn, LONG, since=token)
    assert time.monotonic() - started < LONG / 2


def test_a_commit_during_the_wait_ends_it(conn: Connection, ledger_path: Path) -> None:
    token = store.change_token(conn)
    writer = threading.Thread(target=_commit_elsewhere, args=(ledger_path, "gemini"))
    started = time.monotonic()
    writer.start()
    try:
        assert store.wait_for_change(conn, LONG, since=token)
    finally:
        writer.join(timeout=LONG)
    assert time.monotonic() - started < LONG / 2


def test_a_wake_ends_the_wait_and_without_a_commit_the_time_runs_out(conn: Connection) -> None:
    token = store.change_token(conn)
    wake = threading.Event()
    wake.set()
    started = time.monotonic()
    woken = store.wait_for_change(conn, LONG, wake, since=token)
    assert time.monotonic() - started < LONG / 2
    if not conn.NOTIFIES:  # PostgreSQL's token moves with any commit on the server
        assert not woken
        assert not store.wait_for_change(conn, 0.2, since=token)  # nothing committed: the time runs out


def test_with_no_connection_it_only_waits() -> None:
    wake = threading.Event()
    wake.set()
    assert not store.wait_for_change(None, LONG, wake)
    assert not store.wait_for_change(None, 0.05)
