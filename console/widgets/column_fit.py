"""Column widths for the console's tables: every column as wide as its content, the flexible one (a job id, a
reason) taking the room that is left, and cut with an ellipsis (never silently) when the room is short.

Not a widget: the tables call `fit_widths` from their own resize and redraw.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text

CELL_PADDING = 1
"""DataTable's default padding either side of a cell."""
SCROLLBAR = 2
"""Room kept for the vertical scrollbar (DataTable's default width)."""


def ellipsised(text: Text) -> Text:
    """`text` set to end with '…' where its column cuts it, on one line."""
    text.overflow = "ellipsis"
    text.no_wrap = True
    return text


def fit_widths(
    labels: Sequence[str], rows: Sequence[Sequence[Text]], room: int, *, flex: Sequence[int],
    minimum: Sequence[int] | None = None, maximum: Sequence[int] | None = None,
) -> list[int]:
    """Widths for `labels` columns holding `rows` in `room` cells (padding and the scrollbar included).

    Each column starts at its content's width (header included, capped by `maximum`). When they do not fit, the
    `flex` columns shrink, in the order listed, down to `minimum` (then the rest shrink, widest first, to
    theirs); when room is left, the first `flex` column takes it.
    """
    n = len(labels)
    mins = list(minimum) if minimum is not None else [min(cell_len(label), 6) for label in labels]
    maxs = list(maximum) if maximum is not None else [200] * n
    widths = [cell_len(label) for label in labels]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(cell.plain.split("\n", 1)[0]))
    widths = [max(mins[i], min(w, maxs[i])) for i, w in enumerate(widths)]
    usable = max(room - SCROLLBAR - 2 * CELL_PADDING * n, n)
    over = sum(widths) - usable
    for i in [*flex, *sorted((j for j in range(n) if j not in flex), key=lambda j: -widths[j])]:
        if over <= 0:
            break
        cut = min(over, widths[i] - mins[i])
        if cut > 0:
            widths[i] -= cut
            over -= cut
    if over < 0 and flex:
        widths[flex[0]] += -over
    return widths


EMPTY_CELLS = frozenset({"", "—"})


def columns_in_use(labels: Sequence[str], rows: Sequence[Sequence[Text]], *, hideable: Sequence[str]) -> list[int]:
    """The indexes of the columns to draw: every column but a `hideable` one that is empty (or '—') on every row,
    so an empty owner, due or target column gives its room to the ids and reasons. With no rows, all of them."""
    if not rows:
        return list(range(len(labels)))
    return [i for i, label in enumerate(labels)
            if label not in hideable or any(row[i].plain.strip() not in EMPTY_CELLS for row in rows)]
