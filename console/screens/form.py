"""A small dialog of typed fields over the job list: Enter goes on, Esc with typed text asks before throwing it away.

The save-view and bulk-assign dialogs build on it; each reads and writes the ledger in its own workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label, Static

from console.bindings import FORM
from console.sanitize import safe_text
from console.screens.confirm import ConfirmScreen
from ledger import LedgerError

if TYPE_CHECKING:
    from console.app import ReclaimApp


def field(label: str, widget: Input) -> Horizontal:
    """One labelled field: the label stays when the placeholder gives way to what is typed."""
    return Horizontal(Label(label, classes="form-label"), widget, classes="form-field")


class FormScreen(ModalScreen[str | None]):
    """A titled form; dismissed with what was done (said on the screen below), or None when nothing was."""

    BINDINGS = FORM
    REFUSED = "refused"
    """How the form begins a refusal: '<REFUSED>: <why> — nothing was changed'."""

    class Failed(Message):
        """The ledger refused the form's read or write (input, role, a read-only console); nothing was written."""

        def __init__(self, reason: str) -> None:
            self.reason = reason
            super().__init__()

    def __init__(self, title: Text, about: Text) -> None:
        super().__init__()
        self.title_text = title
        self.about = about
        self.message = ""
        """What the form says now (tests read it)."""
        self.busy = False
        """A ledger read or write of this form is under way (Esc waits for it)."""

    @property
    def reclaim(self) -> ReclaimApp:
        """The console app, typed."""
        return cast("ReclaimApp", self.app)

    def fields(self) -> ComposeResult:
        """The form's inputs (override)."""
        yield from ()

    def compose(self) -> ComposeResult:
        with Vertical(id="form-dialog"):
            yield Label(self.title_text, id="form-title")
            yield Static(self.about, id="form-about")
            yield from self.fields()
            yield Static("", id="form-feedback")
            yield Static(Text("Enter goes on · Esc cancels (asks first when you typed something)", style="dim"),
                         id="form-keys")

    def on_mount(self) -> None:
        self.first_field().focus()

    def first_field(self) -> Widget:
        """The field focused when the form opens (the first input; override)."""
        return self.query(Input).first()

    def refused(self, error: Exception) -> None:
        """From a worker: have the form say why the ledger refused (its own words; anything unexpected named by its
        type). Nothing was written."""
        why = str(error) if isinstance(error, LedgerError) else f"{type(error).__name__}: {error}"
        self.post_message(self.Failed(why))

    def on_form_screen_failed(self, message: Failed) -> None:
        self.busy = False
        self.say(Text.assemble((f"{self.REFUSED}: ", "bold"), safe_text(message.reason, 300),
                               " — nothing was changed"), error=True)

    def say(self, text: Text | str, *, error: bool = False) -> None:
        """Show `text` in the form (an error in red)."""
        line = self.query_one("#form-feedback", Static)
        line.set_class(error, "-error")
        line.update(text if isinstance(text, Text) else Text(text))
        self.message = text.plain if isinstance(text, Text) else text

    def typed(self) -> list[tuple[str, str]]:
        """What the operator typed here and would lose by closing, as (field, text) pairs."""
        return [(w.id.removeprefix("form-"), w.value) for w in self.query(Input) if w.id and w.value.strip()]

    def action_cancel(self) -> None:
        """Close without doing anything; with typed text, ask first. Not while the ledger is being written."""
        if self.busy:
            self.say("the ledger is being read or written; this form closes when that is done", error=True)
            return
        typed = self.typed()
        if not typed:
            self.dismiss(None)
            return

        def decided(discard: bool | None) -> None:
            if discard:
                self.dismiss(None)

        self.app.push_screen(
            ConfirmScreen(
                Text("Discard what you typed?", style="bold"),
                "closing this form throws away what you typed; nothing was written",
                [f"{name}: {text}" for name, text in typed], None, "Discard and close", cancel_label="Keep editing",
            ),
            decided,
        )
