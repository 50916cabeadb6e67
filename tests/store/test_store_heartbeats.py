"""ledger.store.heartbeats on both backends: a worker's row written, replaced, pruned and read (the running ones, the
newest, the last pass), on an empty ledger and after writes read back on a fresh connection, in order and within
limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from ledger_reads import fresh

from ledger.db import write_tx
from ledger.store import Connection
from ledger.store import heartbeats as hb_store
from ledger.store.heartbeats import Heartbeat

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z


def _beat(worker_id: str, updated_at: float, *, running: bool = True, last_pass_at: float | None = None) -> Heartbeat:
    return Heartbeat(
        worker_id=worker_id, host="host-a", pid=4242, version="1.0", kind="worker", interval=5.0, started_at=T - 60,
        pass_started_at=last_pass_at, pass_ended_at=None, last_pass_at=last_pass_at, passes=3,
        report={"sent": 1, "polled": 0}, error=None if running else "LedgerLocked: busy", running=running,
        stopped_at=None if running else updated_at, updated_at=updated_at,
    )


def _write(conn: Connection, *beats: Heartbeat) -> None:
    with write_tx(conn):
        for beat in beats:
            hb_store.write(conn, beat)


def test_an_empty_ledger_has_no_heartbeats(conn: Connection) -> None:
    assert hb_store.running(conn) == []
    assert hb_store.newest(conn, 10) == []
    assert hb_store.last_pass_at(conn) is None
    with write_tx(conn):
        assert hb_store.prune(conn, stopped_before=T, silent_before=T) == 0


def test_a_written_row_reads_back_and_is_replaced_by_the_next(conn: Connection, ledger_path: Path) -> None:
    first = _beat("w1", T, last_pass_at=T - 1)
    _write(conn, first)
    with fresh(ledger_path) as c:
        assert hb_store.newest(c, 10) == [first]
        assert hb_store.running(c) == [first]
        assert hb_store.last_pass_at(c) == T - 1
    stopped = replace(_beat("w1", T + 5, running=False, last_pass_at=T + 4), passes=4, report={})
    _write(conn, stopped)
    with fresh(ledger_path) as c:
        assert hb_store.newest(c, 10) == [stopped]  # one row per worker
        assert hb_store.running(c) == []
        assert hb_store.last_pass_at(c) == T + 4


def test_rows_are_read_newest_first_then_by_worker_id(conn: Connection, ledger_path: Path) -> None:
    _write(conn, _beat("w-b", T), _beat("w-a", T), _beat("w-c", T + 10, running=False, last_pass_at=T + 9),
           _beat("w-d", T - 10, last_pass_at=T - 20))
    with fresh(ledger_path) as c:
        assert [h.worker_id for h in hb_store.newest(c, 10)] == ["w-c", "w-a", "w-b", "w-d"]
        assert [h.worker_id for h in hb_store.newest(c, 2)] == ["w-c", "w-a"]
        assert [h.worker_id for h in hb_store.running(c)] == ["w-a", "w-b", "w-d"]
        assert hb_store.last_pass_at(c) == T + 9


def test_running_reads_at_most_a_hundred(conn: Connection) -> None:
    _write(conn, *(_beat(f"w{n:03}", T + n) for n in range(hb_store.RUNNING_LISTED + 5)))
    found = hb_store.running(conn)
    assert len(found) == hb_store.RUNNING_LISTED and found[0].worker_id == f"w{hb_store.RUNNING_LISTED + 4:03}"


def test_prune_deletes_stopped_rows_and_long_silent_ones(conn: Connection, ledger_path: Path) -> None:
    _write(conn, _beat("stopped-old", T - 100, running=False), _beat("stopped-new", T, running=False),
           _beat("silent-old", T - 1000), _beat("silent-new", T - 100))
    with write_tx(conn):
        assert hb_store.prune(conn, stopped_before=T - 50, silent_before=T - 500) == 2
    with fresh(ledger_path) as c:
        assert sorted(h.worker_id for h in hb_store.newest(c, 10)) == ["silent-new", "stopped-new"]


def test_a_write_is_part_of_the_callers_transaction(conn: Connection, ledger_path: Path) -> None:
    with pytest.raises(RuntimeError), write_tx(conn):
        hb_store.write(conn, _beat("w1", T))
        raise RuntimeError("the caller fails")
    with fresh(ledger_path) as c:
        assert hb_store.newest(c, 10) == []


def test_a_heartbeat_says_its_state_at_an_instant() -> None:
    beat = _beat("w1", T)
    assert beat.state(T + 10, 30) == "running" and beat.state(T + 31, 30) == "silent"
    assert _beat("w1", T, running=False).state(T, 30) == "stopped"
    assert beat.to_dict(T, 30)["updated_at"] == "2026-12-01T12:00:00Z"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_statements_name_the_columns_in_their_order(backend: str) -> None:
    from ledger.store import queries

    sql = queries.load(backend)
    written = sql["heartbeats.upsert"].split("(", 1)[1].split(")", 1)[0]
    assert [c.strip() for c in written.split(",")] == list(hb_store.COLUMNS)
    for name in ("heartbeats.running", "heartbeats.newest"):
        read = sql[name].removeprefix("SELECT").split("FROM", 1)[0]
        assert [c.strip() for c in read.split(",")] == list(hb_store.COLUMNS), name
