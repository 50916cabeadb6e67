"""The job list's typed filter: `owner:me op:article.* target:bucket-* reason:timeout free text`."""

from __future__ import annotations

from textual.widgets import Input


class FilterBar(Input):
    """An input for `JobFilter.parse` syntax; Escape hands focus back to the table."""

    DEFAULT_CSS = """
    FilterBar { height: 3; border: round $panel-lighten-2; }
    FilterBar:focus { border: round $accent; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="/ to filter: [group] owner:me op:article.* target:bucket-* reason:timeout words…",
            id=id,
            select_on_focus=False,
        )

    def key_escape(self) -> None:
        self.screen.focus_next()
