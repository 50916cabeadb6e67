"""The line above the keys where a screen says what just happened: a refusal, a disabled key's reason, a prompt.

Every message is also kept in the console's message log (`L`). A message that is only true for a while (the list
is empty now) is said with `while_true`: it is taken back as soon as that stops being so."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.timer import Timer
from textual.widgets import Static

CHECK_SECONDS = 0.5
"""How often a message said `while_true` is checked."""


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
        self._while: Callable[[], bool] | None = None
        self._checker: Timer | None = None

    def say(self, text: Text | str, *, error: bool = False, prompt: bool = False,
            while_true: Callable[[], bool] | None = None) -> None:
        """Show `text` (an error in red, a prompt in the accent colour), and keep it in the message log. With
        `while_true`, the line is taken back once that returns False."""
        shown = text if isinstance(text, Text) else Text(text)
        self._show(shown, error, prompt)
        self._while = while_true
        if while_true is not None and self._checker is None:
            self._checker = self.set_interval(CHECK_SECONDS, self._check)
        log = getattr(self.app, "log_said", None)
        if callable(log):
            log(self.screen, self.message, "error" if error else "prompt" if prompt else "info")

    def _show(self, shown: Text, error: bool, prompt: bool) -> None:
        self.message = shown.plain
        self.set_class(error, "-error")
        self.set_class(prompt and not error, "-prompt")
        self.set_class(bool(self.message), "-shown")
        self.update(shown)

    def _check(self) -> None:
        """Take the message back when what it said stopped being true (no message to check: the timer stops)."""
        if self._while is None:
            if self._checker is not None:
                self._checker.stop()
                self._checker = None
            return
        if not self._while():
            gone = self.message
            self._while = None
            self._show(Text(""), False, False)
            log = getattr(self.app, "log_said", None)
            if callable(log):
                log(self.screen, f"(no longer true, taken back) {gone}", "expired")

    def clear(self) -> None:
        """Hide the line."""
        self.say("")
