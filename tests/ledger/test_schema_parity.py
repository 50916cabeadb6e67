"""The two schemas are one: a fresh SQLite ledger (ledger/store/sqlite.py) and a fresh PostgreSQL ledger
(ledger/store/postgres.py) have the same tables, columns (names, nullability, types by family), indexes
(names, columns, uniqueness, partial predicates by meaning), primary keys and unique constraints; and
their triggers do the same thing (events and evidence refuse UPDATE and DELETE; the event chain refuses
an event that does not chain; the counters follow the events).

Read from each database's own catalogue (sqlite_master and PRAGMAs; pg_catalog through psycopg), not from
the DDL text, so a column added to one backend's migration and not the other's fails here. The few
differences that are deliberate are listed in KNOWN_DIFFERENCES, each with its reason.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger.db import create_ledger

KNOWN_DIFFERENCES = {
    # PostgreSQL keeps the schema version in a table; SQLite in the file header (PRAGMA user_version and
    # application_id).
    "reclaim_meta": "postgresql",
}
"""Tables only one backend has, and which one."""

Columns = dict[str, tuple[str, bool]]  # column -> (type family, NOT NULL)


def _family_sqlite(declared: str) -> str:
    """SQLite's type affinity of a declared type (https://sqlite.org/datatype3.html, 3.1)."""
    t = declared.upper()
    if "INT" in t:
        return "integer"
    if any(s in t for s in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if t == "" or "BLOB" in t:
        return "blob"
    if any(s in t for s in ("REAL", "FLOA", "DOUB")):
        return "real"
    return "numeric"


_PG_FAMILY = {
    "text": "text", "character varying": "text", "character": "text",
    "integer": "integer", "bigint": "integer", "smallint": "integer",
    "double precision": "real", "real": "real", "numeric": "numeric", "bytea": "blob",
}


def _predicate(text: str | None) -> str | None:
    """A partial index's predicate in one canonical spelling: no casts, no parentheses, no case or spacing
    differences, `x = ANY (ARRAY[a, b])` (PostgreSQL's form of IN) as `x in (a, b)`."""
    if text is None:
        return None
    t = re.sub(r"::[a-z ]+(\[\])?", "", text.lower())
    t = re.sub(r"= any \(array\[(.*?)\]\)", r"in (\1)", t)
    t = t.replace("(", " ").replace(")", " ")
    return " ".join(t.split())


# -- SQLite ------------------------------------------------------------------------------------------------

def _sqlite_schema(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        tables = sorted(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        views = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'"))
        columns: dict[str, Columns] = {}
        pkeys: dict[str, tuple[str, ...]] = {}
        uniques: set[tuple[str, tuple[str, ...]]] = set()
        indexes: dict[str, tuple[str, tuple[str, ...], bool, str | None]] = {}
        for t in tables + views:
            info = conn.execute(f"PRAGMA table_info({t})").fetchall()
            # A primary key column is NOT NULL by meaning (PostgreSQL enforces it; SQLite does for INTEGER
            # PRIMARY KEY and our writes never store a NULL key).
            columns[t] = {r[1]: (_family_sqlite(r[2]), bool(r[3]) or r[5] > 0) for r in info}
            pk = tuple(r[1] for r in sorted((r for r in info if r[5] > 0), key=lambda r: r[5]))
            if pk and t in tables:
                pkeys[t] = pk
        for t in tables:
            for _, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({t})").fetchall():
                cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({name})").fetchall())
                if origin == "pk":
                    continue  # the primary key, compared above
                if origin == "u":
                    uniques.add((t, cols))
                    continue
                sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                                   (name,)).fetchone()[0]
                where = re.search(r"\bWHERE\b(.*)$", sql, re.S | re.I) if partial else None
                indexes[name] = (t, cols, bool(unique), _predicate(where.group(1)) if where else None)
        return {"tables": tables, "views": views, "columns": columns, "pkeys": pkeys, "uniques": uniques,
                "indexes": indexes}
    finally:
        conn.close()


# -- PostgreSQL --------------------------------------------------------------------------------------------

_PG_INDEXES = """
SELECT i.relname, t.relname, ix.indisunique, ix.indisprimary, pg_get_expr(ix.indpred, ix.indrelid), c.contype,
       ARRAY(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.ord)
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
LEFT JOIN pg_constraint c ON c.conindid = ix.indexrelid AND c.conrelid = t.oid
WHERE n.nspname = current_schema()
"""


def _pg_schema(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        rel = conn.execute(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        tables = sorted(n for n, kind in rel if kind == "BASE TABLE")
        views = sorted(n for n, kind in rel if kind == "VIEW")
        columns: dict[str, Columns] = {}
        for t, col, dtype, nullable in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        ):
            columns.setdefault(t, {})[col] = (_PG_FAMILY.get(dtype, dtype), nullable == "NO")
        pkeys: dict[str, tuple[str, ...]] = {}
        uniques: set[tuple[str, tuple[str, ...]]] = set()
        indexes: dict[str, tuple[str, tuple[str, ...], bool, str | None]] = {}
        for name, t, unique, primary, pred, contype, cols in conn.execute(_PG_INDEXES):
            if primary:
                pkeys[t] = tuple(cols)
            elif contype == "u":
                uniques.add((t, tuple(cols)))
            else:
                indexes[name] = (t, tuple(cols), bool(unique), _predicate(pred))
        # Views report every column nullable on PostgreSQL; what a view's NOT NULL means is its source's.
        for v in views:
            columns[v] = {c: (fam, False) for c, (fam, _) in columns[v].items()}
    return {"tables": tables, "views": views, "columns": columns, "pkeys": pkeys, "uniques": uniques,
            "indexes": indexes}


@pytest.fixture
def schemas(tmp_path: Path, pg_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    create_ledger(tmp_path / "reclaim.db")
    create_ledger(pg_url)
    return _sqlite_schema(tmp_path / "reclaim.db"), _pg_schema(pg_url)


def test_the_same_tables(schemas: tuple[dict[str, Any], dict[str, Any]]) -> None:
    lite, pg = schemas
    only_lite = set(lite["tables"]) - set(pg["tables"])
    only_pg = set(pg["tables"]) - set(lite["tables"])
    assert only_lite == set(), f"tables only SQLite has: {sorted(only_lite)}"
    assert only_pg == {t for t, side in KNOWN_DIFFERENCES.items() if side == "postgresql"}, (
        f"tables only PostgreSQL has: {sorted(only_pg)}")
    assert {"job_counts", "event_tallies", "verify_passes"} <= set(lite["tables"])
    assert lite["views"] == pg["views"] == []
    assert len(lite["tables"]) >= 12  # a smoke check that the catalogue was read at all


def test_the_same_columns_by_name_nullability_and_type_family(
    schemas: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    lite, pg = schemas
    for table in lite["tables"]:
        assert lite["columns"][table] == pg["columns"][table], table


def test_the_same_primary_keys_and_unique_constraints(schemas: tuple[dict[str, Any], dict[str, Any]]) -> None:
    lite, pg = schemas
    pg_keys = {t: k for t, k in pg["pkeys"].items() if t not in KNOWN_DIFFERENCES}
    assert lite["pkeys"] == pg_keys
    assert lite["uniques"] == pg["uniques"]
    assert ("jobs", ("idem_key",)) in lite["uniques"]  # the guarantee everything rests on


def test_the_same_indexes_by_name_columns_uniqueness_and_predicate(
    schemas: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    lite, pg = schemas
    assert lite["indexes"] == pg["indexes"]
    assert lite["indexes"]["jobs_held_target"][3] == "state = 'held'"  # a partial index was read as one


# -- Triggers, as behaviour --------------------------------------------------------------------------------

def _refused(run: Any, sql: str) -> bool:
    try:
        run(sql)
    except (sqlite3.DatabaseError, psycopg.Error):
        return True
    return False


def _fill(path: str | Path) -> None:
    """One reserved job (an event) and one evidence row, through the ledger's own API."""
    from ledger.clock import ManualClock
    from ledger.config import parse_config
    from ledger.db import connect
    from ledger.reservation import reserve

    cfg = parse_config({"remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
                        "operations": {"op.a": {"remote": "sim", "daily_quota": 10}}})
    conn = connect(path)
    try:
        assert reserve(conn, cfg, "op.a", {"input": "x"}, clock=ManualClock(1_796_126_400.0),
                       job_id="j1").outcome == "reserved"
    finally:
        conn.close()


def _sqlite_runner(path: Path) -> tuple[Any, Any]:
    conn = sqlite3.connect(path, isolation_level=None)

    def run(sql: str) -> list[Any]:
        return conn.execute(sql).fetchall()

    return run, conn


def _pg_runner(url: str) -> tuple[Any, Any]:
    conn = psycopg.connect(url, autocommit=True)

    def run(sql: str) -> list[Any]:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []

    return run, conn


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_triggers_do_the_same_on_both(backend: str, tmp_path: Path, pg_url: str) -> None:
    where: str | Path = tmp_path / "reclaim.db" if backend == "sqlite" else pg_url
    create_ledger(where)
    _fill(where)
    run, conn = _sqlite_runner(Path(where)) if backend == "sqlite" else _pg_runner(str(where))
    try:
        events_before = run("SELECT * FROM events ORDER BY id")
        assert len(events_before) == 1
        # Append-only: no UPDATE, no DELETE of an event, nor of evidence.
        assert _refused(run, "UPDATE events SET actor = 'mallory'")
        assert _refused(run, "DELETE FROM events")
        run("INSERT INTO evidence (at, source, idem_key, attempt, handle, remote_state, job_id, operation, detail) "
            "VALUES (1, 'query', 'k', 1, NULL, 'running', 'j1', 'op.a', '{}')")
        evidence_before = run("SELECT * FROM evidence")
        assert _refused(run, "UPDATE evidence SET remote_state = 'forged'")
        assert _refused(run, "DELETE FROM evidence")
        # The chain: an event whose prev_hash is not the last event's hash is refused.
        assert _refused(run, "INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, "
                             "epoch, detail, prev_hash, hash) VALUES (2, 'j1', 'op.a', 2, 'x', 'note', 'reserving', "
                             f"'reserving', 0, '{{}}', 'not-the-head', '{'0' * 64}')")
        assert run("SELECT * FROM events ORDER BY id") == events_before
        assert run("SELECT * FROM evidence") == evidence_before
        # The counters follow the events: a job's step moves it from one state's count to the next, and every
        # event is tallied (here, an event appended by hand that chains to the head).
        def counts() -> dict[tuple[str, str], int]:
            return {(op, s): int(n) for op, s, n in run("SELECT operation, state, n FROM job_counts") if int(n) != 0}

        def tallied() -> int:
            return sum(int(n) for (n,) in run("SELECT n FROM event_tallies"))

        assert counts() == {("op.a", "reserving"): 1} and tallied() == 1
        head = run("SELECT hash FROM events ORDER BY id DESC LIMIT 1")[0][0]
        run("INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
            f"prev_hash, hash) VALUES (2, 'j1', 'op.a', 2, 'x', 'send_unknown', 'reserving', 'held', 0, '{{}}', "
            f"'{head}', '{'1' * 64}')")
        assert counts() == {("op.a", "held"): 1} and tallied() == 2
    finally:
        conn.close()
