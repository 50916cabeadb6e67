"""ledger.store.remote_pauses on both backends: a remote paused, its pause extended, read and lifted, on an empty
ledger and after writes read back on a fresh connection, in the order the remotes were paused."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_reads import fresh

from ledger.db import write_tx
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import remote_pauses as pauses_store
from ledger.store.remote_pauses import RemotePause

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z
OP = "article.generate"


def test_an_empty_ledger_pauses_no_remote(conn: Connection) -> None:
    assert pauses_store.paused_remotes(conn) == {}
    assert not pauses_store.is_paused(conn, "gemini")
    with write_tx(conn):
        assert pauses_store.unpause(conn, "gemini") is None


def test_a_pause_is_kept_extended_and_lifted(conn: Connection, ledger_path: Path) -> None:
    with write_tx(conn):
        assert pauses_store.pause(conn, "gemini", JobKey("j1", OP), reason="bad key", error="401", now=T,
                                   probe_at=T + 60) == 1
    with write_tx(conn):
        assert pauses_store.pause(conn, "gemini", JobKey("j2", OP), reason="other", error="403", now=T + 30,
                                  probe_at=T + 90) == 2
    expected = RemotePause(remote="gemini", paused_at=T, reason="bad key", error="403", job=JobKey("j1", OP),
                           probe_at=T + 90, refusals=2)
    with fresh(ledger_path) as c:
        assert pauses_store.paused_remotes(c) == {"gemini": expected}  # since, why and the job that met it stay
        assert pauses_store.is_paused(c, "gemini") and not pauses_store.is_paused(c, "other")
    with write_tx(conn):
        assert pauses_store.unpause(conn, "gemini") == expected
        assert pauses_store.unpause(conn, "gemini") is None
    with fresh(ledger_path) as c:
        assert pauses_store.paused_remotes(c) == {}
        assert not pauses_store.is_paused(c, "gemini")


def test_remotes_are_listed_in_the_order_they_were_paused(conn: Connection, ledger_path: Path) -> None:
    with write_tx(conn):
        for remote, at in (("store", T + 5), ("gemini", T + 5), ("notify", T)):
            pauses_store.pause(conn, remote, JobKey("j", OP), reason="r", error=None, now=at, probe_at=at + 60)
    with fresh(ledger_path) as c:
        assert list(pauses_store.paused_remotes(c)) == ["notify", "gemini", "store"]


def test_a_pause_is_part_of_the_callers_transaction(conn: Connection, ledger_path: Path) -> None:
    with pytest.raises(RuntimeError), write_tx(conn):
        pauses_store.pause(conn, "gemini", JobKey("j1", OP), reason="bad key", error=None, now=T, probe_at=T + 60)
        raise RuntimeError("the caller fails")
    with fresh(ledger_path) as c:
        assert pauses_store.paused_remotes(c) == {}
