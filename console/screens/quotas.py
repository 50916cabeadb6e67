"""Quotas: per operation the last 14 days, today's use and limit, and how many of its jobs are held."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Label
from textual.worker import get_current_worker

from console.bindings import QUOTAS
from console.screens.base import ReclaimScreen
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from console.widgets.quota_history import QuotaHistory
from ledger import QuotaData


class QuotasScreen(ReclaimScreen):
    """One block per declared operation, with a 14-day sparkline."""

    BINDINGS = QUOTAS

    class Loaded(Message):
        """The quota history arrived."""

        def __init__(self, data: QuotaData) -> None:
            self.data = data
            super().__init__()

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with VerticalScroll(id="quotas-body"):
            yield Label("Quotas — last 14 days per operation (today on the right)", classes="panel-title")
            for i, name in enumerate(sorted(self.reclaim.config.operations)):
                yield QuotaHistory(name, id=f"quota-{i}")
        yield KeyFooter()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="quotas")
    def load(self) -> None:
        """Read 14 days of quota use and the held count per operation off the UI thread."""
        app = self.reclaim
        with app.ledger() as ledger:
            data = ledger.quotas()
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(data))

    def on_quotas_screen_loaded(self, message: Loaded) -> None:
        for block in self.query(QuotaHistory):
            days = message.data.history.get(block.operation)
            if days:
                block.show(days, message.data.held.get(block.operation, 0))
        self.loaded = True
