"""Guided triage of a held job: (1) query the remote, (2) record a finding, (3) decide.

The query is a read: its key asks the remote at once. Every other action first shows `triage.preview(...)` in a
confirmation whose default is Cancel (`y` confirms); a refusal is shown with its reason and changes nothing; an
action this operator may not take is disabled with the reason, and its key says that reason.

An action key whose input is missing moves the cursor to the field it needs and says what to type; Enter in that
field goes on with the same action. A key pressed before the job is read waits and runs when the read lands (the
feedback line says so); the job is drawn before the remote's adapter is built (its SDK import takes seconds on a
loaded machine), and what the remote can answer follows. After a query, the finding's category is set to the one its answer points to
(the operator may change it). Esc with typed text asks before throwing it away.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Select, Static
from textual.worker import get_current_worker

from console.bindings import TRIAGE, TRIAGE_ACTIONS
from console.live import (
    Abandoned,
    ActionInput,
    Pulse,
    check_input,
    clock_time,
    describe_input,
    detached,
    perform,
)
from console.sanitize import clean, compact_json, safe_text
from console.screens.base import ReclaimScreen
from console.screens.confirm import ConfirmScreen, Shown
from console.screens.job import READING_REMOTE, job_title
from console.screens.job_read import JobRead, RemoteAnswer, read_job_then_remote
from console.times import when
from console.widgets.console_link import ConsoleLink, copy_console_url
from console.widgets.feedback_line import FeedbackLine
from console.widgets.guarded_action import GuardedAction
from console.widgets.held_explanation import HeldExplanation
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import FINDING_CATEGORIES, JobDetail, JobKey, LedgerError, Preview, parse_due

_NO = Preview("", False, None, "")
DECISIONS = ("release", "reconcile", "reject", "remediate", "assign")
DANGEROUS = frozenset({"release"})
ASKS_FIRST = frozenset({"finding", *DECISIONS})
"""Actions that write or send: each opens its preview and confirmation. The query (a read) asks nothing."""
FIELD_ACTIONS = {"#finding-note": "finding", "#decision-handle": "reconcile", "#assign-owner": "assign",
                 "#assign-due": "assign"}
"""Enter in these fields goes on with their action; Enter in the shared reason field, with the decision chosen."""
TYPED_FIELDS = {"#finding-note": "note", "#decision-reason": "reason", "#decision-handle": "handle",
                "#assign-owner": "owner", "#assign-due": "due"}
WRITTEN_FIELDS = {"finding": ("#finding-note",), "assign": ("#assign-owner", "#assign-due", "#decision-reason"),
                  "reconcile": ("#decision-handle", "#decision-reason"), "release": ("#decision-reason",),
                  "reject": ("#decision-reason",), "remediate": ("#decision-reason",)}
"""The fields an action's input came from: cleared once it is written (the form then holds nothing unsaved)."""
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


EVIDENCE_CATEGORY = {"completed": "completed_reply_lost", "running": "in_progress", "absent": "not_received",
                     "gone": "cannot_determine"}
"""The finding category evidence of each remote state points to (a failed run points to none)."""


def suggested_category(detail: JobDetail) -> str | None:
    """The finding category what is known points to, or None when nothing does.

    The current attempt's latest query first: a search by idem key that found nothing, not_received; running (or
    waiting for input), in_progress; completed, completed_reply_lost; a handle the remote no longer knows
    (retention), cannot_determine. With no query: the newest evidence's remote state (a webhook, a fenced accepted
    send). With neither, and no query able to ask anything (no handle, no evidence naming one, no search by key):
    cannot_determine, which the operator changes once they have looked where step 1 says. A query that could not
    ask, or failed, with a remote that can be asked: no suggestion.
    """
    q = detail.latest_query
    if q is not None:
        state = q.detail.get("remote_state")
        if state == "not_found":
            return "cannot_determine" if q.detail.get("handle") else "not_received"
        found = {"running": "in_progress", "needs_person": "in_progress",
                 "completed": "completed_reply_lost"}.get(str(state))
        if found is not None or detail.query_helps:
            return found
    known = detail.known_state()
    if known is not None and known.remote_state in EVIDENCE_CATEGORY:
        return EVIDENCE_CATEGORY[known.remote_state]
    return None if detail.query_helps else "cannot_determine"


