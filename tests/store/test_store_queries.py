"""Each backend's SQL files (ledger.store.queries): both backends name the same statements, every name the store
runs is given, none is given that nothing runs, and each file uses its own backend's placeholders only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.store import queries

STORE = Path(queries.__file__).parent
_RUN = re.compile(r"""\.(?:run|sql)\(\s*["']([a-z_]+\.[a-z0-9_]+)["']""")
_STRINGS = re.compile(r"'(?:[^']|'')*'")


def _names_run() -> set[str]:
    return {m.group(1) for p in STORE.rglob("*.py") for m in _RUN.finditer(p.read_text())}


def test_both_backends_name_the_same_statements() -> None:
    sqlite, postgres = queries.load("sqlite"), queries.load("postgres")
    assert sqlite, "no statement found in ledger/store/sql/sqlite"
    assert set(sqlite) ^ set(postgres) == set()


def test_every_statement_the_store_runs_is_given_and_every_given_one_is_run() -> None:
    given = set(queries.load("sqlite"))
    run = _names_run()
    assert run - given == set(), "run by the store but in no .sql file"
    assert given - run == set(), "in a .sql file but run by nothing"


@pytest.mark.parametrize("backend", queries.BACKENDS)
def test_each_file_uses_its_own_placeholders(backend: str) -> None:
    for name, sql in queries.load(backend).items():
        bare = _STRINGS.sub("''", sql)  # placeholders outside quoted text
        if backend == "sqlite":
            assert "%s" not in bare, name
        else:
            assert "?" not in bare, name
            unescaped = sql.replace("%%", "")  # a literal %, written %%
            assert re.search(r"%(?!s)", unescaped) is None, f"{name}: a literal % is written %% on PostgreSQL"


def test_a_file_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="before the first"):
        queries.parse("SELECT 1;\n", "x")
    with pytest.raises(ValueError, match="twice"):
        queries.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "x")
    with pytest.raises(ValueError, match="no text"):
        queries.parse("-- name: a\n-- only a comment\n", "x")
    assert queries.parse("-- header\n\n-- name: a\n-- what it does\nSELECT ?\nFROM t;\n", "x") == {"x.a": "SELECT ?\nFROM t"}
