"""Several jobs share one id (one per operation): choose the one to open."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from console.bindings import PICK
from console.sanitize import safe_text
from ledger.model import Job, JobKey


class PickJobScreen(ModalScreen[JobKey | None]):
    """A list of the jobs with one id, each with its operation and state; Enter opens the highlighted one."""

    BINDINGS = PICK

    def __init__(self, job_id: str, jobs: list[Job]) -> None:
        super().__init__()
        self.job_id = job_id
        self.jobs = jobs

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-dialog"):
            yield Label(Text.assemble(("Jobs with id ", "bold"), safe_text(self.job_id, 80, style="bold"),
                                      f" — {len(self.jobs)} operations; Enter opens, Esc cancels"), id="pick-title")
            yield OptionList(
                *[
                    Option(Text.assemble(safe_text(job.operation, 60, style="bold"), "  ",
                                         (job.state, "bold red" if job.state in ("held", "failed") else "")),
                           id=str(i))
                    for i, job in enumerate(self.jobs)
                ],
                id="pick-list",
            )

    def on_mount(self) -> None:
        self.query_one("#pick-list", OptionList).focus()

    @on(OptionList.OptionSelected, "#pick-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.jobs[event.option_index].key)

    def action_cancel(self) -> None:
        """Open nothing."""
        self.dismiss(None)
