"""ledger.store.jobs on both backends: a new job inserted once, a step's update (only from its expected state and
epoch), the fenced writes' chain; a job found by its key, its handle or its idem key, its state, the first held on a
target, pages of a group (with the typed filter), the held ones, counts per state and operation, every job's state,
epoch and attempt; on an empty ledger and after writes (read back on a fresh connection), in order and within limits."""

from __future__ import annotations

from pathlib import Path

from ledger_reads import fresh

from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import write_tx
from ledger.model import SORTS, STATES, Job, JobFilter, JobKey
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.transitions import apply
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


def test_an_empty_ledger_has_no_job_by_handle(conn: Connection) -> None:
    assert jobs_store.handle_owner(conn, "interactions/x") is None
    assert jobs_store.job_with_handle(conn, "interactions/x") is None
    assert jobs_store.state_of(conn, JobKey("none", OP)) is None
    assert jobs_store.state_and_epoch(conn, JobKey("none", OP)) is None


def test_a_job_is_found_by_its_handle(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="j1", remotes=RemoteCache(cfg))
    assert res.state == "submitted"
    with fresh(ledger_path) as c:
        job = triage.get_job(c, res.key)
        assert job.handle
        assert jobs_store.handle_owner(c, job.handle) == job.key
        assert jobs_store.job_with_handle(c, job.handle) == job
        assert jobs_store.handle_owner(c, job.handle + "-other") is None
        assert jobs_store.job_with_handle(c, job.handle.upper() + "X") is None
        assert jobs_store.state_of(c, job.key) == "submitted"
        assert jobs_store.state_of(c, JobKey("j1", "other.op")) is None
        assert jobs_store.state_and_epoch(c, job.key) == ("submitted", job.epoch)
        assert jobs_store.state_and_epoch(c, JobKey("j1", "other.op")) is None


def test_an_empty_ledger_has_no_jobs_and_zero_counts(conn: Connection) -> None:
    assert jobs_store.find_job(conn, JobKey("none", OP)) is None
    assert jobs_store.operations_of(conn, "none") == []
    assert jobs_store.list_jobs(conn, "held") == [] and jobs_store.list_jobs(conn, "resolved") == []
    assert jobs_store.held_jobs(conn) == []
    assert jobs_store.state_counts(conn) == dict.fromkeys(STATES, 0)
    assert jobs_store.held_by_operation(conn) == {}
    assert jobs_store.operation_counts(conn) == {}
    assert jobs_store.fenced_write_count(conn) == 0
    assert jobs_store.fenced_writes_for(conn, JobKey("none", OP)) == []


def _send(conn: Connection, cfg: Config, clock: ManualClock, job_id: str, target: str | None = None) -> JobKey:
    clock.advance(1)
    return submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, target=target,
                      remotes=RemoteCache(cfg)).key


