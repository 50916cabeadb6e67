"""`?`: every key, as currently mapped (keymap overrides applied), with its binding id for `[keys]`."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from console.bindings import HELP, SCOPES, key_for
from console.sanitize import safe_text

if TYPE_CHECKING:
    from console.app import ReclaimApp


class HelpScreen(ModalScreen[None]):
    """The key map; remap any id under `[keys]` in the config TOML."""

    BINDINGS = HELP

    def compose(self) -> ComposeResult:
        app = cast("ReclaimApp", self.app)
        with Vertical(id="help-dialog"):
            yield Label("Keys — Esc, ? or q closes this help", id="help-title")
            yield Static(
                Text(
                    "Remap any key by its id under [keys] in the config, e.g. \"triage.release\" = \"ctrl+e\". "
                    "Ctrl+P opens the command palette with every action; : opens the command line (:held, "
                    ":job <id> [operation], :view <name>, :owner me). No key sends anything by itself: each action "
                    "but the query (a read) opens a preview whose confirmation defaults to Cancel (y confirms, n "
                    "cancels). Enter in a field goes on with its action; Esc with typed text asks first. A key whose "
                    "action is not available says why."
                ),
                id="help-intro",
            )
            for problem in app.keymap.problems:
                yield Static(safe_text(problem, 300), classes="help-problem")
            table: DataTable[Text] = DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield table

    def on_mount(self) -> None:
        app = cast("ReclaimApp", self.app)
        table = self.query_one("#help-table", DataTable)
        table.add_columns("where", "key", "does", "id")
        for scope, bindings in SCOPES.items():
            for b in bindings:
                keys = key_for(b, app.keymap.keys)
                shown = ", ".join(app.get_key_display(_binding_with(b, k)) for k in keys.split(","))
                table.add_row(Text(scope), Text(shown, style="bold"), Text(b.description), Text(b.id or ""))
        table.focus()

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)


def _binding_with(binding: object, key: str) -> object:
    from dataclasses import replace

    return replace(binding, key=key.strip())  # type: ignore[type-var]
