"""ledger.store.jobs on both backends: a job found by its key or its remote handle, its state, pages of a group (with
the typed filter), the held ones, counts per state and operation, the fenced writes; on an empty ledger and after sends
(read back on a fresh connection), in order and within limits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect, write_tx
from ledger.model import STATES, JobFilter, JobKey
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.transitions import apply
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


@contextmanager
def fresh(ledger: Path) -> Iterator[Connection]:
    """A new connection to the ledger: what another process would read."""
    c = connect(ledger)
    try:
        yield c
    finally:
        c.close()


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


def test_the_typed_filter_as_sql_escapes_its_wildcards() -> None:
    where, params = jobs_store.filter_clause(JobFilter(operation="article.*", text="50%_off", owner="bob"), "j")
    assert where[0].startswith("(j.job_id LIKE ? ESCAPE")
    assert params == ["%50\\%\\_off%"] * 5 + ["bob", "article.%"]
    assert jobs_store.filter_clause(JobFilter()) == ([], [])
    stage_where, stage_params = jobs_store.filter_clause(JobFilter(stage="awaiting-my-approval", me="bob"))
    assert len(stage_where) == 3 and stage_params == ["bob"]


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
