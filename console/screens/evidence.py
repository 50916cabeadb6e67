"""Orphan evidence: signed webhook deliveries (and other evidence) that name no job of this ledger.

A delivery names only an interaction id; a worker pass reads the interaction's own record to find its job.
One it cannot attribute is kept rather than dropped, with the reason: the remote no longer keeps the
record, the record echoes no idem key, or the idem key is another ledger's. This screen lists them, newest
first; a held job is reconciled with one in one step by giving `evidence:ID` as the handle.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label
from textual.worker import get_current_worker

from console.bindings import EVIDENCE
from console.live import clock_time
from console.sanitize import safe_text
from console.screens.base import ReclaimScreen
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import Evidence


class EvidenceScreen(ReclaimScreen):
    """The orphan evidence table (read-only)."""

    BINDINGS = EVIDENCE

    class Loaded(Message):
        """The orphan evidence arrived."""

        def __init__(self, rows: list[Evidence]) -> None:
            self.rows = rows
            super().__init__()

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with Vertical(id="evidence-body"):
            yield Label("Orphan evidence — deliveries that name no job here; reconcile a held job with "
                        "handle evidence:ID", classes="panel-title")
            yield DataTable(id="evidence-table", cursor_type="row", zebra_stripes=True)
            yield Label("", id="evidence-empty")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#evidence-table", DataTable)
        table.add_columns("id", "received", "handle", "says", "why")

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="evidence")
    def load(self) -> None:
        """Read the orphan evidence off the UI thread."""
        app = self.reclaim
        with app.ledger() as ledger:
            rows = ledger.orphan_evidence()
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(rows))

    def on_evidence_screen_loaded(self, message: Loaded) -> None:
        tz = self.reclaim.config.timezone
        table = self.query_one("#evidence-table", DataTable)
        table.clear()
        for ev in message.rows:
            table.add_row(
                Text(f"evidence:{ev.id}"), Text(clock_time(ev.at, tz, with_date=True)), safe_text(ev.handle or "", 80),
                Text(ev.remote_state), safe_text(ev.outcome or "awaiting attribution by the next worker pass", 120),
            )
        self.query_one("#evidence-empty", Label).update(
            "" if message.rows else Text("None: every piece of evidence names a job in this ledger.", style="dim")
        )
        self.loaded = True
