"""Opening a ledger checks what is cheap and certain (the file's header, the schema, the newest event against its
hash), never every page: the full check is `reclaim verify`, which records when it passed, and `status` and
`metrics` say when. The counters `status` and `metrics` read are kept by the events, and agree with a recount."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ledger_reads import fresh
from test_bad_input import assert_one_line_error

from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect
from ledger.reservation import reserve
from ledger.store import jobs as jobs_store
from ledger.store import verify as verify_store

OP = "article.generate"
CORRUPT = ("the ledger file is corrupt", "restore it from a backup", "reclaim verify")


def _reserve(ledger: Path, config: Path, n: int) -> None:
    conn = connect(ledger)
    try:
        cfg, clock = load_config(config), ManualClock(1_796_126_400.0)
        for i in range(n):
            reserve(conn, cfg, OP, {"input": f"job {i}"}, clock=clock, job_id=f"job-{i:03d}")
    finally:
        conn.close()  # the last connection: the WAL is checkpointed into the file


def test_a_passing_verify_is_recorded_and_status_and_metrics_say_when(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    assert run_cli("init").rc == 0
    _reserve(ledger_path, config_path, 3)
    before = run_cli("status")
    assert before.rc == 0 and "full check: never passed on this ledger" in before.stdout, before
    assert 'reclaim_verify_last_pass_timestamp_seconds{scope="full"} 0.0' in run_cli("metrics").stdout

    checked = run_cli("verify")
    assert checked.rc == 0 and "not recorded" not in checked.stdout, checked
    head = next(line for line in checked.stdout.splitlines() if line.startswith("events ")).rsplit("head ", 1)[1]
    doc = json.loads(run_cli("status", "--json").stdout)
    full = doc["verified"]["full"]
    assert f"{full['events']}:{full['head']}" == head == f"{doc['audit']['events']}:{doc['audit']['head_hash']}"
    assert "full check: passed" in run_cli("status").stdout
    exposition = run_cli("metrics").stdout
    line = next(x for x in exposition.splitlines()
                if x.startswith('reclaim_verify_last_pass_timestamp_seconds{scope="full"}'))
    assert float(line.split()[-1]) > 1_700_000_000
    with fresh(ledger_path) as c:  # read back from a fresh connection: one pass, by the account that ran it
        passes = verify_store.last_passes(c)
        assert set(passes) == {"full"} and passes["full"].events == full["events"]


@pytest.mark.sqlite_only  # edits the SQLite file around reclaim
def test_a_rewritten_newest_event_stops_status_and_the_console_before_they_read_on(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], file_digest: Callable[[Path], str],
) -> None:
    assert run_cli("init").rc == 0
    _reserve(ledger_path, config_path, 2)
    raw = sqlite3.connect(ledger_path, isolation_level=None)
    try:
        raw.execute("DROP TRIGGER events_no_update")
        raw.execute("UPDATE events SET actor = 'mallory' WHERE id = (SELECT MAX(id) FROM events)")
    finally:
        raw.close()
    before = file_digest(ledger_path)
    for args in (["status"], ["events"], ["console", "--read-only"]):
        r = run_cli(*args, timeout=30)
        assert_one_line_error(r, 7, "the newest event", "does not match its hash", *CORRUPT)
        assert file_digest(ledger_path) == before, args


@pytest.mark.sqlite_only  # truncates the SQLite file
def test_a_truncated_file_is_refused_on_opening_without_reading_its_pages(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], file_digest: Callable[[Path], str],
) -> None:
    assert run_cli("init").rc == 0
    _reserve(ledger_path, config_path, 40)
    data = ledger_path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    ledger_path.write_bytes(data[: page_size * (len(data) // page_size // 2)])
    before = file_digest(ledger_path)
    r = run_cli("status", timeout=30)
    assert_one_line_error(r, 7, *CORRUPT)  # by the header check or by SQLite on the way in
    assert file_digest(ledger_path) == before


def test_the_counters_status_reads_are_the_events_and_agree_with_a_recount(
    sim: Any, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    assert run_cli("init").rc == 0
    for i in range(3):
        assert run_cli("submit", OP, "--payload", json.dumps({"input": f"n{i}"}), "--job-id", f"n{i}").rc == 0
    sim.add_fault("drop_before_accept")
    run_cli("submit", OP, "--payload", json.dumps({"input": "held"}), "--job-id", "h1")
    doc = json.loads(run_cli("status", "--json").stdout)
    with fresh(ledger_path) as c:
        counted = verify_store.jobs_counted(c)
        assert doc["operations"][OP]["states"] == {s: n for (op, s), n in counted.items() if op == OP}
        assert counted[(OP, "held")] == 1 and counted[(OP, "submitted")] == 3
        assert jobs_store.operation_counts(c) == {OP: {s: n for (_, s), n in counted.items()}}
        assert verify_store.event_tallies_kept(c) == verify_store.event_tallies_counted(c)
        assert doc["audit"]["events"] == c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    assert run_cli("verify").rc == 0
