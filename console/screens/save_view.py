"""`W` on the job list: save its group and filter as one of the operator's named views (`ledger.views.save_view`)."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Input

from console.sanitize import safe_text
from console.screens.form import FormScreen, field
from ledger import SavedView


def view_words(group: str, filter_text: str) -> Text:
    """'held · owner:me' (the filter shown literally), or 'held · no filter'."""
    return Text.assemble((group, "bold"), " · ", safe_text(filter_text, 200) if filter_text else "no filter")


class SaveViewScreen(FormScreen):
    """A name for the list's group + filter; Enter saves it for this operator (the same name replaces it)."""

    REFUSED = "not saved"

    class Saved(Message):
        """The view was written."""

        def __init__(self, view: SavedView) -> None:
            self.view = view
            super().__init__()


    def __init__(self, group: str, filter_text: str) -> None:
        self.group = group
        self.filter_text = filter_text
        super().__init__(Text("Save this view", style="bold"),
                         Text.assemble("Saves ", view_words(group, filter_text),
                                       " under a name; w lists your views. The same name replaces it."))

    def fields(self) -> ComposeResult:
        yield field("name", Input(placeholder="e.g. my held articles (Enter saves)", id="form-name", compact=True,
                                  max_length=200))

    @on(Input.Submitted, "#form-name")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        name = event.value.strip()
        if not name:
            self.say("type a name for the view first", error=True)
            return
        if self.busy:
            return
        self.busy = True
        self.say(Text.assemble("saving ", safe_text(name, 80, style="bold"), "…"))
        self.save(name)

    @work(thread=True, exclusive=True, exit_on_error=False, group="save-view")
    def save(self, name: str) -> None:
        """Write the view through the ledger, as this operator."""
        app = self.reclaim
        try:
            with app.ledger(write=True) as ledger:
                view = ledger.save_view(app.operator, name, self.group, self.filter_text)
        except Exception as e:  # said in the form; the write rolled back
            self.refused(e)
            return
        self.post_message(self.Saved(view))

    def on_save_view_screen_saved(self, message: Saved) -> None:
        v = message.view
        self.dismiss(f"saved view {v.name}: {v.group}" + (f" · {v.filter}" if v.filter else ""))