STEP_ONE_ASK = "Step 1 · Ask the remote what it did"
STEP_ONE_KNOWN = "Step 1 · What is known (a query cannot help: nothing to ask the remote about)"


def known_lines(detail: JobDetail, tz: str) -> Text:
    """What reclaim knows about the current attempt's outcome: the evidence so far (what the remote can answer
    follows in the remote's own lines)."""
    text = Text()
    known = detail.known_state()
    if known is None and detail.candidates:
        n = len(detail.candidates)
        text.append(f"Evidence: none names this job, but {n} orphan deliver{'y' if n == 1 else 'ies'} could be "
                    "its own (listed above)", style="bold yellow")
    elif known is None:
        text.append("Evidence: none for this attempt yet", style="bold")
    else:
        text.append("Evidence: ", style="bold")
        text.append(f"{clock_time(known.at, tz)} {known.source} says {known.remote_state}")
        if known.handle:
            text.append(" · handle ")
            text.append_text(safe_text(known.handle, 120))
    return text


_LISTED_AT = re.compile(r"; the demo's simulator lists them at \S+")
"""Where a recorded query's words (`triage.where_to_look`) name the remote-console URL."""


def query_line(detail: JobDetail, tz: str) -> Text:
    """The latest query in two lines: when, who, what the remote said, and its snapshot (literal, compact)."""
    q = detail.latest_query
    if q is None:
        return Text("Last query: none for this attempt yet.", style="dim")
    said = q.detail.get("error") or (f"handle {q.detail['handle']}" if q.detail.get("handle") else "")
    if detail.console_url and isinstance(said, str):  # the URL is shown whole above: not a cut copy here
        said = _LISTED_AT.sub("", said)
    text = Text.assemble(
        ("Last query: ", "bold"), clock_time(q.at, tz), " by ", safe_text(q.actor, 40), " — remote state ",
        (str(q.detail.get("remote_state")), "bold"), ": ", safe_text(said, 300),
    )
    text.append("\nsnapshot ", style="dim")
    text.append_text(compact_json(q.detail.get("snapshot"), 200))
    return text


