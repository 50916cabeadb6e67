"""Guided triage of a held job: (1) query the remote, (2) record a finding, (3) decide.

Every action first shows `triage.preview(...)` in a confirmation whose default is Cancel; a refusal is shown
with its reason and changes nothing; an action this operator may not take is disabled with the reason.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static
from textual.worker import get_current_worker

from console.bindings import TRIAGE, TRIAGE_ACTIONS
from console.live import (
    Abandoned,
    ActionInput,
    JobDetail,
    Pulse,
    check_input,
    clock_time,
    describe_input,
    detached,
    load_job,
    perform,
)
from console.sanitize import clean, compact_json, safe_text
from console.screens.base import ReclaimScreen
from console.screens.confirm import ConfirmScreen
from console.screens.job import job_title
from console.widgets.guarded_action import GuardedAction
from console.widgets.held_explanation import HeldExplanation
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import triage
from ledger.errors import LedgerError
from ledger.model import JobKey

DECISIONS = ("release", "reconcile", "reject", "remediate", "assign")
DANGEROUS = frozenset({"release"})
CATEGORY_HELP = {
    "not_received": "not received — the remote never got it",
    "in_progress": "in progress — the remote has it and is running",
    "completed_reply_lost": "completed, reply lost",
    "cannot_determine": "cannot determine",
    "changed_by_other": "changed by someone else",
}


def _reason(error: Exception) -> str:
    """A refusal's own words; anything unexpected named by its type."""
    return str(error) if isinstance(error, LedgerError) else f"{type(error).__name__}: {error}"


def query_line(detail: JobDetail, tz: str) -> Text:
    """The latest query in two lines: when, who, what the remote said, and its snapshot (literal, compact)."""
    q = detail.latest_query
    if q is None:
        return Text("Last query: none for this attempt yet.", style="dim")
    said = q.detail.get("error") or (f"handle {q.detail['handle']}" if q.detail.get("handle") else "")
    text = Text.assemble(
        ("Last query: ", "bold"), clock_time(q.at, tz), " by ", safe_text(q.actor, 40), " — remote state ",
        (str(q.detail.get("remote_state")), "bold"), ": ", safe_text(said, 200),
    )
    text.append("\nsnapshot ", style="dim")
    text.append_text(compact_json(q.detail.get("snapshot"), 200))
    return text


