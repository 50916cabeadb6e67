"""ledger.store.views on both backends: an operator's views saved, replaced, listed and deleted, on an empty ledger
and after writes read back on a fresh connection, by name and one operator's apart from another's."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledger_reads import fresh

from ledger.db import write_tx
from ledger.store import Connection
from ledger.store import views as views_store
from ledger.store.views import SavedView

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z


def _save(conn: Connection, *views: SavedView) -> None:
    with write_tx(conn):
        for view in views:
            views_store.save(conn, view)


def test_an_empty_ledger_has_no_views(conn: Connection) -> None:
    assert views_store.list_views(conn, "alice") == []
    with write_tx(conn):
        assert views_store.delete(conn, "alice", "mine") is False


def test_views_are_listed_by_name_per_operator(conn: Connection, ledger_path: Path) -> None:
    mine = SavedView("alice", "mine", "held", "owner:me", T)
    batch = SavedView("alice", "Batch", "failed", "op:article.*", T + 1)
    other = SavedView("bob", "mine", "done", "", T + 2)
    _save(conn, mine, batch, other)
    with fresh(ledger_path) as c:
        assert views_store.list_views(c, "alice") == [batch, mine]  # by name, byte order: capitals first
        assert views_store.list_views(c, "bob") == [other]
        assert views_store.list_views(c, "carol") == []


def test_a_view_saved_again_under_its_name_is_replaced(conn: Connection, ledger_path: Path) -> None:
    _save(conn, SavedView("alice", "mine", "held", "owner:me", T))
    again = SavedView("alice", "mine", "failed", "reason:timeout", T + 60)
    _save(conn, again)
    with fresh(ledger_path) as c:
        assert views_store.list_views(c, "alice") == [again]


def test_a_view_is_deleted_once_and_only_its_operators(conn: Connection, ledger_path: Path) -> None:
    _save(conn, SavedView("alice", "mine", "held", "", T), SavedView("bob", "mine", "held", "", T))
    with write_tx(conn):
        assert views_store.delete(conn, "alice", "mine") is True
        assert views_store.delete(conn, "alice", "mine") is False
    with fresh(ledger_path) as c:
        assert views_store.list_views(c, "alice") == []
        assert [v.operator for v in views_store.list_views(c, "bob")] == ["bob"]


def test_a_save_is_part_of_the_callers_transaction(conn: Connection, ledger_path: Path) -> None:
    with pytest.raises(RuntimeError), write_tx(conn):
        views_store.save(conn, SavedView("alice", "mine", "held", "", T))
        raise RuntimeError("the caller fails")
    with fresh(ledger_path) as c:
        assert views_store.list_views(c, "alice") == []
