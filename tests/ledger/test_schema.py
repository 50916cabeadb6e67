"""Schema versions: a ledger of every older version migrates forward, and the counters the events keep agree."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger_reads import fresh

from ledger.clock import ManualClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger, write_tx
from ledger.model import STATES
from ledger.reservation import reserve
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store.sqlite import AFTER_SCRIPT, APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, _statements
from ledger.transitions import apply


def _ledger_at_version(path: Path, version: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for v, script in enumerate(MIGRATIONS[:version], start=1):
        for stmt in _statements(script):
            conn.execute(stmt)
        if v in AFTER_SCRIPT:
            AFTER_SCRIPT[v](conn)  # as the migration does (version 8: chain, then the guarding triggers)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute(
        "INSERT INTO jobs (job_id, operation, idem_key, payload, state, quota_day, created_at, updated_at) "
        "VALUES ('old', 'article.generate', 'k-old', '{}', 'held', '2026-12-01', 1, 1)"
    )
    conn.close()


def test_every_older_version_migrates_forward_and_keeps_its_rows(tmp_path: Path) -> None:
    for version in range(1, SCHEMA_VERSION):
        path = tmp_path / f"v{version}.db"
        _ledger_at_version(path, version)
        conn = connect(path)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert jobs_store.state_counts(conn)["held"] == 1  # counts rebuilt from the rows already there
        conn.close()


def test_counts_follow_every_step_of_the_events_and_agree_with_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    create_ledger(path)
    conn = connect(path)
    cfg = parse_config({"remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
                        "operations": {"op.a": {"remote": "sim", "daily_quota": 10}}})
    clock = ManualClock(1_796_126_400.0)
    keys = [reserve(conn, cfg, "op.a", {"input": str(i)}, clock=clock, job_id=f"j{i}").job.key for i in range(3)]
    with write_tx(conn):  # reserving -> held: one job moves from one count to the other
        assert apply(conn, keys[0], "decision_unverified", actor="reclaim", now=clock.now(),
                     expected_state="reserving", fields={"held_reason": "a test"}).ok
    with fresh(path) as c:
        rows = dict(c.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        assert jobs_store.state_counts(c) == {**dict.fromkeys(STATES, 0), **rows}
        assert jobs_store.operation_counts(c) == {"op.a": rows}
        assert events_store.head(c)[0] == c.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    conn.close()


def test_statement_splitter_keeps_trigger_bodies_whole() -> None:
    stmts = _statements("CREATE TABLE t (a);\nCREATE TRIGGER x AFTER INSERT ON t\nBEGIN\n  SELECT 1;\n  SELECT 2;\nEND;\n")
    assert len(stmts) == 2 and stmts[1].endswith("END;")


def test_the_held_check_of_reserve_searches_held_jobs_by_target_without_sorting(tmp_path: Path) -> None:
    from ledger.store import queries

    path = tmp_path / "l.db"
    create_ledger(path)
    conn = connect(path)
    plan = [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {queries.load('sqlite')['jobs.held_on_target']}", ("t",)).fetchall()]
    assert plan == ["SEARCH jobs USING INDEX jobs_held_target (target=?)"], plan  # no TEMP B-TREE for the order
    conn.close()
