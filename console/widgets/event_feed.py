"""The latest events, newest on top, fed by the live cursor; Enter opens the job an event belongs to."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import clock_time
from console.sanitize import safe_text
from console.widgets.column_fit import ellipsised, fit_widths
from ledger import Event, JobKey


def transition(e: Event) -> Text:
    """'held → reserving', or the one state when nothing moved."""
    if e.from_state and e.to_state and e.from_state != e.to_state:
        return Text(f"{e.from_state} → {e.to_state}")
    return Text(e.to_state or "", style="dim")


def event_summary(e: Event) -> Text | None:
    """A sentence for an event whose point its JSON detail would hide (else None); untrusted parts literal."""
    if e.kind == "blocked_new_job":
        d = e.detail
        return Text.assemble(
            ("refused new job ", "bold"), safe_text(d.get("job_id"), 120, style="bold"), " (",
            safe_text(d.get("operation"), 60), ") on target ", safe_text(d.get("target"), 120),
            (": this job is held", "bold red"),
        )
    return None


def feed_summary(e: Event) -> Text | None:
    """The feed's short form of `event_summary`: its row already says blocked_new_job and names the held job."""
    if e.kind == "blocked_new_job":
        d = e.detail
        text = Text.assemble(("refused ", "bold red"), safe_text(d.get("job_id"), 120, style="bold"))
        if d.get("operation") != e.operation:
            text.append(" (")
            text.append_text(safe_text(d.get("operation"), 60))
            text.append(")")
        text.overflow = "ellipsis"
        return text
    return None


class EventFeed(DataTable[Text]):
    """A bounded feed: `push()` adds events (oldest first in the argument), the newest shows on top.

    The cursor stays on the event it was on while new events arrive; Enter posts `Opened` with that event's
    job (for a `blocked_new_job` event: the held job that refused the new one).
    """

    DEFAULT_CSS = """
    EventFeed { height: 1fr; }
    """

    class Opened(Message):
        """An event was chosen: open its job."""

        def __init__(self, key: JobKey) -> None:
            self.key = key
            super().__init__()

    def __init__(self, *, size: int = 20, tz: str = "UTC", id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.limit = size
        self.tz = tz
        self._events: list[Event] = []
        self._shown: list[Event] = []  # newest first, as drawn
        self._room = 0

    LABELS = ("time", "job", "operation", "event", "what", "actor")
    FLEX = (4, 2, 1)
    """What happened takes the free room; when room is short it, the operation, then the job id give way (each
    cut with an ellipsis, never silently)."""
    MINIMUM = (8, 10, 8, 8, 20, 6)

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        if self.size.width != self._room:
            self._draw(relayout=True)

    def replace(self, events: Iterable[Event]) -> None:
        """Show exactly these events (oldest first)."""
        self._events = list(events)[-self.limit :]
        self._draw()

    def push(self, events: Iterable[Event]) -> None:
        """Add new events (oldest first), dropping the oldest beyond `size`."""
        self._events = (self._events + list(events))[-self.limit :]
        self._draw()

    @property
    def shown(self) -> list[Event]:
        """The events as drawn, newest first."""
        return list(self._shown)

    def event_at_cursor(self) -> Event | None:
        """The event under the cursor, if any."""
        return self._shown[self.cursor_row] if 0 <= self.cursor_row < len(self._shown) else None

    def _draw(self, relayout: bool = False) -> None:
        if not self.is_mounted:
            return
        newest_first = list(reversed(self._events))
        if newest_first == self._shown and not relayout and self.columns:
            return
        selected = self.event_at_cursor() if self.cursor_row > 0 else None
        self._shown = newest_first
        rows = [
            tuple(ellipsised(cell) for cell in (
                Text(clock_time(e.at, self.tz)),
                safe_text(e.job_id, 200),
                safe_text(e.operation, 80),
                safe_text(e.kind, 30),
                feed_summary(e) or transition(e),
                safe_text(e.actor, 60),
            ))
            for e in newest_first
        ]
        self._room = self.size.width
        widths = fit_widths(self.LABELS, rows, self._room or 120, flex=self.FLEX, minimum=self.MINIMUM,
                            maximum=(8, 60, 40, 30, 200, 30))
        self.clear(columns=True)
        for label, width in zip(self.LABELS, widths, strict=True):
            self.add_column(ellipsised(Text(label)), width=width, key=label)
        self.add_rows(rows)
        if selected is not None:  # keep the cursor on the same event as newer ones push it down
            row = next((i for i, e in enumerate(newest_first) if e.id == selected.id), None)
            if row:
                self.move_cursor(row=row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        chosen = self._shown[event.cursor_row] if 0 <= event.cursor_row < len(self._shown) else None
        if chosen is not None:
            self.post_message(self.Opened(JobKey(chosen.job_id, chosen.operation)))
