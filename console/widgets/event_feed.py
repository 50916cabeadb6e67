"""The latest events, newest on top, fed by the live cursor."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import DataTable

from console.live import clock_time
from console.sanitize import safe_text
from ledger.model import Event


def transition(e: Event) -> Text:
    """'held → reserving', or the one state when nothing moved."""
    if e.from_state and e.to_state and e.from_state != e.to_state:
        return Text(f"{e.from_state} → {e.to_state}")
    return Text(e.to_state or "", style="dim")


class EventFeed(DataTable[Text]):
    """A bounded feed: `push()` adds events (oldest first in the argument), the newest shows on top."""

    DEFAULT_CSS = """
    EventFeed { height: 1fr; }
    """

    def __init__(self, *, size: int = 20, tz: str = "UTC", id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", show_cursor=False, zebra_stripes=True)
        self.limit = size
        self.tz = tz
        self._events: list[Event] = []

    def on_mount(self) -> None:
        for label, width in (("time", 8), ("job", 26), ("operation", 16), ("event", 14), ("state", 22),
                             ("actor", 12)):
            self.add_column(label, width=width, key=label)
        self._draw()

    def replace(self, events: Iterable[Event]) -> None:
        """Show exactly these events (oldest first)."""
        self._events = list(events)[-self.limit :]
        self._draw()

    def push(self, events: Iterable[Event]) -> None:
        """Add new events (oldest first), dropping the oldest beyond `size`."""
        self._events = (self._events + list(events))[-self.limit :]
        self._draw()

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        self.clear()
        for e in reversed(self._events):
            self.add_row(
                Text(clock_time(e.at, self.tz)),
                safe_text(e.job_id, 60),
                safe_text(e.operation, 40),
                safe_text(e.kind, 30),
                transition(e),
                safe_text(e.actor, 40),
                key=str(e.id),
            )
