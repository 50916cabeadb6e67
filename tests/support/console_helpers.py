"""Helpers for the console tests: wait on conditions (bounded, never a fixed sleep) and read the screen."""

from __future__ import annotations

import html
import io
import re
import time
from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from textual.pilot import Pilot

from console.app import ReclaimApp


async def wait_until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 10.0, what: str = "") -> float:
    """Let the app run until `predicate()` is true; fail after `timeout` s. Returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await pilot.pause(0.02)
    return time.monotonic() - start


async def wait_loaded(pilot: Pilot[Any], screen_type: type | None = None, timeout: float = 10.0) -> None:
    """Wait until the top screen (of `screen_type`, if given) drew its first read and the counts arrived."""
    app = pilot.app
    assert isinstance(app, ReclaimApp)

    def ready() -> bool:
        screen = app.screen
        if screen_type is not None and not isinstance(screen, screen_type):
            return False
        return bool(getattr(screen, "loaded", False)) and getattr(screen, "remote_read", True) and app.counts is not None

    await wait_until(pilot, ready, timeout, f"{screen_type.__name__ if screen_type else 'screen'} to load")
    await pilot.pause()


_SVG_TEXT = re.compile(
    r'<text class="[^"]*" x="(?P<x>[\d.]+)" y="[\d.]+" textLength="(?P<len>[\d.]+)" '
    r'clip-path="url\(#[^"]*-line-(?P<line>\d+)\)">(?P<text>.*?)</text>'
)


def screen_text(app: ReclaimApp) -> str:
    """The visible text of the current screen (and any screen under a modal), as drawn.

    Read from `App.export_screenshot()` (public): every run of text in the SVG names its line and starts at a
    column (`x` / the cell width), so the lines are put back together cell by cell.
    """
    width, height = app.size
    rows = [[" "] * width for _ in range(height)]
    for m in _SVG_TEXT.finditer(app.export_screenshot()):
        text = html.unescape(m["text"]).replace("\xa0", " ")
        cell = float(m["len"]) / max(cell_len(text), 1)
        line, col = int(m["line"]), round(float(m["x"]) / cell)
        if line >= height:
            continue
        for ch in text:
            if 0 <= col < width:
                rows[line][col] = ch
            col += max(cell_len(ch), 1)
    return "\n".join("".join(row).rstrip() for row in rows)


def widget_text(app: ReclaimApp) -> str:
    """All text held by the current screen's widgets (including rows scrolled out of view)."""
    from textual.widgets import DataTable, Label, Static

    parts: list[str] = []
    for w in app.screen.query("*"):
        if isinstance(w, DataTable):
            for row in range(w.row_count):
                parts.extend(str(getattr(c, "plain", c)) for c in w.get_row_at(row))
        elif isinstance(w, (Static, Label)):
            parts.append(_plain(w.content))
    return "\n".join(parts)


def _plain(content: object) -> str:
    plain = getattr(content, "plain", None)
    if isinstance(plain, str):
        return plain
    if isinstance(content, str):
        return content
    console = Console(width=400, file=io.StringIO(), color_system=None, record=True)
    console.print(content)
    return console.export_text(styles=False)
