"""ledger.store.quota on both backends: an operation's daily use, on an empty ledger and after reservations (read back
on a fresh connection), within the days asked for and per operation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect
from ledger.reservation import reserve
from ledger.store import Connection
from ledger.store import quota as quota_store

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"
DAY = 86_400.0


@contextmanager
def fresh(ledger: Path) -> Iterator[Connection]:
    """A new connection to the ledger: what another process would read."""
    c = connect(ledger)
    try:
        yield c
    finally:
        c.close()


def test_an_empty_ledger_used_nothing(conn: Connection) -> None:
    assert quota_store.usage(conn, OP, "2026-11-01", "2026-12-31") == {}


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