class TriageScreen(ReclaimScreen):
    """Step by step, for one held (or failed) job; each step says what it will do before it does it."""

    BINDINGS = TRIAGE
    AUTO_FOCUS = "#triage-body"

    class Loaded(Message):
        """The job and a preview of every action arrived."""

        def __init__(self, detail: JobDetail | None) -> None:
            self.detail = detail
            super().__init__()

    class Previewed(Message):
        """A fresh preview for the action the operator asked for."""

        def __init__(self, action: str, preview: triage.Preview, given: ActionInput) -> None:
            self.action = action
            self.preview = preview
            self.given = given
            super().__init__()

    class Done(Message):
        """An action was written to the ledger."""

        def __init__(self, action: str, outcome: str) -> None:
            self.action = action
            self.outcome = outcome
            super().__init__()

    class Refused(Message):
        """An action was refused (or its input rejected); nothing was written."""

        def __init__(self, action: str, reason: str) -> None:
            self.action = action
            self.reason = reason
            super().__init__()

    def __init__(self, key: JobKey) -> None:
        super().__init__()
        self.key = key
        self.detail: JobDetail | None = None
        self.busy: str | None = None

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with VerticalScroll(id="triage-body"):
            yield Label(Text.assemble(("Triage ", "bold"), safe_text(self.key.job_id, 100)), id="triage-title")
            yield HeldExplanation(id="triage-why")
            yield Label("Step 1 · Ask the remote what it did", classes="step")
            yield Static("", id="triage-remote", classes="section-body")
            yield self._action("query")
            yield Static("", id="triage-last-query", classes="section-body")
            yield Label("Step 2 · Record what you found", classes="step")
            with Horizontal(classes="fields"):
                yield Select(
                    [(CATEGORY_HELP.get(c, c), c) for c in triage.FINDING_CATEGORIES],
                    prompt="category", id="finding-category", compact=True,
                )
                yield Input(placeholder="note: what you saw and where", id="finding-note", compact=True)
            yield self._action("finding")
            yield Label("Step 3 · Decide", classes="step")
            with Horizontal(classes="fields"):
                yield Input(placeholder="reason / note (recorded with the decision)", id="decision-reason",
                            compact=True)
                yield Input(placeholder="remote handle (reconcile)", id="decision-handle", compact=True)
            with Horizontal(classes="fields"):
                yield Input(placeholder="owner (assign)", id="assign-owner", compact=True)
                yield Input(placeholder="due: 4h, 30m, 2d or ISO time (assign)", id="assign-due", compact=True)
            for action in DECISIONS:
                yield self._action(action)
            yield Static("", id="triage-outcome")
        yield KeyFooter()

    def _action(self, action: str) -> GuardedAction:
        key, label = TRIAGE_ACTIONS[action]
        binding_id = f"triage.{action}"
        key = self.reclaim.keymap.keys.get(binding_id, key)
        return GuardedAction(action, label, key, id=f"action-{action}")

    def ledger_changed(self, pulse: Pulse) -> None:
        if pulse.touches(self.key):
            self.reload()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-load")
    def load(self) -> None:
        """Read the job and preview every action for this operator (refusal and summary) off the UI thread."""
        app = self.reclaim
        with app.source.reading() as conn:
            detail = load_job(conn, app.config, app.remotes, self.key, operator=app.operator, clock=app.clock,
                              read_only=app.source.read_only, with_previews=True)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(detail))

    def on_triage_screen_loaded(self, message: Loaded) -> None:
        self.detail = message.detail
        self.loaded = True
        if message.detail is None:
            self.query_one("#triage-title", Label).update(
                Text.assemble(("Not in the ledger: ", "bold red"), safe_text(self.key.job_id, 100))
            )
            for ga in self.query(GuardedAction):
                ga.set_guard(False, "the job is not in the ledger", "")
            self.refresh_bindings()
            return
        detail = message.detail
        tz = self.reclaim.config.timezone
        self.query_one("#triage-title", Label).update(Text.assemble(("Triage  ", "bold"), job_title(detail)))
        self.query_one("#triage-why", HeldExplanation).show(detail)
        self.query_one("#triage-remote", Static).update(
            Text("\n").join(safe_text(line, 300) for line in detail.can_answer[1:])  # the first is the remote's kind
        )
        self.query_one("#triage-last-query", Static).update(query_line(detail, tz))
        for action, preview in detail.previews.items():
            self.query_one(f"#action-{action}", GuardedAction).set_guard(preview.allowed, preview.reason,
                                                                          preview.summary)
        handle = self.query_one("#decision-handle", Input)
        suggested = detail.suggested_handle()
        if not handle.value and suggested:
            handle.value = clean(suggested, 200)  # from evidence (a webhook, a fenced send, a query)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "act" and parameters:
            if self.detail is None or self.busy is not None:
                return None
            preview = self.detail.previews.get(str(parameters[0]))
            return True if preview is not None and preview.allowed else None
        return True

    def input_for(self, action: str) -> ActionInput:
        """What the operator typed for `action` (the finding note for a finding, the reason for a decision)."""
        category = self.query_one("#finding-category", Select).value
        note_field = "#finding-note" if action == "finding" else "#decision-reason"
        return ActionInput(
            category=category if isinstance(category, str) else "",
            note=self.query_one(note_field, Input).value,
            handle=self.query_one("#decision-handle", Input).value,
            owner=self.query_one("#assign-owner", Input).value,
            due=self.query_one("#assign-due", Input).value,
        )

    def on_guarded_action_pressed(self, message: GuardedAction.Pressed) -> None:
        self.action_act(message.action)

    def action_act(self, action: str) -> None:
        """Check the input, then fetch a fresh preview and ask for confirmation (default Cancel)."""
        if self.detail is None or self.busy is not None:
            return
        given = self.input_for(action)
        missing = check_input(action, given)
        if missing is not None:
            self._outcome(Text.assemble((f"{action}: ", "bold"), missing), error=True)
            note_missing = not given.note.strip()
            focus = {
                "finding": "#finding-note" if given.category else "#finding-category",
                "reconcile": "#decision-reason" if note_missing else "#decision-handle",
                "assign": "#decision-reason" if note_missing else "#assign-owner" if not given.owner.strip()
                else "#assign-due",
            }.get(action, "#decision-reason")
            self.query_one(focus).focus()
            return
        self.busy = action
        self.refresh_bindings()
        self.fetch_preview(action, given)

    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-act")
    def fetch_preview(self, action: str, given: ActionInput) -> None:
        """Ask the ledger what `action` would do now and whether it may."""
        app = self.reclaim
        try:
            with app.source.reading() as conn:
                preview = triage.preview(conn, app.config, self.key, action, app.operator, app.clock)
        except Exception as e:  # any failure is shown; nothing was written
            self.post_message(self.Refused(action, _reason(e)))
            return
        if app.source.read_only:
            preview = triage.Preview(action, False, "the console is read-only (--read-only)", preview.summary)
        self.post_message(self.Previewed(action, preview, given))

    def on_triage_screen_previewed(self, message: Previewed) -> None:
        action, preview = message.action, message.preview
        label = TRIAGE_ACTIONS[action][1]
        title = Text.assemble((f"{label}? ", "bold"), safe_text(self.key.job_id, 80), " · ",
                              safe_text(self.key.operation, 60))

        def decided(confirmed: bool | None) -> None:
            if confirmed and preview.allowed:
                self.run_action(action, message.given)
            else:
                self.busy = None
                self.refresh_bindings()
                if not preview.allowed:
                    self._outcome(Text.assemble((f"{action} refused: ", "bold"), safe_text(preview.reason, 300),
                                                " — nothing was changed"), error=True)

        self.app.push_screen(
            ConfirmScreen(title, preview.summary, describe_input(action, message.given), preview.reason if not
                          preview.allowed else None, f"{label} — confirm", dangerous=action in DANGEROUS),
            decided,
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-act")
    def run_action(self, action: str, given: ActionInput) -> None:
        """Write the action through the ledger (a query also asks the remote, with no transaction open).

        A query waits on the remote for up to its timeout, so it runs detached: quitting (or leaving the screen)
        does not wait for it. Decided: an abandoned query still records the remote's answer if the process lives
        on long enough to get it (one append-only query event, as if the operator had waited; harmless, and a
        'completed' or 'running' answer then rightly stops a release); when the process exits first, nothing is
        written (the record is one transaction, never half). Every other action is a short local write, left
        to finish.
        """
        app = self.reclaim
        worker = get_current_worker()

        def act() -> str:
            with app.source.writing() as conn:
                return perform(conn, app.config, app.remotes, self.key, action, given, actor=app.operator,
                               clock=app.clock)

        try:
            if action == "query":
                outcome = detached(act, lambda: worker.is_cancelled, name="reclaim-query")
            else:
                outcome = act()
        except Abandoned:
            return
        except Exception as e:  # the transaction rolled back; the reason is shown
            self.post_message(self.Refused(action, _reason(e)))
            return
        self.post_message(self.Done(action, outcome))

    def on_triage_screen_done(self, message: Done) -> None:
        self.busy = None
        self._outcome(Text.assemble((f"{message.action}: ", "bold green"), safe_text(message.outcome, 400)))
        self.app.notify(clean(message.outcome, 300), title=message.action, markup=False)
        if message.action == "finding":
            self.query_one("#finding-note", Input).value = ""
        elif message.action in DECISIONS:
            self.query_one("#decision-reason", Input).value = ""
        self.reclaim.wake_follower()
        self.reload()

    def on_triage_screen_refused(self, message: Refused) -> None:
        self.busy = None
        self.refresh_bindings()
        self._outcome(Text.assemble((f"{message.action} refused: ", "bold red"), safe_text(message.reason, 400),
                                    " — nothing was changed"), error=True)
        self.app.notify(clean(message.reason, 300), title=f"{message.action} refused", severity="error",
                        markup=False)
        self.reload()

    def _outcome(self, text: Text, error: bool = False) -> None:
        out = self.query_one("#triage-outcome", Static)
        out.set_class(error, "-error")
        out.update(text)
