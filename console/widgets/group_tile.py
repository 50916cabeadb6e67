"""One group's count on the overview (and the job list): a tile that opens the group when clicked."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static


def fit_label(label: str, room: int) -> str:
    """`label` whole when it fits in `room` cells, else shortened with a full stop ('reserving' -> 'reser.'),
    never below three letters: a tile keeps its state's name recognisable at 80 columns."""
    if room <= 0 or len(label) <= room:
        return label
    return label[: max(room - 1, 3)] + "."


class GroupTile(Static):
    """A group name, its key, and its job count; highlighted when current, red when held jobs wait."""

    DEFAULT_CSS = """
    GroupTile {
        width: 1fr;
        height: 3;
        border: round $panel-lighten-2;
        content-align: center middle;
        text-align: center;
    }
    GroupTile:hover { background: $boost; }
    GroupTile.-current { border: round $accent; background: $boost; }
    GroupTile.-alert { border: round $error; color: $error; text-style: bold; }
    """

    count: reactive[int | None] = reactive(None)

    class Selected(Message):
        """The tile was clicked."""

        def __init__(self, group: str) -> None:
            self.group = group
            super().__init__()

    def __init__(self, group: str, key: str, label: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.group = group
        self.key = key
        self.label = label

    def render(self) -> Text:
        n = "…" if self.count is None else f"{self.count:,}"
        return Text.assemble((n, "bold"), " ", fit_label(self.label, self.content_size.width - len(n) - 1))

    def watch_count(self, count: int | None) -> None:
        self.set_class(self.group == "held" and bool(count), "-alert")

    def on_mount(self) -> None:
        self.border_title = self.key
        if self.group == "held":
            self.border_subtitle = "uncertain"

    def on_click(self) -> None:
        self.post_message(self.Selected(self.group))
