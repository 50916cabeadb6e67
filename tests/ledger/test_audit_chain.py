"""The audit chain: events hash-chained in their own transaction; `reclaim verify` finds every tampering.

Each tampering is done as an attacker with the file (or the database's owner account) would: straight SQL
on the ledger, with the guarding triggers dropped first where they would refuse it. Every test runs on
SQLite and on PostgreSQL (whose triggers carry other names, and which has no REPLACE). `verify` must name the first event or job that does
not match, and exit 11; an untouched ledger verifies with exit 0 and the head hash `status` shows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ledger_reads import QmarkSql

from ledger.db import connect
from ledger.errors import LedgerConflict
from ledger.simulator import Simulator
from ledger.store.sqlite import APPLICATION_ID, MIGRATIONS, _statements

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)


@pytest.fixture
def worked(sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any]) -> Path:
    """A ledger after a small workload: sends, a held job, a finding, a release, a tick."""
    sim.add_fault("status", status=503, match_idem=None)
    for i in range(3):
        run_cli("submit", OP, "--payload", json.dumps({"input": f"x{i}"}), "--job-id", f"j{i}")
    assert run_cli("finding", "j0", "--category", "not_received", "--note", "nothing", operator="alice").rc == 0
    assert run_cli("release", "j0", "--reason", "not received", operator="bob").rc == 0
    assert run_cli("tick").rc in (0, 4)
    return ledger_path


def _is_pg(ledger: Path) -> bool:
    return str(ledger).startswith("postgresql://")


def _raw(ledger: Path) -> Any:
    """A connection that runs any SQL, each statement committed: sqlite3's own on a file; on PostgreSQL the
    ledger's connection (autocommit, `?` placeholders, errors raised as the ledger's own)."""
    return QmarkSql(connect(ledger)) if _is_pg(ledger) else sqlite3.connect(ledger, isolation_level=None)


def _drop_guards(ledger: Path) -> tuple[str, ...]:
    return PG_DROP_GUARDS if _is_pg(ledger) else DROP_GUARDS


def _tamper(ledger: Path, *sql: str) -> None:
    conn = _raw(ledger)
    try:
        for stmt in sql:
            conn.execute(stmt)
    finally:
        conn.close()


DROP_GUARDS = (
    "DROP TRIGGER events_no_update", "DROP TRIGGER events_no_delete", "DROP TRIGGER events_no_replace",
    "DROP TRIGGER events_chain",
)
PG_DROP_GUARDS = ("DROP TRIGGER events_no_change ON events", "DROP TRIGGER events_chain ON events")


def test_an_untouched_ledger_verifies_and_status_shows_the_same_head(
    worked: Path, run_cli: Callable[..., Any],
) -> None:
    out = run_cli("verify", "--json")
    assert out.rc == 0, out
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["events"] > 5 and doc["jobs"] == 3 and len(doc["head_hash"]) == 64
    status = json.loads(run_cli("status", "--json").stdout)
    assert status["audit"] == {"events": doc["events"], "head_hash": doc["head_hash"]}


REFUSED = (sqlite3.IntegrityError, LedgerConflict)
"""A trigger's refusal: sqlite3's own error on a raw SQLite connection, the ledger's own through the ledger's."""


def test_replace_update_and_delete_on_events_are_refused_by_the_triggers(worked: Path) -> None:
    conn = _raw(worked)
    try:
        row = conn.execute("SELECT * FROM events ORDER BY id LIMIT 1").fetchone()
        cols = ", ".join("?" for _ in row)
        replace = (f"INSERT INTO events VALUES ({cols}) ON CONFLICT (id) DO UPDATE SET actor = 'mallory'"
                   if _is_pg(worked) else f"REPLACE INTO events VALUES ({cols})")
        with pytest.raises(REFUSED, match=r"append-only|does not chain"):
            conn.execute(replace, tuple(row))
        with pytest.raises(REFUSED, match="append-only"):
            conn.execute("UPDATE events SET actor = 'mallory' WHERE id = ?", (row[0],))
        with pytest.raises(REFUSED, match="append-only"):
            conn.execute("DELETE FROM events WHERE id = ?", (row[0],))
        with pytest.raises(REFUSED, match="does not chain"):
            conn.execute(
                "INSERT INTO events (at, job_id, operation, seq, actor, kind, detail, prev_hash, hash) "
                "VALUES (1, 'j9', 'op', 1, 'mallory', 'note', '{}', NULL, ?)", ("0" * 64,))
    finally:
        conn.close()


def test_verify_names_an_event_rewritten_by_replace(worked: Path, run_cli: Callable[..., Any]) -> None:
    conn = _raw(worked)
    (victim,) = conn.execute("SELECT id FROM events WHERE kind = 'release'").fetchone()
    conn.close()
    rewrite = (f"UPDATE events SET actor = 'carol' WHERE id = {victim}" if _is_pg(worked) else
               f"REPLACE INTO events SELECT id, at, job_id, operation, seq, 'carol', kind, from_state, to_state, "
               f"epoch, detail, prev_hash, hash, seal, mac FROM events WHERE id = {victim}")
    _tamper(worked, *_drop_guards(worked), rewrite)
    out = run_cli("verify")
    assert out.rc == 11 and f"event {victim} " in out.stdout and "rewritten" in out.stdout, out


def test_verify_lists_every_rewritten_event_not_only_the_first(worked: Path, run_cli: Callable[..., Any]) -> None:
    conn = _raw(worked)
    victims = [row[0] for row in conn.execute("SELECT id FROM events WHERE kind = 'reserve' ORDER BY id").fetchall()]
    conn.close()
    assert len(victims) >= 2
    _tamper(worked, *_drop_guards(worked),
            *(f"UPDATE events SET actor = 'carol' WHERE id = {victim}" for victim in victims))
    out = run_cli("verify")
    assert out.rc == 11, out
    for victim in victims:
        assert f"event {victim} " in out.stdout, (victim, out.stdout)
    assert out.stdout.count("its content does not match its hash") == len(victims), out.stdout


def test_verify_names_a_job_moved_by_a_bare_update(worked: Path, run_cli: Callable[..., Any]) -> None:
    _tamper(worked, "UPDATE jobs SET state = 'reserving', send_started_at = NULL WHERE job_id = 'j1'")
    out = run_cli("verify")
    assert out.rc == 11 and "job j1 / article.generate" in out.stdout and "bypassed" in out.stdout, out


def test_a_job_moved_back_to_reserving_by_a_bare_update_is_never_sent_again(
    worked: Path, sim: Simulator, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    """The measured attack: `UPDATE jobs` put a finished job back to reserving and the next tick sent it again."""
    sim.clear_faults()
    conn = _raw(worked)
    state = conn.execute("SELECT state FROM jobs WHERE job_id = 'j1'").fetchone()[0]
    conn.close()
    assert state != "reserving"
    _tamper(worked, "UPDATE jobs SET state = 'reserving', send_started_at = NULL, next_try_at = NULL, "
                    "lease_until = NULL, lease_owner = NULL WHERE job_id = 'j1'")
    creates, before = sim.count("create"), fingerprint(worked)
    out = run_cli("tick")
    assert out.rc == 11, out
    assert "job 'j1' / article.generate: its row says reserving" in out.stderr and "changed outside reclaim" in out.stderr
    assert sim.count("create") == creates, "a tampered row was sent"
    assert fingerprint(worked) == before


def test_verify_names_the_event_after_a_deleted_one(worked: Path, run_cli: Callable[..., Any]) -> None:
    conn = _raw(worked)
    ids = [r[0] for r in conn.execute("SELECT id FROM events ORDER BY id")]
    conn.close()
    _tamper(worked, *_drop_guards(worked), f"DELETE FROM events WHERE id = {ids[2]}")
    out = run_cli("verify")
    assert out.rc == 11 and f"event {ids[3]} " in out.stdout and "removed or inserted" in out.stdout, out


@pytest.mark.sqlite_only  # an older SQLite file's migration; a PostgreSQL ledger is made chained, at its base schema
def test_the_migration_chains_the_events_an_older_ledger_holds(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for script in MIGRATIONS[:7]:
        for stmt in _statements(script):
            conn.execute(stmt)
    conn.execute("PRAGMA user_version = 7")
    conn.execute("INSERT INTO jobs (job_id, operation, idem_key, payload, state, epoch, quota_day, created_at, "
                 "updated_at) VALUES ('old', 'op', 'k-old', '{}', 'held', 1, '2026-12-01', 1, 2)")
    for seq, (kind, to, epoch) in enumerate([("reserve", "reserving", 0), ("send_started", "reserving", 1),
                                             ("send_unknown", "held", 1)], start=1):
        conn.execute("INSERT INTO events (at, job_id, operation, seq, actor, kind, to_state, epoch) "
                     "VALUES (?, 'old', 'op', ?, 'w', ?, ?, ?)", (seq, seq, kind, to, epoch))
    conn.close()
    from ledger.audit import verify

    migrated = connect(path)  # migrates to the current version, chaining the three events
    try:
        verdict = verify(migrated)
        assert verdict.ok and verdict.events == 3 and verdict.head_hash, verdict
    finally:
        migrated.close()


@pytest.mark.parametrize(("kind", "to_state", "why"), [
    ("completed", "held", "completed from held is not allowed by the event table"),
    ("finding", "done", "finding from held leads to held, but the event says done"),
])
def test_verify_names_an_event_whose_step_the_event_table_does_not_allow(
    worked: Path, run_cli: Callable[..., Any], kind: str, to_state: str, why: str,
) -> None:
    """An attacker rewrites j0's finding (held -> held) as another step and re-hashes the chain from there (no
    audit key to check MACs against): the chain holds, the job's row still matches its last event, and verify
    names the event by its seq, job, the state it started from and its kind."""
    from ledger.chain import event_hash

    conn = _raw(worked)
    try:
        victim, seq = conn.execute("SELECT id, seq FROM events WHERE job_id = 'j0' AND kind = 'finding'").fetchone()
        rows = conn.execute("SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
                            "prev_hash, seal FROM events WHERE id >= ? ORDER BY id", (victim,)).fetchall()
    finally:
        conn.close()
    prev = rows[0][11]
    rewrite: list[str] = [*_drop_guards(worked)]
    for row in rows:
        ev_kind, ev_to = (kind, to_state) if row[0] == victim else (row[6], row[8])
        digest = event_hash(prev, row[1], row[2], row[3], row[4], row[5], ev_kind, row[7], ev_to, row[9], row[10],
                            row[12])
        rewrite.append(f"UPDATE events SET kind = '{ev_kind}', to_state = '{ev_to}', prev_hash = "
                       f"{'NULL' if prev is None else repr(prev)}, hash = '{digest}' WHERE id = {row[0]}")
        prev = digest
    _tamper(worked, *rewrite)
    out = run_cli("verify")
    assert out.rc == 11, out
    assert "does not match its hash" not in out.stdout and "removed or inserted" not in out.stdout, out
    assert f"event {victim} (j0 / {OP} seq {seq}): {why}" in out.stdout, out
