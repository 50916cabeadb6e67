"""ledger.store.events on both backends: the append (each job's next seq, chained to the head) and the named reads of
the events table (a job's last send start, its events of one kind, its latest of a kind, its triage work and hold, the
duplicates detected, replay's steps) on an empty ledger and after writes (read back on a fresh connection), in order."""

from __future__ import annotations

from pathlib import Path

from ledger_reads import fresh

from ledger import store, triage
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import write_tx
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.transitions import apply
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


def test_an_empty_ledger_has_no_events(conn: Connection) -> None:
    key = JobKey("none", OP)
    assert events_store.last_send_started(conn, key) is None
    assert events_store.of_kind(conn, key, "finding") == []
    assert events_store.duplicate_count(conn) == 0
    assert events_store.hash_of(conn, 1) is None
    assert events_store.job_events(conn, key) == []
    assert events_store.events_after(conn, 0) == []
    assert events_store.latest_events(conn) == []
    assert events_store.last_event_id(conn) == 0
    assert events_store.head(conn) == (0, None)


def test_a_held_jobs_send_start_and_its_events_of_one_kind(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    sim.add_fault("drop_before_accept")
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="held", remotes=RemoteCache(cfg))
    assert res.state == "held"
    started = clock.now()
    clock.advance(10)
    triage.record_finding(conn, cfg, res.key, "not_received", "first look", actor="alice", clock=clock)
    clock.advance(10)
    triage.record_finding(conn, cfg, res.key, "not_received", "second look", actor="bob", clock=clock)
    other = JobKey("other", OP)
    with fresh(ledger_path) as c:
        assert events_store.last_send_started(c, res.key) == started
        assert events_store.last_send_started(c, other) is None
        found = events_store.of_kind(c, res.key, "finding")
        assert [(actor, at, detail["note"]) for actor, at, detail in found] == [
            ("alice", started + 10, "first look"), ("bob", started + 20, "second look")]
        assert events_store.of_kind(c, res.key, "candidate_dismissed") == []
        assert events_store.of_kind(c, other, "finding") == []


