"""`:` — the command line: one line at the bottom of the screen; Enter runs it, Esc closes it.

The line is handed back to the app (`dismiss`) as typed; `console.commands` parses it and the app runs it.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, Static

from console.bindings import COMMAND
from console.commands import COMMANDS

HINT = " · ".join(":" + usage.split(" — ")[0].lstrip(":") for usage in COMMANDS.values()) + " — Enter runs, Esc closes"


class CommandScreen(ModalScreen[str | None]):
    """A prompt for `:held`, `:job <id> [operation]`, `:view <name>`, `:owner me`; suggests as you type."""

    BINDINGS = COMMAND

    def compose(self) -> ComposeResult:
        with Vertical(id="command-bar"):
            yield Static(Text(HINT, style="dim"), id="command-hint")
            with Horizontal(id="command-line"):
                yield Label(":", id="command-colon")
                yield Input(
                    placeholder="a command, e.g. job article 2026-12-01 #7",
                    suggester=SuggestFromList(["held", "job ", "view ", "owner me"], case_sensitive=False),
                    id="command-input", compact=True, select_on_focus=False,
                )

    def on_mount(self) -> None:
        self.query_one("#command-input", Input).focus()

    @on(Input.Submitted, "#command-input")
    def _run(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Close the command line without running anything."""
        self.dismiss(None)
