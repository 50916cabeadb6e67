"""ledger.store.verify on both backends: the reads `reclaim verify` makes (the chain, the jobs' sealed columns, the
counter tables and what they count, the side chains, webhooks without a delivery row), on an empty ledger and after
sends (read back on a fresh connection), in order, inside one snapshot."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from ledger_reads import fresh

from ledger import seal
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import write_tx
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store import verify as verify_store
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


def test_an_empty_ledger_reads_empty(conn: Connection) -> None:
    with verify_store.snapshot(conn):
        assert list(verify_store.chain(conn)) == []
        assert verify_store.job_count(conn) == 0
        assert list(verify_store.jobs_checked(conn)) == []
        assert list(verify_store.job_events(conn)) == []
        assert verify_store.event_count(conn) == 0
        assert verify_store.nth_event(conn, 1) is None
        assert verify_store.outbox_present(conn, ["evt-1-x"]) == set() and verify_store.outbox_present(conn, []) == set()
        assert verify_store.handled_present(conn, [1]) == set() and verify_store.handled_present(conn, []) == set()
        assert verify_store.quota_table(conn) == {}
        assert verify_store.jobs_counted(conn) == {}
        assert all(n == 0 for n in verify_store.job_counters(conn).values())
        assert verify_store.event_tallies_kept(conn) == verify_store.event_tallies_counted(conn) == {}
        assert verify_store.last_passes(conn) == {}
        assert list(verify_store.side_chain(conn, "evidence")) == []
        assert list(verify_store.side_chain(conn, "fenced_writes")) == []
        assert verify_store.webhook_without_delivery(conn) is None
    assert not conn.in_transaction
    with pytest.raises(KeyError):
        list(verify_store.side_chain(conn, "jobs"))


def test_after_sends_every_read_agrees_with_the_named_reads(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    for job_id in ("b", "a"):
        submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    with write_tx(conn):
        jobs_store.record_fenced_write(conn, JobKey("a", OP), at=clock.now(), actor="w", event="failed", epoch=0,
                                       detail={})
    with fresh(ledger_path) as c:
        with verify_store.snapshot(c):
            links = [verify_store.ChainLink(*row) for row in verify_store.chain(c)]
            every = events_store.events_after(c, 0, limit=1000)
            assert [(link.id, link.job_id, link.seq, link.kind, link.hash) for link in links] == [
                (e.id, e.job_id, e.seq, e.kind, e.hash) for e in every]
            assert links[0].prev_hash is None and all(
                n.prev_hash == p.hash for p, n in itertools.pairwise(links))
            assert all(link.seal is not None for link in links)
            assert verify_store.job_count(c) == 2
            rows = list(verify_store.jobs_checked(c))
            assert [r[:3] for r in rows] == [("a", OP, "submitted"), ("b", OP, "submitted")]
            assert all(len(r) == 5 + len(seal.ROW_COLUMNS) for r in rows)
            assert verify_store.job_checked(c, "a", OP) == tuple(rows[0]) and verify_store.job_checked(c, "c", OP) is None
            day = rows[0][5 + seal.ROW_COLUMNS.index("quota_day")]
            steps = list(verify_store.job_events(c))  # by job, then seq: what the per-job pass merges with the rows
            assert [(s[1], s[3]) for s in steps] == sorted((e.job_id, e.seq) for e in every)
            assert verify_store.job_events_of(c, "b", OP) == [tuple(s) for s in steps if s[1] == "b"]
            assert verify_store.job_events_of(c, "c", OP) == []
            assert verify_store.event_count(c) == len(links)
            assert verify_store.nth_event(c, 1) == (links[0].id, links[0].hash, links[0].at, links[0].seal)
            assert verify_store.nth_event(c, len(links))[:2] == (links[-1].id, links[-1].hash)
            assert verify_store.nth_event(c, len(links) + 1) is None
            with pytest.raises(ValueError, match="starts at 1"):
                verify_store.nth_event(c, 0)
            assert verify_store.policy_through(c, links[-1].id) == []
            reserves = list(verify_store.quota_events_from(c, 0.0))
            assert [(q[2], q[3]) for q in reserves] == [(OP, "reserve"), (OP, "reserve")]
            assert verify_store.quota_table(c) == {(OP, day): 2}
            assert verify_store.jobs_counted(c) == {(OP, "submitted"): 2}
            assert {k: n for k, n in verify_store.job_counters(c).items() if n} == {(OP, "submitted"): 2}
            tallies = verify_store.event_tallies_kept(c)
            assert tallies == verify_store.event_tallies_counted(c)
            assert sum(n for n, _, _ in tallies.values()) == len(links)
            assert sum(n for (_, kind, *_), (n, _, _) in tallies.items() if kind == "reserve") == 2
            fenced = list(verify_store.side_chain(c, "fenced_writes"))
            assert [(r[0], r[2], r[-2]) for r in fenced] == [(1, "a", None)]
            assert verify_store.webhook_without_delivery(c) is None
        assert not c.in_transaction
