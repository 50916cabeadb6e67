"""Today's quota per operation: used / limit, remaining, and a bar."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from console.sanitize import safe_text
from ledger import QuotaDay


def quota_bar(used: int, limit: int, width: int = 24) -> Text:
    """A bar of `width` cells; amber past 80 %, red when used up."""
    frac = 1.0 if limit <= 0 else min(used / limit, 1.0)
    filled = round(frac * width)
    style = "red" if frac >= 1.0 else "yellow" if frac >= 0.8 else "green"
    return Text.assemble(("█" * filled, style), ("░" * (width - filled), "dim"))


class QuotaTable(DataTable[Text]):
    """One row per declared operation for today."""

    DEFAULT_CSS = """
    QuotaTable { height: auto; max-height: 8; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="none", show_cursor=False)

    def on_mount(self) -> None:
        for label, width in (("operation", 24), ("used / limit", 14), ("remaining", 10), ("today", 26)):
            self.add_column(label, width=width, key=label)

    def show_quotas(self, quotas: list[QuotaDay]) -> None:
        """Replace the rows."""
        self.clear()
        for q in quotas:
            self.add_row(
                safe_text(q.operation, 40),
                Text(f"{q.used:,} / {q.limit:,}"),
                Text(f"{q.remaining:,}", style="red" if q.remaining == 0 else ""),
                quota_bar(q.used, q.limit),
                key=q.operation,
            )
