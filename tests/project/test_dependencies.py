"""Every runtime dependency in pyproject.toml is imported by the product (ledger/ or console/), so none is
carried for nothing."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Distribution name -> the top-level module it is imported as, where they differ.
MODULE = {"google-genai": "google.genai"}


def declared() -> list[str]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [re.split(r"[<>=~!\[ ;]", d, maxsplit=1)[0].strip().lower() for d in doc["project"]["dependencies"]]


def imported() -> set[str]:
    """Every module name the product imports (a.b.c gives a, a.b and a.b.c)."""
    names: set[str] = set()
    for path in [*(ROOT / "ledger").rglob("*.py"), *(ROOT / "console").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for m in mods:
                parts = m.split(".")
                names.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return names


def test_every_runtime_dependency_is_imported_by_the_product() -> None:
    used = imported()
    unused = [d for d in declared() if MODULE.get(d, d.replace("-", "_")) not in used]
    assert not unused, f"declared in pyproject.toml but imported nowhere in ledger/ or console/: {unused}"

