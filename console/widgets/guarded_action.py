"""An operator action: a button, disabled with the reason when this operator may not take it now."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Button, Label

from console.sanitize import safe_text


class GuardedAction(Horizontal):
    """A button plus one line: what the action does when allowed, or why it is not (never silently missing)."""

    DEFAULT_CSS = """
    GuardedAction { height: auto; margin: 0 0 0 1; }
    GuardedAction > Button { min-width: 22; width: 22; }
    GuardedAction > Label { width: 1fr; height: auto; padding: 0 1; }
    GuardedAction.-refused > Label { color: $text-muted; }
    """

    allowed: reactive[bool | None] = reactive(None)

    class Pressed(Message):
        """The (enabled) action's button was pressed."""

        def __init__(self, action: str) -> None:
            self.action = action
            super().__init__()

    def __init__(self, action: str, label: str, key: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.action = action
        self.label = label
        self.key = key
        self.reason: str | None = None

    def compose(self) -> ComposeResult:
        yield Button(f"{self.label} ({self.key})", id=f"btn-{self.action}", disabled=True, compact=True)
        yield Label("…", id=f"why-{self.action}")

    def set_guard(self, allowed: bool, reason: str | None, summary: str) -> None:
        """Enable with the summary, or disable with the reason."""
        self.reason = None if allowed else (reason or "not allowed")
        self.allowed = allowed
        button = self.query_one(Button)
        button.disabled = not allowed
        label = self.query_one(Label)
        if allowed:
            label.update(safe_text(summary, 300))
            button.tooltip = None
        else:
            label.update(Text.assemble(("not available: ", "bold"), safe_text(self.reason, 300)))
            button.tooltip = safe_text(self.reason, 300)
        self.set_class(not allowed, "-refused")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.allowed:
            self.post_message(self.Pressed(self.action))
