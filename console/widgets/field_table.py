"""Label / value rows drawn as a Rich table of `Text` (values are never parsed as markup)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static


class FieldTable(Static):
    """Show `(label, value)` pairs; values must already be `Text` from the sanitiser."""

    DEFAULT_CSS = """
    FieldTable { height: auto; padding: 0 1; }
    """

    def show(self, rows: list[tuple[str, Text]], columns: int = 1) -> None:
        """Replace the rows; `columns` pairs per line."""
        table = Table.grid(padding=(0, 2), expand=True)
        for _ in range(columns):
            table.add_column(style="bold", no_wrap=True)
            table.add_column(ratio=1, overflow="fold")
        for i in range(0, len(rows), columns):
            cells: list[Text] = []
            for label, value in rows[i : i + columns]:
                cells += [Text(label), value]
            table.add_row(*cells)
        self.update(table)
