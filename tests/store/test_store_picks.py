"""ledger.store.picks on both backends: the due jobs (after a cursor, oldest first, within a limit, passing another
worker's live pick by), writing picks (another's live pick kept), renewing and giving them back, a pick read and
dropped; on an empty ledger and after writes (read back on a fresh connection)."""

from __future__ import annotations

from pathlib import Path

from ledger_reads import fresh, held_picks

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import write_tx
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.store import Connection
from ledger.store import picks as picks_store

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"
START = (float("-inf"), "", "")


def _reserve(conn: Connection, cfg: Config, clock: ManualClock, *names: str) -> list[JobKey]:
    keys = []
    for name in names:
        clock.advance(1)
        res = reserve(conn, cfg, OP, {"input": name}, clock=clock, job_id=name)
        assert res.outcome == "reserved"
        keys.append(res.key)
    return keys


def test_an_empty_ledger_has_nothing_due_and_no_picks(conn: Connection, clock: ManualClock) -> None:
    now = clock.now()
    assert not picks_store.any_due(conn, owner="w1", now=now, after=START)
    with write_tx(conn):
        assert picks_store.due_batch(conn, owner="w1", now=now, after=START, limit=10) == []
        assert picks_store.pick(conn, [], "w1", until=now + 10, now=now) == set()
        assert picks_store.renew(conn, "w1", until=now + 10) == 0
        assert picks_store.release(conn, "w1", now=now) == 0
        assert not picks_store.picked_by_other(conn, JobKey("none", OP), "w1", now)
        picks_store.drop(conn, JobKey("none", OP))
    assert held_picks(conn) == []


def test_due_jobs_oldest_first_after_a_cursor_within_a_limit(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    keys = _reserve(conn, cfg, clock, "a", "b", "c")
    now = clock.now()
    with fresh(ledger_path) as c:
        assert picks_store.any_due(c, owner="w1", now=now, after=START)
        with write_tx(c):
            batch = picks_store.due_batch(c, owner="w1", now=now, after=START, limit=2)
            assert [j.key for j in batch] == keys[:2]
            after = (batch[-1].created_at, batch[-1].job_id, batch[-1].operation)
            assert [j.key for j in picks_store.due_batch(c, owner="w1", now=now, after=after, limit=10)] == keys[2:]
        last = (batch[-1].created_at + 1, "c", OP)
        assert not picks_store.any_due(c, owner="w1", now=now, after=last)


def test_picks_written_renewed_given_back_and_another_workers_live_pick_kept(
    conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    a, b, c3 = _reserve(conn, cfg, clock, "a", "b", "c")
    now = clock.now()
    with write_tx(conn):
        assert picks_store.pick(conn, [a, b], "w1", until=now + 10, now=now) == {a, b}
    with fresh(ledger_path) as c:
        assert held_picks(c) == [(a, "w1", now + 10), (b, "w1", now + 10)]
        assert picks_store.picked_by_other(c, a, "w2", now)
        assert not picks_store.picked_by_other(c, a, "w1", now)
        assert not picks_store.picked_by_other(c, a, "w2", now + 10)  # lapsed then
        # another worker's due jobs pass the live picks by, until they lapse
        with write_tx(c):
            assert [j.key for j in picks_store.due_batch(c, owner="w2", now=now, after=START, limit=10)] == [c3]
            assert [j.key for j in picks_store.due_batch(c, owner="w1", now=now, after=START, limit=10)] == [a, b, c3]
            assert len(picks_store.due_batch(c, owner="w2", now=now + 10, after=START, limit=10)) == 3
            # w2 cannot take w1's live pick; it takes the free one
            assert picks_store.pick(c, [a, c3], "w2", until=now + 20, now=now) == {c3}
    with fresh(ledger_path) as c:
        assert held_picks(c) == [(a, "w1", now + 10), (b, "w1", now + 10), (c3, "w2", now + 20)]
        with write_tx(c):
            assert picks_store.renew(c, "w1", until=now + 30) == 2
        assert held_picks(c, "w1") == [(a, "w1", now + 30), (b, "w1", now + 30)]
        with write_tx(c):  # once lapsed, w2 may take w1's pick over
            assert picks_store.pick(c, [a], "w2", until=now + 50, now=now + 30) == {a}
            picks_store.drop(c, b)
        assert held_picks(c) == [(a, "w2", now + 50), (c3, "w2", now + 20)]
        with write_tx(c):  # w1 gives back nothing left; c3's pick has lapsed by now + 25 and goes too
            assert picks_store.release(c, "w1", now=now + 25) == 0
        assert held_picks(c) == [(a, "w2", now + 50)]
        with write_tx(c):
            assert picks_store.release(c, "w2", now=now + 25) == 1
    with fresh(ledger_path) as c:
        assert held_picks(c) == []
