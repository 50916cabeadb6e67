"""`L`: the message log — every feedback line and toast the console said, newest last, with when and where (as
lazygit's command log), so a message that scrolled by or was taken back can be read again."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from console.bindings import MESSAGES
from console.live import clock_time
from console.sanitize import safe_text

if TYPE_CHECKING:
    from console.app import ReclaimApp

KIND_STYLE = {"error": "bold red", "prompt": "cyan", "toast": "", "info": "", "expired": "dim"}


class MessagesScreen(ModalScreen[None]):
    """The console's messages, newest last, the cursor on the newest; Esc closes."""

    BINDINGS = MESSAGES

    def compose(self) -> ComposeResult:
        app = cast("ReclaimApp", self.app)
        with Vertical(id="messages-dialog"):
            yield Label(f"Messages — {len(app.messages)} said in this console, newest last (Esc closes)",
                        id="messages-title")
            yield DataTable(id="messages-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        app = cast("ReclaimApp", self.app)
        table: DataTable[Text] = self.query_one("#messages-table", DataTable)
        table.add_column("at", key="at")
        table.add_column("where", key="where")
        table.add_column("said", key="said")
        tz = app.config.timezone
        for said in app.messages:
            table.add_row(Text(clock_time(said.at, tz)), Text(said.where, style="dim"),
                          safe_text(said.text, 600, style=KIND_STYLE.get(said.kind, ""), prose=True))
        if table.row_count:
            table.move_cursor(row=table.row_count - 1)
        table.focus()

    def action_close(self) -> None:
        """Close the log."""
        self.dismiss(None)
