"""The line above the keys where a screen says what just happened: a refusal, a disabled key's reason, a prompt."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class FeedbackLine(Static):
    """One line under the screen's content (composed last before the keys), hidden while there is nothing to say;
    `say()` shows a message, `clear()` hides it.

    Messages are `Text` (built from the sanitiser), never markup.
    """

    DEFAULT_CSS = """
    FeedbackLine {
        height: auto;
        max-height: 3;
        padding: 0 1;
        background: $boost;
        display: none;
    }
    FeedbackLine.-shown { display: block; }
    FeedbackLine.-error { color: $error; }
    FeedbackLine.-prompt { color: $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.message: str = ""
        """The plain text shown now ('' when hidden): tests and the command palette read it."""

    def say(self, text: Text | str, *, error: bool = False, prompt: bool = False) -> None:
        """Show `text` (an error in red, a prompt in the accent colour)."""
        shown = text if isinstance(text, Text) else Text(text)
        self.message = shown.plain
        self.set_class(error, "-error")
        self.set_class(prompt and not error, "-prompt")
        self.set_class(bool(self.message), "-shown")
        self.update(shown)

    def clear(self) -> None:
        """Hide the line."""
        self.say("")
