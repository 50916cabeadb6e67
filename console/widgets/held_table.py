"""The overview's held jobs: oldest hold first, with age, reason, owner, due and target."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import age
from console.sanitize import safe_text
from ledger.clock import INVALID, valid_time
from ledger.model import Job, JobKey


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

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._keys: dict[str, JobKey] = {}
        self._shown: list[tuple[Job, str, str]] | None = None

    def on_mount(self) -> None:
        for label, width in (("age", 7), ("job", 18), ("operation", 16), ("reason held", 27), ("owner", 8),
                             ("due", 11), ("target", 15)):
            self.add_column(label, width=width, key=label)

    def key_at_cursor(self) -> JobKey | None:
        """The held job under the cursor, if any."""
        return self._keys.get(str(self.cursor_row)) if self.row_count else None

    def show_jobs(self, jobs: list[Job], now: float) -> None:
        """Replace the rows, keeping the cursor on the same job (no redraw when they read the same)."""
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
        shown = [(job, when, due.plain) for job, when, due in zip(jobs, ages, dues, strict=True)]
        if shown == self._shown:
            return
        self._shown = shown
        row = self.cursor_row
        was_on = self.key_at_cursor()
        self.clear()
        self._keys.clear()
        for i, (job, when, due) in enumerate(zip(jobs, ages, dues, strict=True)):
            rk = str(i)
            self._keys[rk] = job.key
            reason = safe_text(short_reason(job.held_reason or job.last_error or ""), 80)
            reason.overflow = "ellipsis"  # the job screen has it whole
            self.add_row(
                Text(when),
                safe_text(job.job_id, 60),
                safe_text(job.operation, 40),
                reason,
                safe_text(job.owner, 30) if job.owner else Text("—", style="dim"),
                due,
                safe_text(job.target, 60),
                key=rk,
            )
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
