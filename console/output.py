"""Printing for the CLI: Rich tables on a terminal, JSON with --json, one-line errors on stderr.

Every path to the terminal goes through `console.sanitize`: nothing printed here is ever parsed as Rich
markup (titles, headers, cells and lines are `Text`), controls and bidi overrides are shown escaped,
no link is attached, and every secret the config names is replaced by `[redacted:NAME]` (once the CLI
called `use_redactor`). `--json` documents are valid JSON with those code points as `\\uXXXX` escapes.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console import sanitize
from console.sanitize import clean, json_text
from ledger.redaction import Redactor

stdout = Console(highlight=False, soft_wrap=False, markup=False, emoji=False)
stderr = Console(stderr=True, highlight=False, markup=False, emoji=False)


def use_redactor(redactor: Redactor) -> None:
    """Replace the secrets `redactor` knows in everything printed from now on (the CLI installs the config's)."""
    sanitize.use_redactor(redactor)


def emit_json(value: Any) -> None:
    """Print one JSON document to stdout: valid JSON, secrets replaced, no raw control/C1/bidi code point."""
    sys.stdout.write(json_text(value) + "\n")
    sys.stdout.flush()


def error(message: str, *, as_json: bool = False, code: int = 2) -> None:
    """Print a one-line error (to stderr; and as JSON on stdout with --json)."""
    if as_json:
        emit_json({"error": clean(message), "exit_code": code})
    stderr.print(Text(f"reclaim: error: {clean(message)}"), soft_wrap=True)


def notice(message: str) -> None:
    """Print one literal line to stderr (progress a person should see, not the command's output)."""
    stderr.print(Text(f"reclaim: {clean(message)}"), soft_wrap=True)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a Rich table; the title, headers and every cell are untrusted text, rendered literally."""
    t = Table(title=Text(clean(title, 200)), title_justify="left")
    for c in columns:
        t.add_column(Text(clean(c, 60)))
    for row in rows:
        t.add_row(*[Text(clean(v, 120)) for v in row])
    stdout.print(t)


def line(text: str) -> None:
    """Print one literal line."""
    stdout.print(Text(clean(text, 2000)), soft_wrap=True)
