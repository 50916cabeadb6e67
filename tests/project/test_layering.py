"""The one-way arrow console -> ledger, checked three ways: imports at run time, SQL in console/, and
import-linter's contracts from pyproject.toml (as `make lint` runs them); and inside the ledger, the store as its
ground floor: ledger/store/ imports nothing above it."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEDGER_MODULES = ["ledger", "ledger.worker", "ledger.triage", "ledger.queries", "ledger.dispatch",
                  "ledger.db", "ledger.reservation", "ledger.leases", "ledger.outbox", "ledger.simulator",
                  "ledger.remotes.gemini"]


def test_importing_the_ledger_never_loads_textual_or_the_console() -> None:
    code = (
        f"import importlib, sys\n"
        f"for m in {LEDGER_MODULES!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'console'))\n"
        "assert not bad, bad\n"
        "print('ok', len(sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def _console_sources() -> list[Path]:
    files = sorted((ROOT / "console").rglob("*.py"))
    assert files, "no console sources found"
    return files


# SQL the console must never hold: every read and write goes through ledger functions. Checked on the
# syntax tree, so comments and docstrings that merely mention SQL do not count.
_DB_CALLS = {"execute", "executemany", "executescript"}
_SQL = [
    re.compile(r"\bSELECT\b.*\bFROM\b", re.S),
    re.compile(r"\bINSERT\s+(OR\s+\w+\s+)?INTO\b"),
    re.compile(r"\bUPDATE\s+\w+\s+SET\b"),
    re.compile(r"\bDELETE\s+FROM\b"),
    re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK)\b"),
    re.compile(r"\bPRAGMA\s+\w+"),
    re.compile(r"\bCREATE\s+(TABLE|INDEX|TRIGGER)\b"),
]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def sql_in(source: str, name: str = "<source>") -> list[str]:
    """Lines of `source` that call execute*() or hold an SQL string (docstrings and comments excluded)."""
    tree = ast.parse(source, name)
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if fname in _DB_CALLS:
                hits.append(f"{name}:{node.lineno}: {fname}() call")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if any(p.search(node.value) for p in _SQL):
                hits.append(f"{name}:{node.lineno}: SQL string {node.value[:60]!r}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] == "sqlite_utils" for m in mods):
                hits.append(f"{name}:{node.lineno}: imports sqlite_utils")
    return hits


def test_the_sql_detector_finds_sql() -> None:
    bad = 'x = 1\nconn.execute("SELECT * FROM jobs")\nq = "UPDATE jobs SET state = ?"\n'
    assert len(sql_in(bad)) == 3
    fine = '"""Polls PRAGMA data_version, then SELECT ... FROM nothing."""\n# DELETE FROM jobs\nqueries.find_job(c, k)\n'
    assert sql_in(fine) == []


def test_the_console_holds_no_sql() -> None:
    hits = []
    for path in _console_sources():
        hits += sql_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not hits, "SQL in console/ (call a ledger function instead):\n" + "\n".join(hits)


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    if exe.exists():
        return str(exe)
    found = shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return found


def test_the_import_contracts_are_declared() -> None:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    il = doc["tool"]["importlinter"]
    kinds = {(c["type"], tuple(c.get("layers", ())), tuple(c.get("forbidden_modules", ()))) for c in il["contracts"]}
    assert ("layers", ("console", "ledger"), ()) in kinds
    assert ("forbidden", (), ("textual",)) in kinds
    assert ("forbidden", (), ("ledger.*",)) in kinds  # console -> the `ledger` facade only


def test_lint_imports_passes_as_make_lint_runs_it() -> None:
    # import-linter refuses to check a contract that forbids an external package (textual) unless
    # [tool.importlinter] sets include_external_packages = true; it then exits 1 without checking anything.
    r = subprocess.run([_lint_imports(), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"Contracts: \d+ kept, 0 broken", r.stdout), r.stdout[-3000:]


def test_the_contracts_hold_when_external_packages_are_included(tmp_path: Path) -> None:
    # Checks the contracts themselves, whatever the state of the pyproject flag above.
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if "include_external_packages" not in text:
        text = text.replace("[tool.importlinter]\n", "[tool.importlinter]\ninclude_external_packages = true\n", 1)
    cfg = tmp_path / "importlinter.toml"
    cfg.write_text(text, encoding="utf-8")
    r = subprocess.run([_lint_imports(), "--no-cache", "--no-logo", str(cfg)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"Contracts: \d+ kept, 0 broken", r.stdout), r.stdout[-3000:]


def test_a_console_import_of_a_ledger_module_breaks_the_facade_contract(tmp_path: Path) -> None:
    # A copy of both packages with one console module reaching past the facade: lint-imports must refuse it.
    for pkg in ("ledger", "console"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.tcss", "*.html"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "console" / "reach_in.py").write_text("from ledger.queries import list_jobs\n", encoding="utf-8")
    r = subprocess.run([_lint_imports(), "--no-cache", "--no-logo"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "console.reach_in -> ledger.queries" in r.stdout, r.stdout[-3000:]
    assert re.search(r"Contracts: \d+ kept, 1 broken", r.stdout), r.stdout[-3000:]


GROUND_FLOOR = {"ledger.model", "ledger.errors", "ledger.clock", "ledger.jsontext", "ledger.chain", "ledger.seal",
                "ledger.signing", "ledger.event_table", "ledger.files"}
"""What the store may import besides itself: records, errors, time, the canonical JSON and the chain's hash, the
audit key and the signing key, the event table, file placement. Each of these imports only the others (and the store's types when type checking)."""


def _ledger_imports(path: Path) -> set[str]:
    """The ledger modules `path` imports when it runs (imports under `if TYPE_CHECKING:` do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "ledger")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ledger":
            if node.module == "ledger":
                out.update(f"ledger.{a.name}" for a in node.names)
            else:
                out.add(node.module)
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "ledger" / "store").glob("*.py"))
                         + [ROOT / (m.replace(".", "/") + ".py") for m in sorted(GROUND_FLOOR)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_store_and_the_ground_floor_import_nothing_above_them(path: Path) -> None:
    in_store = path.parent.name == "store"
    allowed = GROUND_FLOOR | ({"ledger.store"} if in_store else set())
    above = sorted(m for m in _ledger_imports(path)
                   if m not in allowed and not (in_store and m.startswith("ledger.store.")))
    assert not above, f"{path.relative_to(ROOT)} imports {above}, above the store: move what it needs down"
