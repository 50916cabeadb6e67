"""Schema versions: a ledger of every older version migrates forward, and the trigger-kept counts agree."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ledger.db import connect, create_ledger
from ledger.store import jobs as jobs_store
from ledger.store.sqlite import AFTER_SCRIPT, APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, _statements


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


def test_counts_follow_every_state_change(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    create_ledger(path)
    conn = connect(path)
    conn.execute(
        "INSERT INTO jobs (job_id, operation, idem_key, payload, state, quota_day, created_at, updated_at) "
        "VALUES ('a', 'op', 'k-a', '{}', 'reserving', '2026-12-01', 1, 1)"
    )
    conn.execute("UPDATE jobs SET state = 'held' WHERE job_id = 'a'")
    conn.execute("UPDATE jobs SET owner = 'x' WHERE job_id = 'a'")  # not a state change: counts unchanged
    counts = jobs_store.state_counts(conn)
    truth = dict(conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    assert counts["held"] == truth["held"] == 1 and counts["reserving"] == 0


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
