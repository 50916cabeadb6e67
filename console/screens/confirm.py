"""The confirmation every action passes through: what will happen, and Cancel focused by default.

`y` confirms and `n` (or Esc) cancels; Enter presses the focused button, which is Cancel until the operator
moves to the other one. A refused action's `y` says why and does nothing.

A confirmation given a `recheck` stays true while it is open: when the ledger changes (the quota, the job, a
finding), the console calls `ledger_changed`, the recheck runs in a worker, and what will happen, its lines and
its refusal are drawn again; `y` then confirms what is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from console.bindings import CONFIRM
from console.sanitize import clean, safe_text


@dataclass(frozen=True)
class Shown:
    """What a confirmation says: what will happen, its lines, why it is refused (None: allowed), and a long list
    (every job of a batch) drawn in a scrolling box."""

    summary: str
    lines: list[str]
    refusal: str | None
    detail: Text | None = None
    basis: object = None
    """What this was drawn from (a batch's plan): the caller acts on the basis of what `y` confirmed."""


class ConfirmScreen(ModalScreen[bool]):
    """A preview of one action; a refusal is shown with its reason and the confirm button stays disabled."""

    BINDINGS = CONFIRM

    def __init__(
        self, title: Text, summary: str, lines: list[str], refusal: str | None, confirm_label: str,
        *, dangerous: bool = False, cancel_label: str = "Cancel", detail: Text | None = None,
        recheck: Callable[[], Shown] | None = None, basis: object = None,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.shown = Shown(summary, lines, refusal, detail, basis)
        self.confirm_label = confirm_label
        self.cancel_label = cancel_label
        self.dangerous = dangerous
        self.recheck = recheck
        self.rechecks = 0
        """How many times a recheck redrew the confirmation (tests read it)."""

    @property
    def summary(self) -> str:
        return self.shown.summary

    @property
    def lines(self) -> list[str]:
        return self.shown.lines

    @property
    def refusal(self) -> str | None:
        return self.shown.refusal

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog"):
            yield Label(self.title_text, id="confirm-title")
            yield Static(id="confirm-summary")
            yield Static(id="confirm-lines", classes="confirm-line")
            with VerticalScroll(id="confirm-detail"):
                yield Static(id="confirm-detail-text")
            yield Static(id="confirm-refusal")
            yield Static(id="confirm-keys")
            with Horizontal(id="confirm-buttons"):
                yield Button(self.cancel_label, id="cancel", variant="primary")
                yield Button(self.confirm_label, id="confirm", variant="error" if self.dangerous else "warning")

    def _keys_hint(self) -> Text:
        keys = {b.id: self.app.get_key_display(b) for b in CONFIRM}
        hint = Text(style="dim")
        if self.refusal is None:
            hint.append(f"{keys['confirm.yes']} {self.confirm_label} · ")
        hint.append(f"{keys['confirm.no']} or {keys['confirm.cancel']} {self.cancel_label} · "
                    "enter presses the focused button")
        return hint

    def on_mount(self) -> None:
        self._draw()
        self.query_one("#cancel", Button).focus()

    def _draw(self) -> None:
        shown = self.shown
        self.query_one("#confirm-summary", Static).update(
            Text.assemble(("What happens: ", "bold"), safe_text(shown.summary, 400)))
        lines = self.query_one("#confirm-lines", Static)
        lines.update(Text("\n").join(safe_text(line, 400) for line in shown.lines))
        lines.display = bool(shown.lines)
        box = self.query_one("#confirm-detail", VerticalScroll)
        box.display = shown.detail is not None
        self.query_one("#confirm-detail-text", Static).update(shown.detail or "")
        refusal = self.query_one("#confirm-refusal", Static)
        refusal.display = bool(shown.refusal)
        refusal.update(Text.assemble(("Refused: ", "bold"), safe_text(shown.refusal or "", 400),
                                     ("\nNothing was changed.", "")))
        self.query_one("#confirm-keys", Static).update(self._keys_hint())
        self.query_one("#confirm", Button).disabled = shown.refusal is not None
        self.refresh_bindings()

    def ledger_changed(self, pulse: object) -> None:
        """The ledger changed while this is open: run the recheck (if any) off the UI thread, and redraw."""
        if self.recheck is not None:
            self._recheck()

    @work(thread=True, exclusive=True, exit_on_error=False, group="confirm-recheck")
    def _recheck(self) -> None:
        assert self.recheck is not None
        try:
            shown = self.recheck()
        except Exception as e:  # the ledger could not be read again: what is shown may be stale, so no `y`
            shown = Shown(self.shown.summary, self.shown.lines, f"could not read the ledger again ({e}); cancel and "
                          "look again", self.shown.detail)
        self.app.call_from_thread(self._rechecked, shown)

    def _rechecked(self, shown: Shown) -> None:
        if not self.is_attached:
            return
        self.rechecks += 1
        if shown != self.shown:
            self.shown = shown
            self._draw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return True if self.refusal is None else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        """Why `y` does nothing here."""
        return f"refused: {self.refusal}" if action == "confirm" and self.refusal else "not available here"

    def on_key(self, event: events.Key) -> None:
        """A refused action's confirm key says why, and goes no further."""
        active = self.active_bindings.get(event.key)
        if active is None or active.enabled or active.node is not self:
            return
        event.stop()
        event.prevent_default()
        self.app.notify(clean(self.disabled_reason("confirm", ()), 300), title="not available", severity="warning",
                        markup=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm" and self.refusal is None)

    def action_confirm(self) -> None:
        """Act (only when the action is allowed)."""
        if self.refusal is None:
            self.dismiss(True)

    def action_cancel(self) -> None:
        """Close without acting."""
        self.dismiss(False)
