"""A job's event history, in order: who did what, when, from which state to which."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from console.live import clock_time
from console.sanitize import compact_json, safe_text
from console.widgets.event_feed import event_summary, transition
from ledger.model import Event


class Timeline(DataTable[Text]):
    """One row per event: seq, time, actor, kind, state change, epoch, detail (literal JSON, or a sentence
    for an event such as `blocked_new_job` whose point the JSON would hide)."""

    DEFAULT_CSS = """
    Timeline { height: auto; max-height: 16; }
    """

    def __init__(self, *, tz: str = "UTC", id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.tz = tz

    def on_mount(self) -> None:
        for label, width in (("#", 3), ("time", 16), ("actor", 12), ("event", 15), ("state", 20), ("epoch", 5),
                             ("detail", 80)):
            self.add_column(label, width=width, key=label)

    def show_events(self, events: list[Event]) -> None:
        """Replace the rows."""
        self.clear()
        for e in events:
            self.add_row(
                Text(str(e.seq)),
                Text(clock_time(e.at, self.tz, with_date=True)),
                safe_text(e.actor, 40),
                safe_text(e.kind, 30),
                transition(e),
                Text("" if e.epoch is None else str(e.epoch)),
                event_summary(e) or compact_json(e.detail, 200),
                key=str(e.id),
            )
