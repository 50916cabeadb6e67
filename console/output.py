"""Printing for the CLI: Rich tables on a terminal, JSON with --json, one-line errors on stderr.

Every path to the terminal goes through `console.sanitize`: nothing printed here is ever parsed as Rich
markup (titles, headers, cells and lines are `Text`), controls and bidi overrides are shown escaped,
no link is attached, and every secret the config names is replaced by `[redacted:NAME]` (once the CLI
called `use_redactor`). `--json` documents are valid JSON with those code points as `\\uXXXX` escapes.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console import sanitize
from console.sanitize import clean, json_text
from ledger import Redactor

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


CELL_LIMIT = 120
"""Characters a table cell shows before it is cut with an ellipsis (not for id columns: see `table`)."""


def cut(value: Any) -> str:
    """`value` as a table cell shows it when its column is not an id column: cleaned, at most CELL_LIMIT chars."""
    return clean(value, CELL_LIMIT)


def table(title: str, columns: list[str], rows: list[list[Any]], *, ids: Collection[str] = (),
          prose: Collection[str] = (), empty: str | None = None) -> None:
    """Print a Rich table; the title, headers and every cell are untrusted text, rendered literally. With no
    rows and `empty` given, print that one line instead of a table with no body (e.g. "notifications: none").

    Cells are cut at CELL_LIMIT characters, and a column too wide for the terminal is cut with an ellipsis,
    except the columns named in `ids`: they hold what a person types next (a job id, a notification id, a
    handle), so they are never cut; a narrow terminal wraps them onto more lines instead. Every control in a
    cell is shown escaped (a newline as `\\x0a`), except in the columns named in `prose` (free text such as a
    reason or a remote's error), where a newline or tab is shown as a space.
    """
    if not rows and empty is not None:
        line(empty)
        return
    t = Table(title=Text(clean(title, 200)), title_justify="left")
    keep = [c in ids for c in columns]
    text = [c in prose for c in columns]
    for c, whole in zip(columns, keep, strict=True):
        t.add_column(Text(clean(c, 60)), overflow="fold" if whole else "ellipsis")
    for row in rows:
        t.add_row(*[Text(clean(v, None if whole else CELL_LIMIT, prose=free))
                    for v, whole, free in zip(row, keep, text, strict=False)])
    stdout.print(t)


def line(text: str) -> None:
    """Print one literal line."""
    stdout.print(Text(clean(text, 2000)), soft_wrap=True)