def test_pages_of_a_group_in_age_order_within_limits(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    keys = [_send(conn, cfg, clock, f"j{n}", target=f"bucket-{n % 2}") for n in range(5)]
    sim.add_fault("drop_before_accept")
    held = _send(conn, cfg, clock, "h1")
    with fresh(ledger_path) as c:
        assert [j.job_id for j in jobs_store.list_jobs(c, "submitted")] == ["j0", "j1", "j2", "j3", "j4"]
        assert [j.job_id for j in jobs_store.list_jobs(c, "submitted", oldest_first=False, limit=2)] == ["j4", "j3"]
        assert [j.job_id for j in jobs_store.list_jobs(c, "submitted", limit=2, offset=2)] == ["j2", "j3"]
        assert [j.job_id for j in jobs_store.list_jobs(c, "submitted", flt=JobFilter(target="bucket-1"))] == [
            "j1", "j3"]
        assert [j.job_id for j in jobs_store.list_jobs(c, "submitted", flt=JobFilter(text="j4"))] == ["j4"]
        assert jobs_store.list_jobs(c, "submitted", flt=JobFilter(operation="other.*")) == []
        assert [j.key for j in jobs_store.held_jobs(c)] == [held]
        assert jobs_store.find_job(c, keys[0]) == triage.get_job(c, keys[0])
        assert jobs_store.operations_of(c, "j0") == [OP]
        counts = jobs_store.state_counts(c)
        assert (counts["submitted"], counts["held"], counts["done"]) == (5, 1, 0)
        assert jobs_store.held_by_operation(c) == {OP: 1}
        assert jobs_store.operation_counts(c) == {OP: {"submitted": 5, "held": 1}}
        assert jobs_store.held_jobs(c, limit=0) == []


def test_the_typed_filter_as_sql_escapes_its_wildcards(conn: Connection) -> None:
    where, params = jobs_store.filter_clause(conn, JobFilter(operation="article.*", text="50%_off", owner="bob"), "j")
    assert where[0].startswith(f"(j.job_id {conn.LIKE} {conn.PARAM} ESCAPE")
    assert params == ["%50\\%\\_off%"] * 5 + ["bob", "article.%"]
    assert jobs_store.filter_clause(conn, JobFilter()) == ([], [])
    stage_where, stage_params = jobs_store.filter_clause(conn, JobFilter(stage="awaiting-my-approval", me="bob"))
    assert len(stage_where) == 3 and stage_params == ["bob"]


def test_the_typed_filter_matches_ascii_case_and_wildcards_literally(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock,
) -> None:
    for jid in ("Sale-50%_off", "sale-50xxoff"):
        submit_now(conn, cfg, OP, {"input": jid}, clock=clock, job_id=jid, remotes=RemoteCache(cfg))
    page = jobs_store.list_jobs(conn, "submitted", flt=JobFilter(text="SALE-50%_OFF"))
    assert [j.key.job_id for j in page] == ["Sale-50%_off"]


def test_a_fenced_write_is_kept_for_its_job(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    key = _send(conn, cfg, clock, "j1")
    job = triage.get_job(conn, key)
    with write_tx(conn):
        assert apply(conn, key, "duplicate_send", actor="stale-worker", now=clock.now(), expected_state=job.state,
                     expected_epoch=job.epoch + 1, detail={"handle": "interactions/x"}).refusal == "fenced"
    with fresh(ledger_path) as c:
        assert jobs_store.fenced_write_count(c) == 1
        (fw,) = jobs_store.fenced_writes_for(c, key)
        assert (fw["actor"], fw["event"], fw["epoch"], fw["detail"]["handle"]) == (
            "stale-worker", "duplicate_send", job.epoch + 1, "interactions/x")
        assert jobs_store.fenced_writes_for(c, JobKey("j2", OP)) == []


def _columns(job_id: str, now: float, **more: object) -> dict[str, object]:
    return {"created_at": now, "idem_key": f"idem-{job_id}", "target": None, "payload": '{"input":"x"}',
            "quota_day": "2026-12-01", "job_id": job_id, "operation": OP, "state": "reserving", "updated_at": now,
            **more}


def test_a_new_job_is_inserted_once_over_the_defaults(conn: Connection, clock: ManualClock, ledger_path: Path) -> None:
    now = clock.now()
    with write_tx(conn):
        assert jobs_store.insert(conn, _columns("j1", now))
        assert not jobs_store.insert(conn, _columns("j1", now + 1, idem_key="other"))  # exists: nothing written
    with fresh(ledger_path) as c:
        job = jobs_store.find_job(c, JobKey("j1", OP))
        assert job is not None
        assert (job.state, job.epoch, job.attempt, job.tries, job.idem_key, job.created_at, job.payload) == (
            "reserving", 0, 1, 0, "idem-j1", now, {"input": "x"})
        assert jobs_store.idem_key_of(c, JobKey("j1", OP)) == "idem-j1"
        assert jobs_store.projections(c) == {JobKey("j1", OP): ("reserving", 0, 1)}


def test_an_update_moves_a_job_in_its_expected_state_and_epoch_only(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    key = JobKey("j1", OP)
    now = clock.now()

    def hold(key: JobKey, epoch: int | None) -> Job | None:
        return jobs_store.update(conn, key, state="held", now=now + 1, changes={"held_reason": "looked",
                                 "held_at": now + 1}, bump_epoch=True, bump_attempt=False,
                                 expected_state="reserving", expected_epoch=epoch)

    with write_tx(conn):
        jobs_store.insert(conn, _columns("j1", now))
        assert hold(JobKey("none", OP), None) is None
        assert hold(key, 5) is None  # the epoch moved on: nothing written
        moved = hold(key, 0)
        assert moved is not None and (moved.state, moved.epoch, moved.attempt, moved.held_reason) == (
            "held", 1, 1, "looked")
        assert hold(key, None) is None  # the state moved on
        again = jobs_store.update(conn, key, state="reserving", now=now + 2, changes={"held_reason": None},
                                  bump_epoch=True, bump_attempt=True, expected_state="held", expected_epoch=None)
        assert again is not None and (again.epoch, again.attempt, again.held_reason) == (2, 2, None)
    with fresh(ledger_path) as c:
        assert jobs_store.find_job(c, key) == again
        assert jobs_store.projections(c) == {key: ("reserving", 2, 2)}


def test_fenced_writes_are_chained_and_read_back_in_order(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    key = JobKey("j1", OP)
    with write_tx(conn):
        first = jobs_store.record_fenced_write(conn, key, at=clock.now(), actor="w1", event="accepted", epoch=3,
                                               detail={"handle": "interactions/1"})
        second = jobs_store.record_fenced_write(conn, key, at=clock.now() + 1, actor="w2", event="failed", epoch=4,
                                                detail={})
    assert second > first
    with fresh(ledger_path) as c:
        assert jobs_store.fenced_write_count(c) == 2
        got = jobs_store.fenced_writes_for(c, key)
        assert [(w["id"], w["actor"], w["event"], w["epoch"], w["detail"]) for w in got] == [
            (first, "w1", "accepted", 3, {"handle": "interactions/1"}), (second, "w2", "failed", 4, {})]
        assert got[0]["prev_hash"] is None and got[1]["prev_hash"] == got[0]["hash"]


def test_the_first_held_job_on_a_target_blocks_it(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    assert jobs_store.held_on_target(conn, "t1") is None
    assert jobs_store.idem_key_of(conn, JobKey("none", OP)) is None
    assert jobs_store.projections(conn) == {}
    sim.add_fault("drop_before_accept")
    first = _send(conn, cfg, clock, "b-first", target="t1")
    other = _send(conn, cfg, clock, "other", target="t2")
    with fresh(ledger_path) as c:
        assert jobs_store.state_of(c, first) == "held" and jobs_store.state_of(c, other) == "submitted"
        assert jobs_store.held_on_target(c, "t1") == first
        assert jobs_store.held_on_target(c, "t2") is None
        assert jobs_store.held_on_target(c, "t3") is None


def test_an_empty_ledger_gives_a_pass_no_work(conn: Connection, clock: ManualClock) -> None:
    now = clock.now()
    assert jobs_store.find_by_idem_key(conn, "idem-none") is None
    assert jobs_store.submitted_with_handle(conn, (float("-inf"), "", ""), 10) == []
    assert jobs_store.count_submitted(conn) == 0
    assert jobs_store.done_jobs(conn) == []
    assert jobs_store.count_due(conn, now) == 0
    assert jobs_store.stale_sends(conn, started_before=now, lease_before=now) == []


def test_a_pass_reads_its_work_by_state_in_order_and_in_pages(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    now = clock.now()
    with write_tx(conn):
        jobs_store.insert(conn, _columns("s2", now + 2, state="submitted", handle="interactions/2"))
        jobs_store.insert(conn, _columns("s1", now + 1, state="submitted", handle="interactions/1"))
        jobs_store.insert(conn, _columns("s0", now, state="submitted"))  # no handle yet: nothing to ask about
        jobs_store.insert(conn, _columns("d1", now, state="done", updated_at=now + 5))
        jobs_store.insert(conn, _columns("d0", now, state="done", updated_at=now + 3))
        jobs_store.insert(conn, _columns("due", now, next_try_at=now - 1))
        jobs_store.insert(conn, _columns("later", now, next_try_at=now + 60))
        jobs_store.insert(conn, _columns("stale", now, send_started_at=now - 300, lease_until=now - 200))
        jobs_store.insert(conn, _columns("leased", now, send_started_at=now - 300, lease_until=now + 60))
    start = (float("-inf"), "", "")
    with fresh(ledger_path) as c:
        assert [j.job_id for j in jobs_store.submitted_with_handle(c, start, 10)] == ["s1", "s2"]
        first = jobs_store.submitted_with_handle(c, start, 1)
        assert [j.job_id for j in first] == ["s1"]
        after = (first[0].created_at, first[0].job_id, first[0].operation)
        assert [j.job_id for j in jobs_store.submitted_with_handle(c, after, 1)] == ["s2"]
        assert jobs_store.count_submitted(c) == 3
        assert [j.job_id for j in jobs_store.done_jobs(c)] == ["d0", "d1"]
        assert jobs_store.count_due(c, now) == 1  # "later" is not due, "stale" and "leased" have a send started
        assert jobs_store.stale_sends(c, started_before=now - 120, lease_before=now) == [JobKey("stale", OP)]
        found = jobs_store.find_by_idem_key(c, "idem-due")
        assert found is not None and found.key == JobKey("due", OP)



def _last_word(job: Job) -> str:
    return job.held_reason or job.last_error or job.handle or ""


SORT_VALUES = {
    "age": lambda j: j.created_at, "job": lambda j: j.job_id.encode(), "operation": lambda j: j.operation.encode(),
    "state": lambda j: j.state.encode(), "target": lambda j: (j.target or "").encode(),
    "owner": lambda j: (j.owner or "").encode(), "attempt": lambda j: j.attempt,
    "reason": lambda j: _last_word(j).encode(),
}
"""Each sort key as Python reads it from a job (texts by their UTF-8 bytes, a missing value as the empty text)."""


def test_a_group_is_sorted_by_each_key_both_ways_and_paged_without_repeats_or_gaps(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    now = clock.now()
    rows = [  # ties on every key (owner, target, attempt, reason, creation), a missing value, an upper-case letter
        ("b-7", now + 1, "alice", "bucket-2", 1, "503 from remote", None, None),
        ("a-1", now + 1, None, "bucket-1", 3, None, "timeout", None),
        ("B-2", now + 2, "bob", None, 2, "", None, "interactions/9"),
        ("c-3", now, "alice", "bucket-1", 3, "503 from remote", None, None),
        ("é-4", now + 2, "Zed", "bucket-2", 1, "Accepted?", None, None),
        ("a-0", now + 3, None, None, 2, None, None, None),
    ]
    with write_tx(conn):
        for job_id, created, owner, target, attempt, held_reason, last_error, handle in rows:
            jobs_store.insert(conn, _columns(job_id, created, state="held", owner=owner, target=target,
                                             attempt=attempt, held_reason=held_reason, last_error=last_error,
                                             handle=handle, held_at=created))
        jobs_store.insert(conn, _columns("s-1", now, state="submitted", owner="alice"))  # another group
        jobs_store.insert(conn, _columns("c-3", now, operation="other.op", state="rejected", idem_key="idem-c3o"))
    with fresh(ledger_path) as c:
        everything = jobs_store.list_jobs(c, "held")
        assert len(everything) == len(rows)
        for sort in SORTS:
            for ascending in (True, False):
                def order(j: Job, key=SORT_VALUES[sort]) -> tuple[object, ...]:
                    return (key(j), j.created_at, j.job_id.encode(), j.operation.encode())

                want = [j.key for j in sorted(everything, key=order, reverse=not ascending)]
                got = [j.key for j in jobs_store.list_jobs(c, "held", sort=sort, oldest_first=ascending)]
                assert got == want, (sort, ascending)
                paged = [j.key for offset in range(0, len(rows), 2)
                         for j in jobs_store.list_jobs(c, "held", sort=sort, oldest_first=ascending, limit=2,
                                                       offset=offset)]
                assert paged == want, (sort, ascending)
        assert [j.job_id for j in jobs_store.list_jobs(c, "held", sort="owner", flt=JobFilter(owner="alice"))] == [
            "c-3", "b-7"]
        assert [j.key for j in jobs_store.list_jobs(c, "resolved", sort="state")] == [JobKey("c-3", "other.op")]


def test_jobs_are_found_by_id_prefix_then_substring_in_any_state(
    conn: Connection, clock: ManualClock, ledger_path: Path,
) -> None:
    now = clock.now()
    with write_tx(conn):
        for job_id, state in (("report-2", "done"), ("report-1", "held"), ("old report-9", "rejected"),
                              ("REPORT-3", "submitted"), ("rep_x", "failed"), ("other", "held")):
            jobs_store.insert(conn, _columns(job_id, now, state=state))
    with fresh(ledger_path) as c:
        ids = lambda text, limit=10: [j.job_id for j in jobs_store.jobs_matching_id(c, text, limit)]  # noqa: E731
        assert ids("report-") == ["report-1", "report-2", "REPORT-3", "old report-9"]  # prefix first, as typed
        assert ids("report-", 3) == ["report-1", "report-2", "REPORT-3"]
        assert ids("report-", 1) == ["report-1"]
        assert ids("ort-9") == ["old report-9"]
        assert ids("p_") == ["rep_x"]  # a LIKE wildcard is matched as itself
        assert ids("nothing") == [] and ids("") == []
