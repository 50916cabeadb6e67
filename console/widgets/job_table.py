"""One page of a group's jobs."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import age
from console.sanitize import safe_text
from console.widgets.column_fit import columns_in_use, ellipsised, fit_widths
from console.widgets.held_table import narrow_rows, stage_text
from ledger import Job, JobKey, JobPage

MARK = "● "
"""Before a marked job's id."""


class JobTable(DataTable[Text]):
    """A page of jobs (age, id, operation, state, target, owner, attempt, last word); Enter opens one.

    When the same page is read again (a live update), the cursor follows its job, not its row; when its job left
    the page, the cursor stays at that row and `JobLeft` says which job went.
    """

    DEFAULT_CSS = """
    JobTable { height: 1fr; overflow-y: scroll; }
    """

    class Opened(Message):
        """A job was chosen."""

        def __init__(self, key: JobKey) -> None:
            self.key = key
            super().__init__()

    class JobLeft(Message):
        """On a re-read of the same page, the job under the cursor is gone from it; the cursor is on `now_on`."""

        def __init__(self, key: JobKey, now_on: JobKey | None) -> None:
            self.key = key
            self.now_on = now_on
            super().__init__()

    class SortRequested(Message):
        """A column header was clicked: `sort` is its sort key (`ledger.SORTS`), None for a column the ledger cannot
        sort by (the stage, computed from a job's events); `label` is the column's."""

        def __init__(self, sort: str | None, label: str) -> None:
            self.sort = sort
            self.label = label
            super().__init__()

    LABELS = ("age", "job", "operation", "state", "stage", "target", "owner", "try", "last word")
    SORT_OF: ClassVar[dict[str, str]] = {"age": "age", "job": "job", "operation": "operation", "state": "state", "target": "target",
               "owner": "owner", "try": "attempt", "last word": "reason"}
    """Each column's sort key (`ledger.SORTS`); the stage has none (it is not a column of the ledger's jobs)."""
    ARROWS = ("▲", "▼")
    """After the sorted column's label: ascending, descending."""
    FLEX = (8, 5, 4, 2, 1)
    """The last word takes the free room; when room is short it, the target, the stage, the operation, then the job
    id give way (each cut with an ellipsis, never silently)."""
    MINIMUM = (5, 10, 8, 5, 8, 6, 5, 3, 10)
    HIDEABLE = ("stage", "target", "owner")
    """Columns drawn only when some row on the page has something in them."""
    NARROW = 100
    NARROW_HIDDEN = ("operation", "target", "try", "owner")
    """Below NARROW cells these give their room to the id and the stage, which says its short words (Enter opens
    the job, whole)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._keys: list[JobKey] = []
        self._jobs: list[Job] = []
        self._shown: list[tuple[Job, str, str]] | None = None
        self._rows: list[tuple[Text, ...]] = []
        self._room = 0
        self.marks: set[JobKey] = set()
        """The jobs shown marked (for a batch decision)."""
        self.sorted_by: tuple[str, bool] = ("age", True)
        """The sort key of the rows shown and whether ascending (the sorted column's label has an arrow)."""

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        if self.size.width != self._room:
            row = self.cursor_row
            self._draw()
            if row > 0 and self._rows:
                self.move_cursor(row=min(row, len(self._rows) - 1))

    def column_widths(self) -> list[int]:
        """The widths the columns are drawn at now (tests read them)."""
        return [column.width for column in self.columns.values()]

    def _draw(self) -> None:
        """Lay the columns out for the rows and the room there is, and put the rows in (cursor on the first)."""
        self._room = self.size.width
        use = columns_in_use(self.LABELS, self._rows, hideable=self.HIDEABLE)
        if 0 < self._room < self.NARROW:
            use = [i for i in use if self.LABELS[i] not in self.NARROW_HIDDEN]
        labels = [self.LABELS[i] for i in use]
        sort, ascending = self.sorted_by
        heads = [f"{label}{self.ARROWS[0 if ascending else 1]}" if self.SORT_OF.get(label) == sort else label
                 for label in labels]
        rows = [tuple(row[i] for i in use) for row in self._rows]
        if 0 < self._room < self.NARROW:
            rows = narrow_rows(labels, rows)
        flex = [use.index(i) for i in self.FLEX if i in use]
        widths = fit_widths(heads, rows, self._room or 120, flex=flex, minimum=[self.MINIMUM[i] for i in use])
        self.clear(columns=True)
        for label, head, width in zip(labels, heads, widths, strict=True):
            self.add_column(ellipsised(Text(head)), width=width, key=label)
        self.add_rows(rows)

    def show_page(self, page: JobPage, now: float, *, follow: bool = False) -> None:
        """Replace the rows with `page` (nothing is redrawn when the rows read the same as those shown).

        `follow`: the page is the one shown, read again; keep the cursor on its job (say so if the job left).
        """
        shown = [(job, age(now - job.created_at), page.stages[job.key].words if job.key in page.stages else "")
                 for job in page.jobs]
        if shown == self._shown and (page.sort, page.oldest_first) == self.sorted_by:
            return
        self._shown = shown
        self.sorted_by = (page.sort, page.oldest_first)
        row = self.cursor_row
        was_on = self.key_at_cursor() if follow else None
        self._keys = [job.key for job in page.jobs]
        self._jobs = list(page.jobs)
        self._rows = self._cells(shown)
        self._draw()
        if was_on in self._keys:
            row = self._keys.index(was_on)
        if row > 0 and page.jobs:  # clear() put the cursor on the first row; moving it there again scrolls
            self.move_cursor(row=min(row, len(page.jobs) - 1))
        if was_on is not None and was_on not in self._keys:
            self.post_message(self.JobLeft(was_on, self.key_at_cursor()))

    def set_marks(self, marks: set[JobKey]) -> None:
        """Show `marks` (the jobs a batch will act on) with a mark before their id; the cursor stays where it is."""
        if marks == self.marks:
            return
        self.marks = set(marks)
        if self._shown is None:
            return
        row = self.cursor_row
        self._rows = self._cells(self._shown)
        self._draw()
        if row > 0 and self._rows:
            self.move_cursor(row=min(row, len(self._rows) - 1))

    def _id_cell(self, job: Job) -> Text:
        if job.key in self.marks:
            return Text.assemble((MARK, "bold yellow"), safe_text(job.job_id, 200))
        return safe_text(job.job_id, 200)

    def _cells(self, shown: list[tuple[Job, str, str]]) -> list[tuple[Text, ...]]:
        return [
            tuple(ellipsised(cell) for cell in (
                Text(when),
                self._id_cell(job),
                safe_text(job.operation, 80),
                Text(job.state, style="bold red" if job.state == "held" else ""),
                stage_text(said),
                safe_text(job.target, 200),
                safe_text(job.owner, 60),
                Text(str(job.attempt)),
                safe_text(job.held_reason or job.last_error or job.handle or "", 300,
                          prose=bool(job.held_reason or job.last_error)),  # the job screen has it whole
            ))
            for job, when, said in shown
        ]

    def key_at_cursor(self) -> JobKey | None:
        """The job under the cursor, if any."""
        return self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None

    def job_at_cursor(self) -> Job | None:
        """The job (as last read) under the cursor, if any."""
        return self._jobs[self.cursor_row] if 0 <= self.cursor_row < len(self._jobs) else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._keys):
            self.post_message(self.Opened(self._keys[event.cursor_row]))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        label = str(event.column_key.value)
        self.post_message(self.SortRequested(self.SORT_OF.get(label), label))

    def visible_keys(self) -> list[JobKey]:
        """The keys of the jobs shown, top to bottom (tests read them)."""
        return list(self._keys)
