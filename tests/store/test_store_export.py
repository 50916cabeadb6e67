"""ledger.store.export on both backends: the jobs and events a filter selects, every column, streamed in key (UTF-8
byte) order and id order; on an empty ledger and after sends (read back on a fresh connection inside one snapshot)."""

from __future__ import annotations

from pathlib import Path

from ledger_reads import fresh

from ledger import store
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.model import JobFilter
from ledger.simulator import Simulator
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import export as export_store
from ledger.store.export import EVENT_COLUMNS, JOB_COLUMNS, ExportFilter
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


def test_an_empty_ledger_exports_nothing(conn: Connection) -> None:
    with store.read_snapshot(conn):
        assert list(export_store.job_rows(conn, ExportFilter())) == []
        assert list(export_store.event_rows(conn, ExportFilter())) == []


def test_rows_in_key_order_with_every_column_and_filters(
    sim: Simulator, conn: Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
) -> None:
    for job_id, target in (("b", "bucket-1"), ("B", "bucket-2"), ("a", "bucket-1"), ("é", "other")):
        clock.advance(10)
        submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, target=target,
                   remotes=RemoteCache(cfg))
    with fresh(ledger_path) as c, store.read_snapshot(c):
        jobs = list(export_store.job_rows(c, ExportFilter()))
        assert [j["job_id"] for j in jobs] == ["B", "a", "b", "é"]  # by UTF-8 bytes on both backends
        assert all(tuple(j) == JOB_COLUMNS for j in jobs)
        assert isinstance(jobs[0]["payload"], str)  # the stored JSON text
        third = next(j["created_at"] for j in jobs if j["job_id"] == "a")  # created third
        by_target = export_store.job_rows(c, ExportFilter(target="bucket-1"))
        assert [j["job_id"] for j in by_target] == ["a", "b"]
        assert [j["job_id"] for j in export_store.job_rows(c, ExportFilter(since=third))] == ["a", "é"]
        assert [j["job_id"] for j in export_store.job_rows(c, ExportFilter(until=third))] == ["B", "b"]
        assert [j["job_id"] for j in export_store.job_rows(c, ExportFilter(job_id="a", operation="article.*"))] == [
            "a"]
        assert list(export_store.job_rows(c, ExportFilter(states=("held",)))) == []
        events = list(export_store.event_rows(c, ExportFilter()))
        ids = [e["id"] for e in events]
        assert ids == sorted(ids) and all(tuple(e) == EVENT_COLUMNS for e in events)
        assert (len(events), events[-1]["hash"]) == events_store.head(c)
        assert [e["id"] for e in export_store.event_rows(c, ExportFilter(after_id=ids[-3]))] == ids[-2:]
        typed = list(export_store.event_rows(c, ExportFilter(typed=JobFilter(target="bucket-2"))))
        assert typed and {e["job_id"] for e in typed} == {"B"}
        assert {e["job_id"] for e in export_store.event_rows(c, ExportFilter(states=("submitted",), job_id="é"))} == {
            "é"}
