"""A SQLite ledger's connection raises the ledger's own errors, never sqlite3's: the rules and the console
handle one small tree (locked, conflict, unavailable, corrupt, unusable) whatever the backend. A defect (a
statement with the wrong bindings) stays the driver's error, so it is not mistaken for a ledger's state.
PostgreSQL's mapping is checked in test_postgres_without_a_server.py and against a server in tests/system."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.db import connect, write_tx
from ledger.errors import LedgerConflict, LedgerError, LedgerLocked, LedgerUnavailable, LedgerUnusable


def test_a_trigger_refusal_is_a_conflict_named_after_the_ledger_and_writes_nothing(ledger_path: Path) -> None:
    conn = connect(ledger_path)
    try:
        before = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        with pytest.raises(LedgerConflict, match="does not chain") as refused:
            with write_tx(conn):
                conn.execute(
                    "INSERT INTO events (at, job_id, operation, seq, actor, kind, detail, prev_hash, hash) "
                    "VALUES (1, 'j9', 'op', 1, 'mallory', 'note', '{}', ?, ?)", ("1" * 64, "0" * 64))
        assert str(ledger_path) in str(refused.value) and "\n" not in str(refused.value)
        assert not conn.in_transaction
    finally:
        conn.close()
    fresh = connect(ledger_path, readonly=True)
    try:
        assert fresh.execute("SELECT COUNT(*) FROM events").fetchone()[0] == before
    finally:
        fresh.close()


def test_a_write_lock_held_past_the_wait_is_locked(ledger_path: Path) -> None:
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    conn = connect(ledger_path)
    try:
        with pytest.raises(LedgerLocked, match="locked by another process"):
            with write_tx(conn, wait=0.05):
                conn.execute("DELETE FROM worker_heartbeats")
        assert not conn.in_transaction
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        conn.close()


def test_a_closed_connection_is_unavailable_and_closing_twice_is_harmless(ledger_path: Path) -> None:
    conn = connect(ledger_path)
    conn.close()
    with pytest.raises(LedgerUnavailable, match="closed"):
        conn.execute("SELECT 1")
    conn.close()


def test_a_read_only_ledger_refuses_a_write_as_unusable(ledger_path: Path) -> None:
    conn = connect(ledger_path, readonly=True)
    try:
        with pytest.raises(LedgerUnusable, match=r"read-only|readonly"):
            conn.execute("DELETE FROM worker_heartbeats")
    finally:
        conn.close()


def test_rows_read_while_stepping_raise_the_ledgers_own_errors(ledger_path: Path) -> None:
    """Stepping a cursor (iteration, fetchone, fetchall) goes through the same mapping as execute."""
    conn = connect(ledger_path)
    try:
        cur = conn.execute("SELECT id FROM events ORDER BY id")
        conn.close()
        with pytest.raises(LedgerError):
            cur.fetchall()
    finally:
        conn.close()


def test_a_defect_stays_the_drivers_error(ledger_path: Path) -> None:
    conn = connect(ledger_path)
    try:
        with pytest.raises(sqlite3.ProgrammingError, match="bindings"):
            conn.execute("SELECT ?, ?", (1,))
    finally:
        conn.close()