class TriageScreen(ReclaimScreen):
    """Step by step, for one held (or failed) job; each step says what it will do before it does it."""

    BINDINGS = TRIAGE
    AUTO_FOCUS = "#triage-body"

    class Loaded(JobRead):
        """The job and a preview of every action arrived."""

    class RemoteRead(RemoteAnswer):
        """What the job's remote can answer, in sentences (it follows `Loaded`)."""

    class Previewed(Message):
        """A fresh preview for the action the operator asked for."""

        def __init__(self, action: str, preview: Preview, given: ActionInput) -> None:
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
        self.pending: str | None = None
        """The action whose input the operator is typing (Enter in its field goes on with it)."""
        self.suggested: str | None = None
        """The finding category the latest query points to (set in the form when the operator chose none)."""
        self._prefilled_handle = ""
        self._remote_lines: list[str] = []
        self._guided = False
        self._queried: str | None = None
        self._asked_after: int | None = None  # the latest query's event id when ours began
        self.remote_read = False
        self.queued: tuple[str, tuple[object, ...]] | None = None
        """An action (name, parameters) whose key was pressed before the job was read: it runs when the read lands."""

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with VerticalScroll(id="triage-body"):
            yield Label(Text.assemble(("Triage ", "bold"), safe_text(self.key.job_id, 100)), id="triage-title")
            yield HeldExplanation(id="triage-why")
            yield Label(STEP_ONE_ASK, classes="step", id="step-1")
            yield Static(Text(READING_REMOTE, style="dim"), id="triage-remote", classes="section-body")
            yield ConsoleLink(id="triage-console-url")
            yield self._action("query")
            yield Static("", id="triage-last-query", classes="section-body")
            yield Label("Step 2 · Record what you found", classes="step")
            with Horizontal(classes="fields"):
                yield Select(
                    [(CATEGORY_HELP.get(c, c), c) for c in FINDING_CATEGORIES],
                    prompt="category", id="finding-category", compact=True,
                )
                yield Input(placeholder="note: what you saw and where (Enter records)", id="finding-note",
                            compact=True)
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
        yield FeedbackLine(id="feedback")
        yield KeyFooter()

    def _key(self, action: str) -> str:
        """The key `action` answers to now (the keymap applied), as the footer shows it."""
        key, _ = TRIAGE_ACTIONS[action]
        return self.reclaim.keymap.keys.get(f"triage.{action}", key)

    def _action(self, action: str) -> GuardedAction:
        _, label = TRIAGE_ACTIONS[action]
        return GuardedAction(action, label, self._key(action), id=f"action-{action}")

    def ledger_changed(self, pulse: Pulse) -> None:
        if pulse.touches(self.key):
            self.reload()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-load")
    def load(self) -> None:
        """Read the job and preview every action for this operator (refusal and summary) off the UI thread and post
        them; then what the remote can answer (no adapter built)."""
        read_job_then_remote(self, self.key, self.Loaded, self.RemoteRead, with_previews=True)

    def on_triage_screen_remote_read(self, message: RemoteRead) -> None:
        self.remote_read = True
        self._remote_lines = message.lines[1:]  # the first is the remote's kind
        self._show_remote()

    def _show_remote(self) -> None:
        """Step 1's body: what the remote can answer; when a query cannot help, what is known first."""
        lines = Text("\n").join(safe_text(line, 300) for line in self._remote_lines)
        detail = self.detail
        if detail is not None and not detail.query_helps:
            known = known_lines(detail, self.reclaim.config.timezone)
            lines = Text("\n").join([known, lines]) if lines.plain else known
        self.query_one("#triage-remote", Static).update(lines)

    def _run_queued(self) -> None:
        queued, self.queued = self.queued, None
        if queued is not None:
            name, params = queued
            getattr(self, f"action_{name}")(*params)

    def on_triage_screen_loaded(self, message: Loaded) -> None:
        self.detail = message.detail
        self.loaded = True
        if message.detail is None:
            self.query_one("#triage-title", Label).update(
                Text.assemble(("Not in the ledger: ", "bold red"), safe_text(self.key.job_id, 100))
            )
            for ga in self.query(GuardedAction):
                ga.set_guard(False, "the job is not in the ledger", "")
            self.query_one("#triage-remote", Static).update("")
            self.remote_read = True
            self.refresh_bindings()
            self._run_queued()
            return
        detail = message.detail
        tz = self.reclaim.config.timezone
        self.query_one("#triage-title", Label).update(Text.assemble(("Triage  ", "bold"), job_title(detail)))
        self.query_one("#triage-why", HeldExplanation).show(detail, self.reclaim.config.timezone)
        self.reload_at(detail.arrives_until)  # release, reject and remediate are allowed from then
        if detail.can_answer:
            self._remote_lines = detail.can_answer[1:]  # the first: the remote's kind
        self.query_one("#step-1", Label).update(STEP_ONE_ASK if detail.query_helps else STEP_ONE_KNOWN)
        self._show_remote()
        self.query_one("#triage-console-url", ConsoleLink).show(
            detail.console_url, self.reclaim.keymap.keys.get("triage.copy_url", "l"))
        self.query_one("#triage-last-query", Static).update(query_line(detail, tz))
        for action, preview in detail.previews.items():
            if action not in TRIAGE_ACTIONS:
                continue  # no key here (dismiss-candidate is taken with the CLI; its candidates are listed above)
            self.query_one(f"#action-{action}", GuardedAction).set_guard(preview.allowed, preview.reason,
                                                                          preview.summary)
        handle = self.query_one("#decision-handle", Input)
        suggested = detail.suggested_handle()
        if not handle.value and suggested:
            handle.value = self._prefilled_handle = clean(suggested, 200)  # from evidence (webhook, fenced send, query)
        self.suggested = suggested_category(detail)
        category = self.query_one("#finding-category", Select)
        if self.suggested is not None and category.is_blank():
            category.value = self.suggested  # the operator may choose another; a choice is never overwritten
        if self._queried is not None and detail.latest_query is not None and (
            self._asked_after is None or detail.latest_query.id > self._asked_after
        ):
            self._say_suggestion(self._queried)  # this read has our query's record
            self._queried = None
        elif not self._guided and self.queued is None:
            self._guide(detail)
        self._guided = True
        self.refresh_bindings()
        self._run_queued()

    def _guide(self, detail: JobDetail) -> None:
        """On the first read: the next step the screen offers for a held job, when evidence already names a handle,
        a finding awaits a decision, or step 2 is preset (evidence, or a query cannot help)."""
        if detail.job.state != "held":
            return
        previews = detail.previews
        handle = self.query_one("#decision-handle", Input).value
        finding = detail.latest_finding
        if handle and handle == self._prefilled_handle and previews.get("reconcile", _NO).allowed:
            self.feedback(Text.assemble(
                ("evidence names handle ", "bold"), safe_text(handle, 80), f" — {self._key('reconcile')} reconciles "
                "with it (verified with the remote when you confirm)"), prompt=True)
        elif finding is not None and previews.get("release", _NO).allowed:
            self.feedback(Text.assemble(
                ("finding by ", "bold"), safe_text(finding.actor, 40), ": ",
                safe_text(finding.detail.get("category"), 40), f" — {self._key('release')} releases it (a reason is "
                "asked)"), prompt=True)
        elif finding is None and self.suggested is not None and detail.latest_query is None:
            why = "from the evidence" if detail.known_state() is not None else "a query cannot help"
            self.feedback(Text.assemble(
                ("step 2 is set to ", "bold"), (self.suggested, "bold"), f" ({why}); {self._key('finding')} records "
                "it with your note"), prompt=True)

    def _say_suggestion(self, said: str) -> None:
        """After our query: what it said, and the finding it points to (set in step 2) or that it points to none."""
        key = self._key("finding")
        if self.suggested is not None:
            self.feedback(Text.assemble(
                ("query: ", "bold green"), safe_text(said, 200), " — step 2 is set to ", (self.suggested, "bold"),
                f"; {key} records it with your note"), prompt=True)
        else:
            self.feedback(Text.assemble(
                ("query: ", "bold"), safe_text(said, 200), " — the answer points to no finding: look where step 1 says, "
                f"then {key} to choose one"), prompt=True)

    # -- keys ------------------------------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.loaded and action in ("act", "copy_url"):
            return True  # pressed before the read lands: queued (the action says so)
        if action == "copy_url":
            return (self.detail is not None and self.detail.console_url is not None) or None
        if action == "act" and parameters:
            if self.detail is None or self.busy is not None:
                return None
            preview = self.detail.previews.get(str(parameters[0]))
            return True if preview is not None and preview.allowed else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        """Why an action key does nothing now: its refusal, the action under way, or the job still loading."""
        if action == "copy_url":
            if self.detail is None:
                return "the job is still being read" if not self.loaded else "the job is not in the ledger"
            return "this job's remote has no console to look in (only a Gemini remote on the simulator has one)"
        if action != "act" or not params:
            return "not available here"
        if self.busy is not None:
            return f"the {self.busy} under way finishes first"
        if self.detail is None:
            return "the job is still being read" if not self.loaded else "the job is not in the ledger"
        preview = self.detail.previews.get(str(params[0]))
        return (preview.reason if preview is not None and preview.reason else None) or "not available"

    def typed(self) -> list[tuple[str, str]]:
        """The text fields the operator typed in (a handle the console filled in from evidence does not count)."""
        out: list[tuple[str, str]] = []
        for selector, name in TYPED_FIELDS.items():
            value = self.query_one(selector, Input).value
            if value.strip() and not (selector == "#decision-handle" and value == self._prefilled_handle):
                out.append((name, value))
        return out

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

    def _queue(self, action: str, params: tuple[object, ...], what: str) -> bool:
        """Before the job is read: keep the action to run when the read lands, say so, and return True."""
        if self.loaded:
            return False
        self.queued = (action, params)
        self.feedback(Text.assemble(("reading the job… ", "bold"), f"{what} as soon as it is read"), prompt=True)
        return True

    def action_copy_url(self) -> None:
        """Copy the job's remote-console URL to the clipboard, whole, and say so on the feedback line."""
        if self._queue("copy_url", (), "the console URL is copied"):
            return
        copy_console_url(self, self.query_one(ConsoleLink), self.disabled_reason("copy_url", ()))

    def action_act(self, action: str) -> None:
        """Ask for what is missing (focus its field), else run the query or preview the action (default Cancel).

        Pressed before the job is read, the action waits and runs when the read lands."""
        if action in TRIAGE_ACTIONS and self._queue("act", (action,), f"{TRIAGE_ACTIONS[action][1].lower()} goes on"):
            return
        if self.detail is None or self.busy is not None or action not in TRIAGE_ACTIONS:
            if action in TRIAGE_ACTIONS:
                self.feedback(Text.assemble(("not available: ", "bold"), self.disabled_reason("act", (action,))),
                              error=True)
            return
        preview = self.detail.previews.get(action)
        if preview is None or not preview.allowed:
            self.pending = None
            self.feedback(Text.assemble((f"{action} not available: ", "bold"),
                                        safe_text(self.disabled_reason("act", (action,)), 300)), error=True)
            return
        given = self.input_for(action)
        missing = check_input(action, given)
        if missing is not None:
            self.pending = action
            self._ask_for(action, given, missing)
            return
        self.pending = None
        self.busy = action
        self.refresh_bindings()
        if action in ASKS_FIRST:
            self.fetch_preview(action, given)
        else:
            latest = self.detail.latest_query
            self._asked_after = latest.id if latest is not None else None
            self.feedback(Text.assemble((f"{action}: ", "bold"), "asking the remote…"), prompt=True)
            self.write(action, given)

    def _ask_for(self, action: str, given: ActionInput, missing: str) -> None:
        """Move the cursor to the field `action` still needs and say what to type there."""
        note_missing = not given.note.strip()
        focus = {
            "finding": "#finding-note" if given.category else "#finding-category",
            "reconcile": "#decision-reason" if note_missing else "#decision-handle",
            "assign": "#decision-reason" if note_missing else "#assign-owner" if not given.owner.strip()
            else "#assign-due",
        }.get(action, "#decision-reason")
        then = "choose one (Enter)" if focus == "#finding-category" else (
            "Enter records it" if action == "finding" else f"Enter previews the {action}")
        self.feedback(Text.assemble((f"{action}: ", "bold"), missing, f" — {then}; Esc goes back"), prompt=True)
        widget = self.query_one(focus)
        widget.focus()
        if isinstance(widget, Select):
            widget.action_show_overlay()

    @on(Select.Changed, "#finding-category")
    def _category_chosen(self, event: Select.Changed) -> None:
        """A category chosen by the operator (not one set from the query) moves on to the note."""
        if self.app.focused is event.select and self.pending == "finding":
            note = self.query_one("#finding-note", Input)
            if note.value.strip():
                self.action_act("finding")
            else:
                note.focus()
                self.feedback(Text.assemble(("finding: ", "bold"), "write a note: what you saw and where — Enter "
                                            "records it; Esc goes back"), prompt=True)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        """Enter in a field goes on with its action: the note records the finding, the reason the chosen decision."""
        event.stop()
        selector = f"#{event.input.id}"
        action = FIELD_ACTIONS.get(selector)
        if selector == "#decision-reason":
            action = self.pending if self.pending in DECISIONS else None
            if action is None:
                self.query_one("#triage-body").focus()
                keys = " · ".join(f"{self._key(a)} {TRIAGE_ACTIONS[a][1].lower()}" for a in DECISIONS)
                self.feedback(Text.assemble(("decide: ", "bold"), f"the reason is kept; choose the decision: {keys}"),
                              prompt=True)
                return
        if action is not None:
            self.action_act(action)

    # -- writing ---------------------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-act")
    def fetch_preview(self, action: str, given: ActionInput) -> None:
        """Ask the ledger what `action` would do now and whether it may."""
        app = self.reclaim
        try:
            with app.ledger() as ledger:
                preview = ledger.preview(self.key, action, app.operator)
        except Exception as e:  # any failure is shown; nothing was written
            self.post_message(self.Refused(action, _reason(e)))
            return
        if app.source.read_only:
            preview = Preview(action, False, "the console is read-only (--read-only)", preview.summary)
        self.post_message(self.Previewed(action, preview, given))

    def on_triage_screen_previewed(self, message: Previewed) -> None:
        action, preview = message.action, message.preview
        label = TRIAGE_ACTIONS[action][1]
        title = Text.assemble((f"{label}? ", "bold"), safe_text(self.key.job_id, 80), " · ",
                              safe_text(self.key.operation, 60))
        lines = self._with_due_time(describe_input(action, message.given), message.given)

        def shown(p: Preview) -> Shown:
            return Shown(p.summary, lines, None if p.allowed else p.reason)

        def recheck() -> Shown:
            """The preview read again (the ledger changed while the confirmation is open)."""
            app = self.reclaim
            with app.ledger() as ledger:
                again = ledger.preview(self.key, action, app.operator)
            if app.source.read_only:
                again = Preview(action, False, "the console is read-only (--read-only)", again.summary)
            return shown(again)

        confirm = ConfirmScreen(title, preview.summary, lines, shown(preview).refusal, f"{label} — confirm",
                                dangerous=action in DANGEROUS, recheck=recheck)

        def decided(confirmed: bool | None) -> None:
            refusal = confirm.refusal  # what the confirmation showed last (a recheck may have changed it)
            if confirmed and refusal is None:
                self.write(action, message.given)
                return
            self.busy = None
            self.refresh_bindings()
            if refusal is not None:
                self._outcome(Text.assemble((f"{action} refused: ", "bold"), safe_text(refusal, 300),
                                            " — nothing was changed"), error=True)
            else:
                self._outcome(Text.assemble((f"{action}: ", "bold"), "cancelled — nothing was changed"))

        self.app.push_screen(confirm, decided)

    def _with_due_time(self, lines: list[str], given: ActionInput) -> list[str]:
        """The confirmation's lines with a typed due span ('45m') followed by the time it means, as the CLI says it."""
        if not given.due.strip():
            return lines
        app = self.reclaim
        try:
            due_at = parse_due(given.due, app.clock.now(), app.config.timezone)
        except LedgerError:
            return lines  # the preview's own check says what is wrong with it
        meant = when(due_at, app.clock.now(), app.config.timezone)
        return [f"{line} ({meant})" if line.startswith("due:") else line for line in lines]

    @work(thread=True, exclusive=True, exit_on_error=False, group="triage-act")
    def write(self, action: str, given: ActionInput) -> None:
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
            with app.ledger(write=True) as ledger:
                return perform(ledger, app.remotes, self.key, action, given, actor=app.operator)

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
        self.pending = None
        self._outcome(Text.assemble((f"{message.action}: ", "bold green"), safe_text(message.outcome, 400)))
        if message.action == "query":
            self._queried = message.outcome  # the next read says which finding the answer points to
        for selector in WRITTEN_FIELDS.get(message.action, ()):
            self.query_one(selector, Input).value = ""  # written: nothing is left to lose, so Esc asks nothing
        if message.action in ("reconcile", "release"):
            self._prefilled_handle = ""
        if isinstance(self.app.focused, (Input, Select)):
            self.query_one("#triage-body").focus()  # done typing: the next letter is a key again, not text
        self.reclaim.wake_follower()
        self.reload()

    def on_triage_screen_refused(self, message: Refused) -> None:
        self.busy = None
        self.refresh_bindings()
        self._outcome(Text.assemble((f"{message.action} refused: ", "bold red"), safe_text(message.reason, 400),
                                    " — nothing was changed"), error=True)
        self.reload()

    def _outcome(self, text: Text, error: bool = False) -> None:
        self.feedback(text, error=error)
