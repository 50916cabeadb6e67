"""The confirmation every action passes through: what will happen, and Cancel focused by default.

`y` confirms and `n` (or Esc) cancels; Enter presses the focused button, which is Cancel until the operator
moves to the other one. A refused action's `y` says why and does nothing.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from console.bindings import CONFIRM
from console.sanitize import clean, safe_text


class ConfirmScreen(ModalScreen[bool]):
    """A preview of one action; a refusal is shown with its reason and the confirm button stays disabled."""

    BINDINGS = CONFIRM

    def __init__(
        self, title: Text, summary: str, lines: list[str], refusal: str | None, confirm_label: str,
        *, dangerous: bool = False, cancel_label: str = "Cancel",
    ) -> None:
        super().__init__()
        self.title_text = title
        self.summary = summary
        self.lines = lines
        self.refusal = refusal
        self.confirm_label = confirm_label
        self.cancel_label = cancel_label
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
            yield Static(self._keys_hint(), id="confirm-keys")
            with Horizontal(id="confirm-buttons"):
                yield Button(self.cancel_label, id="cancel", variant="primary")
                yield Button(
                    self.confirm_label, id="confirm", variant="error" if self.dangerous else "warning",
                    disabled=self.refusal is not None,
                )

    def _keys_hint(self) -> Text:
        keys = {b.id: self.app.get_key_display(b) for b in CONFIRM}
        hint = Text(style="dim")
        if self.refusal is None:
            hint.append(f"{keys['confirm.yes']} {self.confirm_label} · ")
        hint.append(f"{keys['confirm.no']} or {keys['confirm.cancel']} {self.cancel_label} · "
                    "enter presses the focused button")
        return hint

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return True if self.refusal is None else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        """Why `y` does nothing here."""
        return f"refused: {self.refusal}" if action == "confirm" and self.refusal else "not available here"

    def on_key(self, event: events.Key) -> None:
        """A refused action's confirm key says why, and goes no further."""
        active = self.active_bindings.get(event.key)
        if active is None or active.enabled or active.node is not self:
            return
        event.stop()
        event.prevent_default()
        self.app.notify(clean(self.disabled_reason("confirm", ()), 300), title="not available", severity="warning",
                        markup=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm" and self.refusal is None)

    def action_confirm(self) -> None:
        """Act (only when the action is allowed)."""
        if self.refusal is None:
            self.dismiss(True)

    def action_cancel(self) -> None:
        """Close without acting."""
        self.dismiss(False)
