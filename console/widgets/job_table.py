"""One page of a group's jobs."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from console.live import JobPage, age
from console.sanitize import safe_text
from ledger.model import JobKey


class JobTable(DataTable[Text]):
    """A page of jobs (age, id, operation, state, target, owner, attempt, last word); Enter opens one."""

    DEFAULT_CSS = """
    JobTable { height: 1fr; }
    """

    class Opened(Message):
        """A job was chosen."""

        def __init__(self, key: JobKey) -> None:
            self.key = key
            super().__init__()

    class SortRequested(Message):
        """The age column header was clicked."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._keys: dict[str, JobKey] = {}

    def on_mount(self) -> None:
        for label, width in (("age", 9), ("job", 32), ("operation", 18), ("state", 10), ("target", 18),
                             ("owner", 10), ("try", 4), ("last word", 30)):
            self.add_column(label, width=width, key=label)

    def show_page(self, page: JobPage, now: float) -> None:
        """Replace the rows with `page`."""
        row = self.cursor_row
        self.clear()
        self._keys.clear()
        for i, job in enumerate(page.jobs):
            rk = str(i)
            self._keys[rk] = job.key
            self.add_row(
                Text(age(now - job.created_at)),
                safe_text(job.job_id, 60),
                safe_text(job.operation, 40),
                Text(job.state, style="bold red" if job.state == "held" else ""),
                safe_text(job.target, 60),
                safe_text(job.owner, 30),
                Text(str(job.attempt)),
                safe_text(job.held_reason or job.last_error or job.handle or "", 80),
                key=rk,
            )
        if page.jobs:
            self.move_cursor(row=min(row, len(page.jobs) - 1))

    def key_at_cursor(self) -> JobKey | None:
        """The job under the cursor, if any."""
        if not self._keys or self.cursor_row < 0:
            return None
        return self._keys.get(str(self.cursor_row))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = self._keys.get(str(event.row_key.value))
        if key is not None:
            self.post_message(self.Opened(key))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value == "age":
            self.post_message(self.SortRequested())