def test_duplicates_are_counted_across_jobs(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    keys = [submit_now(conn, cfg, OP, {"input": n}, clock=clock, job_id=n, remotes=RemoteCache(cfg)).key
            for n in ("a", "b")]
    for n, key in enumerate([*keys, keys[0]]):
        with write_tx(conn):
            state = triage.get_job(conn, key).state
            assert apply(conn, key, "duplicate_send", actor="w", now=clock.now(), expected_state=state,
                         detail={"handle": f"interactions/dup-{n}"}).ok
    with fresh(ledger_path) as c:
        assert events_store.duplicate_count(c) == 3


def test_an_events_hash_is_read_by_its_id(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="j1", remotes=RemoteCache(cfg))
    with fresh(ledger_path) as c:
        events = events_store.job_events(c, JobKey("j1", OP))
        assert len(events) >= 2
        for event in events:
            assert event.hash and events_store.hash_of(c, event.id) == event.hash
        assert events_store.hash_of(c, max(e.id for e in events) + 1) is None


def test_events_by_cursor_newest_and_the_head(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    for job_id in ("a", "b", "c"):
        submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    with fresh(ledger_path) as c:
        every = events_store.events_after(c, 0, limit=1000)
        ids = [e.id for e in every]
        assert ids == sorted(ids) and len(ids) >= 6
        assert events_store.last_event_id(c) == ids[-1]
        assert [e.id for e in events_store.events_after(c, ids[1], limit=2)] == ids[2:4]
        assert events_store.events_after(c, ids[-1]) == []
        assert [e.id for e in events_store.latest_events(c, 2)] == [ids[-1], ids[-2]]
        b = events_store.job_events(c, JobKey("b", OP))
        assert [e.seq for e in b] == sorted(e.seq for e in b) and {e.job_id for e in b} == {"b"}
        assert b == [e for e in every if e.job_id == "b"]
        with store.read_snapshot(c):
            assert events_store.head(c) == (len(ids), every[-1].hash)
        assert not c.in_transaction


def test_appended_events_take_each_jobs_next_seq_and_chain_to_the_head(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    a, b = JobKey("a", OP), JobKey("b", OP)
    ids = []
    with write_tx(conn):
        for key, kind in ((a, "finding"), (b, "remote_query"), (a, "remote_query")):
            clock.advance(1)
            ids.append(events_store.append(conn, key, at=clock.now(), actor="alice", kind=kind, from_state=None,
                                           to_state=None, epoch=None, detail={"note": kind}))
    assert ids == sorted(ids) and len(set(ids)) == 3
    with fresh(ledger_path) as c:
        every = events_store.events_after(c, 0)
        assert [(e.id, e.job_id, e.seq, e.kind, e.detail) for e in every] == [
            (ids[0], "a", 1, "finding", {"note": "finding"}), (ids[1], "b", 1, "remote_query", {"note": "remote_query"}),
            (ids[2], "a", 2, "remote_query", {"note": "remote_query"})]
        assert events_store.head(c) == (3, every[-1].hash)
        assert len({e.hash for e in every}) == 3
        assert [e.id for e in events_store.job_events(c, a)] == [ids[0], ids[2]]


def test_an_empty_ledger_has_no_latest_event_triage_work_hold_or_steps(conn: Connection) -> None:
    key = JobKey("none", OP)
    assert events_store.latest_of_kind(conn, key, "finding") is None
    assert events_store.triage_work(conn, key, 0) == []
    assert events_store.hold_detail(conn, key) is None
    assert list(events_store.steps(conn)) == []
    assert events_store.job_steps(conn, key) == []


def test_a_held_jobs_latest_event_of_a_kind_its_triage_work_and_its_hold(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    sim.add_fault("drop_before_accept")
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="held", remotes=RemoteCache(cfg))
    assert res.state == "held"
    for actor in ("alice", "bob"):
        clock.advance(10)
        triage.record_finding(conn, cfg, res.key, "not_received", f"{actor} looked", actor=actor, clock=clock)
    with fresh(ledger_path) as c:
        history = events_store.job_events(c, res.key)
        findings = [e for e in history if e.kind == "finding"]
        assert events_store.latest_of_kind(c, res.key, "finding") == findings[-1]
        assert events_store.latest_of_kind(c, res.key, "finding", findings[-1].id) is None
        assert events_store.latest_of_kind(c, res.key, "finding", findings[0].id - 1) == findings[-1]
        assert events_store.latest_of_kind(c, res.key, "release") is None
        assert events_store.latest_of_kind(c, JobKey("held", "other.op"), "finding") is None
        assert events_store.triage_work(c, res.key, 0) == [("alice", "finding"), ("bob", "finding")]
        assert events_store.triage_work(c, res.key, findings[0].id) == [("bob", "finding")]
        assert events_store.triage_work(c, res.key, findings[-1].id) == []
        hold = [e for e in history if e.to_state == "held" and e.from_state != "held"][-1]
        assert events_store.hold_detail(c, res.key) == hold.detail
        assert events_store.hold_detail(c, JobKey("held", "other.op")) is None


def test_steps_of_every_event_and_of_one_job_in_key_and_seq_order(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    for job_id in ("b", "a"):
        submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    with fresh(ledger_path) as c:
        every = events_store.events_after(c, 0, limit=1000)
        want = sorted(every, key=lambda e: (e.job_id, e.operation, e.seq))
        assert list(events_store.steps(c)) == [
            (e.id, JobKey(e.job_id, e.operation), e.seq, e.kind, e.from_state, e.to_state, e.epoch) for e in want]
        assert events_store.job_steps(c, JobKey("b", OP)) == [
            (e.kind, e.from_state, e.to_state, e.epoch) for e in want if e.job_id == "b"]
        assert events_store.job_steps(c, JobKey("b", "other.op")) == []
