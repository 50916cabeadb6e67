"""One operation's quota: today's use and limit, held count, and a 14-day sparkline."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Sparkline

from console.sanitize import safe_text
from console.widgets.quota_table import quota_bar
from ledger import QuotaDay


class QuotaHistory(Vertical):
    """A titled block: `name  used/limit  remaining  held`, a bar, and the sparkline of the last days."""

    DEFAULT_CSS = """
    QuotaHistory { height: auto; border: round $panel-lighten-2; padding: 0 1; margin-bottom: 1; }
    QuotaHistory > .qh-title { text-style: bold; }
    QuotaHistory > Sparkline { height: 3; margin: 0 0; }
    QuotaHistory > .qh-axis { color: $text-muted; }
    """

    def __init__(self, operation: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.operation = operation

    def compose(self) -> ComposeResult:
        yield Label(safe_text(self.operation, 60), classes="qh-title")
        yield Label("", classes="qh-today")
        yield Sparkline([0], summary_function=max)
        yield Label("", classes="qh-axis")

    def show(self, days: list[QuotaDay], held: int) -> None:
        """Draw the days (oldest first, today last) and the held count."""
        today = days[-1]
        self.query_one(".qh-today", Label).update(
            Text.assemble(
                ("today ", "dim"), (f"{today.used:,} / {today.limit:,}", "bold"), "  ",
                quota_bar(today.used, today.limit, 30), "  ",
                (f"{today.remaining:,} remaining", "red" if today.remaining == 0 else ""), "  ",
                (f"{held:,} held", "bold red" if held else "dim"),
            )
        )
        self.query_one(Sparkline).data = [d.used for d in days]
        peak = max(d.used for d in days)
        self.query_one(".qh-axis", Label).update(
            Text(f"{days[0].day} … {today.day}  ·  {len(days)} days  ·  peak {peak:,}/day  ·  total {sum(d.used for d in days):,}")
        )
