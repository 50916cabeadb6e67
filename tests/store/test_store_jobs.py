"""ledger.store.jobs on both backends: a job found by its remote handle, a job's state by its key, on an empty
ledger and after a send (read back on a fresh connection)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import jobs as jobs_store
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
