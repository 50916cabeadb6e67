"""The overview's held jobs: oldest hold first, with age, reason, owner, due and target."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import age
from console.sanitize import safe_text
from console.widgets.column_fit import columns_in_use, ellipsised, fit_widths
from ledger import INVALID, Job, JobKey, Stage, valid_time


def stage_text(words: str) -> Text:
    """A stage as a cell: awaiting approval stands out (someone can act now)."""
    return safe_text(words, 120, style="bold yellow" if words.startswith("awaiting") else "")


def short_stage(words: str) -> str:
    """A stage in the fewest words, for a narrow table: 'approve (alice)', 'assigned to bob', 'needs finding' (the
    owner and due time have their own columns, and the job screen says it whole)."""
    prefix = "awaiting approval (finding by "
    if words.startswith(prefix) and words.endswith(")"):
        return f"approve ({words[len(prefix):-1]})"
    if words.startswith("assigned to "):
        return words.split(", due ", 1)[0]
    return "needs finding" if words == "needs a finding" else words


def narrow_rows(labels: list[str], rows: list[tuple[Text, ...]]) -> list[tuple[Text, ...]]:
    """`rows` with their stage cells (when `labels` has a stage column) in their short words."""
    if "stage" not in labels:
        return rows
    i = labels.index("stage")
    return [(*row[:i], ellipsised(stage_text(short_stage(row[i].plain))), *row[i + 1:]) for row in rows]


def short_reason(reason: str) -> str:
    """'send outcome unknown (timeout)' -> 'timeout': the table says 'held' already."""
    prefix = "send outcome unknown ("
    if reason.startswith(prefix) and reason.endswith(")"):
        return reason[len(prefix) : -1]
    return reason


class HeldTable(DataTable[Text]):
    """Held jobs as rows; an overdue due time stands out; Enter opens the job.

    The cursor follows its job, not its row, when the rows change (a job above it resolved, a new hold): when
    its job left the list, the cursor stays at that row and `JobLeft` says which job went.
    """

    DEFAULT_CSS = """
    HeldTable { height: 1fr; }
    """

    class Opened(Message):
        """A held job was chosen."""

        def __init__(self, key: JobKey) -> None:
            self.key = key
            super().__init__()

    class JobLeft(Message):
        """The job under the cursor is no longer in the list; the cursor is now on `now_on` (None: empty list)."""

        def __init__(self, key: JobKey, now_on: JobKey | None) -> None:
            self.key = key
            self.now_on = now_on
            super().__init__()

    LABELS = ("age", "job", "stage", "operation", "reason held", "owner", "due", "target")
    FLEX = (4, 7, 3, 2, 1)
    """The reason takes the free room; when room is short the reason, the target, the operation, the stage, then the
    job id give way (each cut with an ellipsis)."""
    MINIMUM = (5, 10, 8, 8, 10, 5, 5, 6)
    HIDEABLE = ("owner", "due", "target")
    """Columns drawn only when some row has something in them."""
    NARROW = 100
    NARROW_HIDDEN = ("operation", "target", "owner")
    """Below NARROW cells the operation, the target and the owner give their room to the id and the stage, which
    then says who owns it in its short words (the job screen, Enter, has them whole, with the full id)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._keys: dict[str, JobKey] = {}
        self._shown: list[tuple[Job, str, str, str]] | None = None
        self._rows: list[tuple[Text, ...]] = []
        self._room = 0

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        if self.size.width != self._room:
            self._draw()

    def key_at_cursor(self) -> JobKey | None:
        """The held job under the cursor, if any."""
        return self._keys.get(str(self.cursor_row)) if self.row_count else None

    def column_widths(self) -> list[int]:
        """The widths the columns are drawn at now (tests read them)."""
        return [column.width for column in self.columns.values()]

    def _draw(self) -> None:
        """Lay the columns out for the rows and the room there is, and put the rows back (cursor kept)."""
        self._room = self.size.width
        use = columns_in_use(self.LABELS, self._rows, hideable=self.HIDEABLE)
        if 0 < self._room < self.NARROW:
            use = [i for i in use if self.LABELS[i] not in self.NARROW_HIDDEN]
        labels = [self.LABELS[i] for i in use]
        rows = [tuple(row[i] for i in use) for row in self._rows]
        if 0 < self._room < self.NARROW:
            rows = narrow_rows(labels, rows)
        flex = [use.index(i) for i in self.FLEX if i in use]
        widths = fit_widths(labels, rows, self._room or 100, flex=flex, minimum=[self.MINIMUM[i] for i in use])
        row = self.cursor_row
        self.clear(columns=True)
        for label, width in zip(labels, widths, strict=True):
            self.add_column(ellipsised(Text(label)), width=width, key=label)
        for i, cells in enumerate(rows):
            self.add_row(*cells, key=str(i))
        if self._rows and row > 0:
            self.move_cursor(row=min(row, len(self._rows) - 1))

    def show_jobs(self, jobs: list[Job], now: float, stages: dict[JobKey, Stage] | None = None) -> None:
        """Replace the rows (with each job's stage, who it waits for), keeping the cursor on the same job (no redraw
        when they read the same)."""
        stages = stages or {}
        dues: list[Text] = []
        for job in jobs:
            if job.due_at is None:
                dues.append(Text("—", style="dim"))
            elif not valid_time(job.due_at):
                dues.append(Text(INVALID, style="bold red"))
            elif job.due_at <= now:
                dues.append(Text(f"overdue {age(now - job.due_at)}", style="bold red"))
            else:
                dues.append(Text(f"in {age(job.due_at - now)}"))
        ages = [age(now - (job.held_at if job.held_at is not None else job.created_at)) for job in jobs]
        words = [stages[job.key].words if job.key in stages else "" for job in jobs]
        shown = [(job, when, due.plain, said) for job, when, due, said in zip(jobs, ages, dues, words, strict=True)]
        if shown == self._shown:
            return
        self._shown = shown
        row = self.cursor_row
        was_on = self.key_at_cursor()
        self._keys = {str(i): job.key for i, job in enumerate(jobs)}
        self._rows = [
            tuple(ellipsised(cell) for cell in (
                Text(when),
                safe_text(job.job_id, 200),
                stage_text(said),
                safe_text(job.operation, 80),
                # the job screen has it whole
                safe_text(short_reason(job.held_reason or job.last_error or ""), 300, prose=True),
                safe_text(job.owner, 60) if job.owner else Text("—", style="dim"),
                due,
                safe_text(job.target, 200),
            ))
            for job, when, due, said in zip(jobs, ages, dues, words, strict=True)
        ]
        self._draw()
        keys = [job.key for job in jobs]
        if was_on in keys:
            row = keys.index(was_on)
        if jobs:
            self.move_cursor(row=min(row, len(jobs) - 1))
        if was_on is not None and was_on not in keys:
            self.post_message(self.JobLeft(was_on, self.key_at_cursor()))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = self._keys.get(str(event.row_key.value))
        if key is not None:
            self.post_message(self.Opened(key))
