"""ledger.store.quota on both backends: an operation's daily use and counting one more, on an empty ledger and after
reservations (read back on a fresh connection), within the days asked for and per operation."""

from __future__ import annotations

from pathlib import Path

from ledger_reads import fresh

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import write_tx
from ledger.reservation import reserve
from ledger.store import Connection
from ledger.store import quota as quota_store

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"
DAY = 86_400.0


def test_an_empty_ledger_used_nothing(conn: Connection) -> None:
    assert quota_store.usage(conn, OP, "2026-11-01", "2026-12-31") == {}
    assert quota_store.used(conn, OP, "2026-12-01") == 0


def test_reservations_are_counted_per_day_within_the_span(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    for n in range(3):
        reserve(conn, cfg, OP, {"input": f"n{n}"}, clock=clock, job_id=f"today-{n}")
    clock.advance(DAY)
    reserve(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="tomorrow")
    with fresh(ledger_path) as c:
        assert quota_store.usage(c, OP, "2026-12-01", "2026-12-02") == {"2026-12-01": 3, "2026-12-02": 1}
        assert quota_store.usage(c, OP, "2026-12-02", "2026-12-31") == {"2026-12-02": 1}
        assert quota_store.usage(c, OP, "2026-11-01", "2026-11-30") == {}
        assert quota_store.usage(c, "other.op", "2026-12-01", "2026-12-02") == {}
        assert quota_store.used(c, OP, "2026-12-01") == 3 and quota_store.used(c, OP, "2026-12-02") == 1
        assert quota_store.used(c, OP, "2026-12-03") == 0 and quota_store.used(c, "other.op", "2026-12-01") == 0


def test_counting_adds_one_per_operation_and_day(conn: Connection, ledger_path: Path) -> None:
    with write_tx(conn):
        quota_store.count(conn, OP, "2026-12-05")
        quota_store.count(conn, OP, "2026-12-05")
        quota_store.count(conn, "other.op", "2026-12-05")
    with fresh(ledger_path) as c:
        assert quota_store.used(c, OP, "2026-12-05") == 2 and quota_store.used(c, "other.op", "2026-12-05") == 1
        assert quota_store.usage(c, OP, "2026-12-01", "2026-12-31") == {"2026-12-05": 2}
