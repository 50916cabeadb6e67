"""Choose one from a short list: the job to open when several share an id or match a typed part of an id, or a saved
view to show."""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from console.bindings import PICK
from console.sanitize import safe_text
from ledger import Job, JobKey, SavedView

T = TypeVar("T")


class PickScreen(ModalScreen[T | None], Generic[T]):
    """A titled list of choices; Enter hands back the highlighted one's value, Esc hands back None."""

    BINDINGS = PICK

    def __init__(self, title: Text, choices: list[tuple[Text, T]]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-dialog"):
            yield Label(self.title_text, id="pick-title")
            yield OptionList(*[Option(label, id=str(i)) for i, (label, _) in enumerate(self.choices)], id="pick-list")

    def on_mount(self) -> None:
        self.query_one("#pick-list", OptionList).focus()

    @on(OptionList.OptionSelected, "#pick-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.choices[event.option_index][1])

    def action_cancel(self) -> None:
        """Choose nothing."""
        self.dismiss(None)


class PickJobScreen(PickScreen[JobKey]):
    """The jobs with one id, each with its operation and state; Enter opens the highlighted one."""

    def __init__(self, job_id: str, jobs: list[Job]) -> None:
        self.job_id = job_id
        self.jobs = jobs
        super().__init__(
            Text.assemble(("Jobs with id ", "bold"), safe_text(job_id, 80, style="bold"),
                          f" — {len(jobs)} operations; Enter opens, Esc cancels"),
            [(Text.assemble(safe_text(job.operation, 60, style="bold"), "  ",
                            (job.state, "bold red" if job.state in ("held", "failed") else "")), job.key)
             for job in jobs],
        )


class PickMatchScreen(PickScreen[JobKey]):
    """The jobs whose id begins with or holds the typed text, each with its operation and state; Enter opens the
    highlighted one."""

    def __init__(self, text: str, jobs: list[Job], more: bool = False) -> None:
        self.jobs = jobs
        count = f"{len(jobs)}+" if more else str(len(jobs))
        super().__init__(
            Text.assemble((f"{count} jobs match ", "bold"), safe_text(text, 80, style="bold"),
                          " (id begins with it, then holds it); Enter opens, Esc cancels"
                          + ("; type more of the id to see the rest" if more else "")),
            [(Text.assemble(safe_text(job.job_id, 80, style="bold"), "  ", safe_text(job.operation, 60), "  ",
                            (job.state, "bold red" if job.state in ("held", "failed") else "")), job.key)
             for job in jobs],
        )


class PickViewScreen(PickScreen[SavedView]):
    """An operator's saved views, each with its group and filter; Enter shows the highlighted one in the job list."""

    def __init__(self, operator: str, views: list[SavedView], save_key: str = "W") -> None:
        self.views = views
        super().__init__(
            Text.assemble(("Saved views of ", "bold"), safe_text(operator, 60, style="bold"),
                          f" — Enter shows one · Esc cancels · {save_key} saves one"),
            [(Text.assemble(safe_text(v.name, 40, style="bold"), "  ", (v.group, "bold"), "  ",
                            safe_text(v.filter or "(no filter)", 120)), v) for v in views],
        )
