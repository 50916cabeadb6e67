"""The ledger's public surface: the three lists of `ledger/__init__.py` agree, every name resolves, the console
asks for nothing else, and `import ledger` itself loads no module of the ledger and no heavy package.

`ledger/__init__.py` names each public name three times: in `_EXPORTS` (what `ledger.X` loads on first use), in
the `TYPE_CHECKING` imports (what type checkers see) and in `__all__` (kept a literal list, because a computed one
is not read by type checkers, and strict ones then see no name re-exported). Read here from the source itself.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ledger

ROOT = Path(__file__).resolve().parents[2]
INIT = ROOT / "ledger" / "__init__.py"

LOADED_BY_IMPORT = ["ledger"]
"""The modules of the ledger that `import ledger` loads: the package alone; every name loads its module on use."""
HEAVY = ("google.genai", "textual", "psycopg", "httpx", "console")
"""Packages `import ledger` must not load (a remote's SDK, the console's UI, a driver, an HTTP client)."""


def _tree() -> ast.Module:
    return ast.parse(INIT.read_text(encoding="utf-8"))


def _assigned(tree: ast.Module, name: str) -> ast.expr:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert node.value is not None
            return node.value
    raise AssertionError(f"ledger/__init__.py assigns no {name}")


def _exports_map() -> dict[str, tuple[str, str]]:
    value = ast.literal_eval(_assigned(_tree(), "_EXPORTS"))
    assert isinstance(value, dict)
    return value


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """Each name the `if TYPE_CHECKING:` block binds: (module, name there). A name bound twice is an error."""
    found: dict[str, tuple[str, str]] = {}
    blocks = [n for n in _tree().body if isinstance(n, ast.If) and isinstance(n.test, ast.Name)
              and n.test.id == "TYPE_CHECKING"]
    assert len(blocks) == 1, "one `if TYPE_CHECKING:` block"
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.module and node.level == 0, ast.unparse(node)
        for alias in node.names:
            bound = alias.asname or alias.name
            assert bound not in found, f"{bound} is imported twice under TYPE_CHECKING"
            found[bound] = (node.module, alias.name)
    return found


def _all_list() -> list[str]:
    value = ast.literal_eval(_assigned(_tree(), "__all__"))
    assert isinstance(value, list)
    return value


def test_all_and_the_type_checking_imports_name_what_exports_maps() -> None:
    exports = _exports_map()
    names = _all_list()
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert set(names) - set(exports) == set(), "in __all__ but not in _EXPORTS"
    assert set(exports) - set(names) == set(), "in _EXPORTS but not in __all__"
    checked = _type_checking_imports()
    assert set(exports) - set(checked) == set(), "in _EXPORTS but not imported under TYPE_CHECKING"
    assert set(checked) - set(exports) == set(), "imported under TYPE_CHECKING but not in _EXPORTS"
    differ = {name: (exports[name], checked[name]) for name in exports if exports[name] != checked[name]}
    assert differ == {}, "_EXPORTS and the TYPE_CHECKING imports name another origin"
    assert ledger.__all__ == names


@pytest.mark.slow  # loads every module of the ledger, the Gemini SDK among them: about 2 s
def test_every_public_name_resolves_to_its_origin() -> None:
    exports = _exports_map()
    wrong = [name for name in ledger.__all__
             if getattr(ledger, name) is not getattr(importlib.import_module(exports[name][0]), exports[name][1])]
    assert wrong == []


def test_the_console_imports_only_public_names() -> None:
    public = {*ledger.__all__, "simulator"}  # the bundled simulator is a tool of its own, not the ledger's surface
    outside: list[str] = []
    for path in sorted((ROOT / "console").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports_ledger = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ledger" and node.level == 0:
                outside += [f"{path.relative_to(ROOT)}:{node.lineno} {a.name}" for a in node.names if a.name not in public]
            elif isinstance(node, ast.Import) and any(a.name == "ledger" and a.asname is None for a in node.names):
                imports_ledger = True
        if imports_ledger:
            outside += [f"{path.relative_to(ROOT)}:{n.lineno} ledger.{n.attr}" for n in ast.walk(tree)
                        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "ledger"
                        and n.attr not in public]
    assert outside == []


def _fresh(code: str) -> dict[str, object]:
    """Run `code` (which prints one JSON value last) in a fresh interpreter at the repository's root."""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.splitlines()[-1])
    assert isinstance(result, dict)
    return result


def test_import_ledger_loads_only_the_package_and_no_heavy_package() -> None:
    loaded = _fresh(
        "import json, sys\n"
        "import ledger\n"
        "mods = sorted(sys.modules)\n"
        f"heavy = [m for m in mods if any(m == h or m.startswith(h + '.') for h in {HEAVY!r})]\n"
        "print(json.dumps({'ledger': [m for m in mods if m == 'ledger' or m.startswith('ledger.')], 'heavy': heavy}))\n"
    )
    assert loaded == {"ledger": LOADED_BY_IMPORT, "heavy": []}


def test_reserve_is_the_function_and_no_module_shares_its_name() -> None:
    """`ledger.reserve` is the function (the module is `ledger.reservation`), also after the worker loaded it."""
    checks = _fresh(
        "import json, sys\n"
        "import ledger.worker\n"
        "import ledger\n"
        "from ledger import reserve, reserve_job\n"
        "from ledger.reservation import reserve as direct\n"
        "print(json.dumps({'function': reserve is direct and reserve_job is direct and ledger.reserve is direct,\n"
        "                  'module': 'ledger.reserve' in sys.modules}))\n"
    )
    assert checks == {"function": True, "module": False}
