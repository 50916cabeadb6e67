"""The remote-console URL of a job (where a person checks the remote's own records), shown whole and copyable."""

from __future__ import annotations

from typing import Any, Protocol

from rich.text import Text
from textual.app import App
from textual.widgets import Static

from console.sanitize import clean


class ConsoleLink(Static):
    """One job's remote-console URL: never cut with an ellipsis, folded onto more lines when it is wider than the
    screen, hidden when the job's remote has none.

    The URL is remote-supplied text, so it is cleaned like every untrusted string (controls and bidi characters
    shown as escapes, secrets redacted) but with no length cap; it is drawn as a literal `Text` (no markup, no
    link), and `url` is exactly what is drawn, so what a person copies is what they see.
    """

    DEFAULT_CSS = """
    ConsoleLink { height: auto; padding: 0 1; display: none; }
    ConsoleLink.-shown { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.url: str = ""
        """The cleaned URL as drawn ('' when the job's remote has none)."""

    def show(self, url: str | None, key: str) -> None:
        """Show `url` whole under a line naming `key`, the key that copies it (hide the widget when None)."""
        self.url = clean(url, None) if url else ""
        self.set_class(bool(self.url), "-shown")
        if not self.url:
            self.update("")
            return
        text = Text.assemble(("Remote console", "bold"), " — the remote's own records of this job (",
                             (key, "bold"), " copies the URL):\n")
        text.append(self.url)
        text.overflow = "fold"
        self.update(text)


class Says(Protocol):
    """A screen with a feedback line (the console's screens)."""

    @property
    def app(self) -> App[Any]: ...

    def feedback(self, text: Text | str, *, error: bool = False, prompt: bool = False) -> None: ...


def copy_console_url(screen: Says, link: ConsoleLink, reason: str) -> None:
    """Copy `link`'s URL (as drawn) to the clipboard with Textual's `App.copy_to_clipboard`, and say so on `screen`'s
    feedback line; with no URL, say `reason` instead."""
    if not link.url:
        screen.feedback(Text.assemble(("not available: ", "bold"), reason), error=True)
        return
    screen.app.copy_to_clipboard(link.url)
    screen.feedback(Text.assemble(
        ("copied", "bold green"), f" the remote-console URL ({len(link.url)} characters) to the clipboard — paste it "
        "into a browser (over ssh or tmux the terminal must allow OSC 52 clipboard writes)"))
