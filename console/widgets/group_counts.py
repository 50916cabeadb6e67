"""The row of group counts: reserving, submitted, done, consumed, held, failed, resolved.

On the overview the resolved tile counts every hold ended so far (by reclaim on the remote's evidence, or by a
person), not the jobs a person rejected or remediated: a hold the evidence ended is resolved too."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive

from console.bindings import GROUP_ORDER
from console.widgets.group_tile import GroupTile


class GroupCounts(Horizontal):
    """A tile per group with its live count; `current` highlights the group being listed."""

    DEFAULT_CSS = """
    GroupCounts { height: 3; }
    """

    current: reactive[str | None] = reactive(None)

    def __init__(self, *, holds_resolved: bool = False, id: str | None = None) -> None:
        """`holds_resolved`: the resolved tile shows `show_holds_resolved`'s count (holds ended), which
        `show_counts` then leaves alone."""
        super().__init__(id=id)
        self.holds_resolved = holds_resolved

    def compose(self) -> ComposeResult:
        keymap = getattr(self.app, "keymap", None)
        keys = keymap.keys if keymap is not None else {}
        for i, group in enumerate(GROUP_ORDER, start=1):
            key = keys.get(f"app.group.{group}", str(i))
            yield GroupTile(group, key, group, id=f"group-{group}")

    def show_counts(self, counts: dict[str, int]) -> None:
        """Update every tile from a `queries.group_counts` result (not the resolved tile when it counts holds)."""
        for tile in self.query(GroupTile):
            if not (self.holds_resolved and tile.group == "resolved"):
                tile.count = counts.get(tile.group, 0)

    def show_holds_resolved(self, ended: int) -> None:
        """Show `ended`, every hold ended so far, on the resolved tile, subtitled as holds (when `holds_resolved`)."""
        if self.holds_resolved:
            tile = self.query_one("#group-resolved", GroupTile)
            tile.count = ended
            tile.border_subtitle = "holds ended"

    def count_of(self, group: str) -> int | None:
        """The count a tile shows now (None before the first read)."""
        return self.query_one(f"#group-{group}", GroupTile).count

    def watch_current(self, current: str | None) -> None:
        for tile in self.query(GroupTile):
            tile.set_class(tile.group == current, "-current")
