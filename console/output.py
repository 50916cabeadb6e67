"""Printing for the CLI: Rich tables on a terminal, JSON with --json, one-line errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console.sanitize import clean

stdout = Console(highlight=False, soft_wrap=False)
stderr = Console(stderr=True, highlight=False)


def emit_json(value: Any) -> None:
    """Print one JSON document to stdout."""
    sys.stdout.write(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error(message: str, *, as_json: bool = False, code: int = 2) -> None:
    """Print a one-line error (to stderr; and as JSON on stdout with --json)."""
    if as_json:
        emit_json({"error": clean(message), "exit_code": code})
    stderr.print(Text(f"reclaim: error: {clean(message)}"), soft_wrap=True)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a Rich table; every cell is untrusted text, rendered literally."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for row in rows:
        t.add_row(*[Text(clean(v, 120)) for v in row])
    stdout.print(t)


def line(text: str) -> None:
    """Print one literal line."""
    stdout.print(Text(clean(text, 2000)), soft_wrap=True)
