"""A job's event history, in order: who did what, when, from which state to which; Enter expands an event."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.sanitize import compact_json, safe_text
from console.times import full_time, readable_detail
from console.widgets.column_fit import ellipsised, fit_widths
from console.widgets.event_feed import event_summary, transition
from ledger import Event


class Timeline(DataTable[Text]):
    """One row per event: seq, time (to the second), actor, kind, state change, epoch, detail (literal JSON with
    its epoch times shown as times, or a sentence for an event such as `blocked_new_job`). The detail column takes
    the free room and ends with '…' where cut; Enter on a row posts `Expanded` so the screen shows it whole."""

    DEFAULT_CSS = """
    Timeline { height: auto; max-height: 16; }
    """

    LABELS = ("#", "time", "actor", "event", "state", "epoch", "detail")
    FLEX = (6, 2, 4)
    MINIMUM = (2, 10, 6, 8, 8, 5, 16)

    class Expanded(Message):
        """Enter on an event: show its whole detail."""

        def __init__(self, event: Event) -> None:
            self.event = event
            super().__init__()

    def __init__(self, *, tz: str = "UTC", id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.tz = tz
        self._events: list[Event] = []
        self._rows: list[tuple[Text, ...]] = []
        self._room = 0

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        if self.size.width != self._room:
            self._draw()

    def _draw(self) -> None:
        self._room = self.size.width
        widths = fit_widths(self.LABELS, self._rows, self._room or 120, flex=self.FLEX, minimum=self.MINIMUM,
                            maximum=(6, 24, 30, 30, 30, 5, 400))
        row = self.cursor_row
        self.clear(columns=True)
        for label, width in zip(self.LABELS, widths, strict=True):
            self.add_column(ellipsised(Text(label)), width=width, key=label)
        for e, cells in zip(self._events, self._rows, strict=True):
            self.add_row(*cells, key=str(e.id))
        if self._rows and row > 0:
            self.move_cursor(row=min(row, len(self._rows) - 1))

    def show_events(self, events: list[Event]) -> None:
        """Replace the rows (the cursor stays on its row)."""
        self._events = list(events)
        self._rows = [
            tuple(ellipsised(cell) for cell in (
                Text(str(e.seq)),
                Text(full_time(e.at, self.tz)),
                safe_text(e.actor, 40),
                safe_text(e.kind, 30),
                transition(e),
                Text("" if e.epoch is None else str(e.epoch)),
                event_summary(e) or compact_json(readable_detail(e.detail, self.tz), 400),
            ))
            for e in events
        ]
        self._draw()

    def event_at_cursor(self) -> Event | None:
        """The event under the cursor, if any."""
        return self._events[self.cursor_row] if 0 <= self.cursor_row < len(self._events) else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._events):
            self.post_message(self.Expanded(self._events[event.cursor_row]))
