"""One page of a group's jobs."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import JobPage, age
from console.sanitize import safe_text
from ledger.model import Job, JobKey


def _clipped(text: Text) -> Text:
    """End with an ellipsis where the column cuts the text (the job screen shows it whole)."""
    text.overflow = "ellipsis"
    return text


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
        """The age column header was clicked."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._keys: list[JobKey] = []
        self._jobs: list[Job] = []
        self._shown: list[tuple[Job, str]] | None = None

    def on_mount(self) -> None:
        # 102 columns of text + 16 of padding + the scrollbar: the page fits a 120-column terminal, so no
        # horizontal scrollbar, and no cell is drawn off-screen.
        for label, width in (("age", 7), ("job", 26), ("operation", 16), ("state", 10), ("target", 15),
                             ("owner", 8), ("try", 3), ("last word", 17)):
            self.add_column(label, width=width, key=label)

    def show_page(self, page: JobPage, now: float, *, follow: bool = False) -> None:
        """Replace the rows with `page` (nothing is redrawn when the rows read the same as those shown).

        `follow`: the page is the one shown, read again; keep the cursor on its job (say so if the job left).
        """
        shown = [(job, age(now - job.created_at)) for job in page.jobs]
        if shown == self._shown:
            return
        self._shown = shown
        row = self.cursor_row
        was_on = self.key_at_cursor() if follow else None
        self.clear()
        self._keys = [job.key for job in page.jobs]
        self._jobs = list(page.jobs)
        self.add_rows(
            (
                Text(when),
                safe_text(job.job_id, 60),
                safe_text(job.operation, 40),
                Text(job.state, style="bold red" if job.state == "held" else ""),
                safe_text(job.target, 60),
                safe_text(job.owner, 30),
                Text(str(job.attempt)),
                _clipped(safe_text(job.held_reason or job.last_error or job.handle or "", 80)),
            )
            for job, when in shown
        )
        if was_on in self._keys:
            row = self._keys.index(was_on)
        if row > 0 and page.jobs:  # clear() put the cursor on the first row; moving it there again scrolls
            self.move_cursor(row=min(row, len(page.jobs) - 1))
        if was_on is not None and was_on not in self._keys:
            self.post_message(self.JobLeft(was_on, self.key_at_cursor()))

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
        if event.column_key.value == "age":
            self.post_message(self.SortRequested())
