"""The first screen: counts per group, the held jobs oldest first, today's quotas, how the system copes (holds begun
and ended per hour over the last 24 hours, by reclaim or by a person, time to decision), and the latest events."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.message import Message
from textual.widgets import Label
from textual.worker import get_current_worker

from console.bindings import OVERVIEW
from console.live import Pulse
from console.screens.base import ReclaimScreen, job_left_text
from console.widgets.coping_panel import CopingPanel
from console.widgets.event_feed import EventFeed
from console.widgets.feedback_line import FeedbackLine
from console.widgets.group_counts import GroupCounts
from console.widgets.group_tile import GroupTile
from console.widgets.held_table import HeldTable
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from console.widgets.quota_table import QuotaTable
from ledger import JobKey, OverviewData


class OverviewScreen(ReclaimScreen):
    """What is held and for how long, what today's quotas look like, how the system copes, and what just happened."""

    BINDINGS = OVERVIEW
    AUTO_FOCUS = "#held-table"

    class Loaded(Message):
        """The overview's paged reads arrived."""

        def __init__(self, data: OverviewData) -> None:
            self.data = data
            super().__init__()

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        yield GroupCounts(holds_resolved=True, id="overview-counts")
        with Vertical(id="overview-held", classes="panel"):
            yield Label(self.held_title(), id="held-title", classes="panel-title")
            yield HeldTable(id="held-table")
        with Container(id="overview-lower"):
            with Vertical(id="overview-left"):
                quotas = Vertical(id="overview-quotas", classes="panel")
                quotas.border_title = "Today's quota per operation"
                with quotas:
                    yield QuotaTable(id="quota-table")
                coping = CopingPanel(id="overview-coping", classes="panel")
                coping.border_title = "How the system copes — last 24 h, an hour a step"
                yield coping
            events = Vertical(id="overview-events", classes="panel")
            events.border_title = "Latest events, newest first (Enter opens the event's job)"
            with events:
                yield EventFeed(size=20, tz=self.reclaim.config.timezone, id="event-feed")
        yield FeedbackLine(id="feedback")
        yield KeyFooter()

    def held_title(self, shown: int | None = None) -> Text:
        """'Held jobs — 4 held, oldest first …', or '50 of 312 held — j for all' when the panel shows fewer."""
        counts = self.reclaim.counts
        total = counts.get("held", 0) if counts is not None else None
        text = Text("Held jobs — ", style="bold")
        if shown is not None and total is not None and shown < total:
            key = self.reclaim.keymap.keys.get("app.jobs", "j")
            text.append(f"{shown} of {total:,} held — {key} for all", style="bold")
        elif total is not None:
            text.append(f"{total:,} held")
        else:
            text.append("reading…")
        text.append(" · outcome unknown, oldest first (Enter opens, t triages)", style="not bold")
        return text

    def _show_held_title(self) -> None:
        table = self.query_one(HeldTable)
        self.query_one("#held-title", Label).update(self.held_title(table.row_count if self.loaded else None))

    def resumed(self) -> None:
        app = self.reclaim
        if app.counts is not None:
            self.query_one(GroupCounts).show_counts(app.counts)
        self._show_held_title()
        self.query_one(EventFeed).replace(app.feed)
        self.reload()

    def ledger_changed(self, pulse: Pulse) -> None:
        self.query_one(GroupCounts).show_counts(pulse.counts)
        self._show_held_title()
        feed = self.query_one(EventFeed)
        if pulse.reset:
            feed.replace(pulse.events)
        else:
            feed.push(pulse.events)
        self.reload()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="overview")
    def load(self) -> None:
        """Read the held jobs, today's quotas and how the system copes (paged, indexed queries) off the UI thread."""
        app = self.reclaim
        with app.ledger() as ledger:
            data = ledger.overview()
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(data))

    def on_overview_screen_loaded(self, message: Loaded) -> None:
        if not self.in_view:
            return  # covered since the read began: drawing now would repaint the screen on top; resume re-reads
        app = self.reclaim
        self.query_one(HeldTable).show_jobs(message.data.held, app.clock.now(), message.data.stages)
        self.query_one(QuotaTable).show_quotas(message.data.quotas)
        coping = message.data.coping
        if coping is not None:
            self.query_one(CopingPanel).show(coping)
            self.query_one(GroupCounts).show_holds_resolved(coping.resolved)
        if not self.loaded:
            app.call_after_refresh(app.prepare_job_list)
        self.loaded = True
        self._show_held_title()
        self.refresh_bindings()  # `t` is enabled only while a held job is at the cursor

    def on_held_table_opened(self, message: HeldTable.Opened) -> None:
        self.reclaim.open_job(message.key)

    def on_held_table_job_left(self, message: HeldTable.JobLeft) -> None:
        self.feedback(job_left_text(message.key, message.now_on, "the held jobs", self.reclaim.feed))

    def on_event_feed_opened(self, message: EventFeed.Opened) -> None:
        self.reclaim.open_job(message.key)

    def on_group_tile_selected(self, message: GroupTile.Selected) -> None:
        self.reclaim.show_group(message.group)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "triage":
            return True if self.held_at_cursor() is not None else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        if action == "triage":
            return "no held job to triage" if self.loaded else "the held jobs are still being read"
        return super().disabled_reason(action, params)

    def held_at_cursor(self) -> JobKey | None:
        """The held job under the held table's cursor (None before the first read or when none is held)."""
        tables = self.query(HeldTable)
        return tables.first().key_at_cursor() if tables else None

    def action_triage(self) -> None:
        """Open guided triage for the held job at the cursor."""
        key = self.held_at_cursor()
        if key is not None:
            self.reclaim.open_triage(key)

    def action_focus_held(self) -> None:
        """Move the cursor to the held jobs."""
        self.query_one(HeldTable).focus()

    def action_focus_events(self) -> None:
        """Move the cursor to the latest events (Enter opens an event's job)."""
        self.query_one(EventFeed).focus()
