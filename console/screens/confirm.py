"""The confirmation every action passes through: what will happen, and Cancel focused by default."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from console.bindings import CONFIRM
from console.sanitize import safe_text


class ConfirmScreen(ModalScreen[bool]):
    """A preview of one action; a refusal is shown with its reason and the confirm button stays disabled."""

    BINDINGS = CONFIRM

    def __init__(
        self, title: Text, summary: str, lines: list[str], refusal: str | None, confirm_label: str,
        *, dangerous: bool = False,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.summary = summary
        self.lines = lines
        self.refusal = refusal
        self.confirm_label = confirm_label
        self.dangerous = dangerous

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Label(self.title_text, id="confirm-title")
            yield Static(Text.assemble(("What happens: ", "bold"), safe_text(self.summary, 400)), id="confirm-summary")
            for line in self.lines:
                yield Static(safe_text(line, 400), classes="confirm-line")
            if self.refusal:
                yield Static(
                    Text.assemble(("Refused: ", "bold"), safe_text(self.refusal, 400), ("\nNothing was changed.", "")),
                    id="confirm-refusal",
                )
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(
                    self.confirm_label, id="confirm", variant="error" if self.dangerous else "warning",
                    disabled=self.refusal is not None,
                )

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm" and self.refusal is None)

    def action_cancel(self) -> None:
        """Close without acting."""
        self.dismiss(False)
