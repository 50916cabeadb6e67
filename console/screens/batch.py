"""`B` on the held job list: one finding or one decision for many held jobs (`reclaim batch` in the console).

The jobs are the ones marked with space, else every held job the list's filter matches (one cause, one operation,
one window: `reason:503 op:gemini.* since:1h`). The operator chooses what to do (record one finding, release, reject,
remediate) and types the one reason or note. Enter reads the plan off the UI thread (`Ledger.batch_plan`, which
writes nothing) and shows it in one confirmation whose default is Cancel: every job, allowed or refused and why
(four-eyes, evidence, a request that could still arrive, the quota), and what the releases cost each quota today.
The plan is read again while the confirmation is open. `y` takes the action on the allowed jobs, each its own event
by this operator; a job that changed meanwhile is refused and said.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Label, Select

from console.sanitize import clean, safe_text
from console.screens.confirm import ConfirmScreen, Shown
from console.screens.form import FormScreen
from console.screens.triage import CATEGORY_HELP
from console.words import BATCH_VERBS, batch_doc, batch_done_line, quota_words
from ledger import ACTION_TABLE, BATCH_ACTIONS, FINDING_CATEGORIES, BatchPlan, JobFilter, JobKey

ACTION_WORDS = {"finding": "record one finding", "release": "release", "reject": "reject", "remediate": "remediate"}
TEXT_FIELD = {name: next(f for f in ACTION_TABLE[name].fields if f.name in ("reason", "note")) for name in BATCH_ACTIONS}
"""The one text each batch action records: a release's or reject's reason, a finding's or remediate's note."""



def plan_shown(plan: BatchPlan, actor: str, read_only: bool) -> Shown:
    """The confirmation of a batch plan: what happens, the quota lines, every job with its verdict (scrolling), and
    the refusal when no job may be acted on."""
    doc = batch_doc(plan.action, actor, plan)
    jobs, allowed = doc["jobs"], plan.allowed
    verb = BATCH_VERBS[plan.action][0]
    summary = (f"{verb} {len(allowed)} of {len(jobs)} held job{'s' if len(jobs) != 1 else ''}, each its own event "
               f"by {actor}")
    summary += "; the next worker pass sends each new attempt" if plan.action == "release" else "; nothing is sent"
    lines = [quota_words(q) for q in doc["quota"]]
    if len(allowed) < len(jobs):
        lines.append(f"{len(jobs) - len(allowed)} refused (listed below with why): they are left as they are")
    detail = Text()
    for j in jobs:
        if detail:
            detail.append("\n")
        detail.append("allowed  " if j["allowed"] else "refused  ", style="bold green" if j["allowed"] else "bold red")
        detail.append_text(safe_text(f"{j['job_id']} / {j['operation']}", 160))
        if not j["allowed"]:
            detail.append_text(Text.assemble(": ", safe_text(j["refusal"], 300)))
    refusal = None
    if read_only:
        refusal = "the console is read-only (--read-only)"
    elif not allowed:
        refusal = "no selected job may be acted on now (each says why below)"
    return Shown(summary, lines, refusal, detail, basis=plan)


class BatchScreen(FormScreen):
    """What to do with the selected held jobs and the one reason or note; a plan, then one confirmation."""

    REFUSED = "batch refused"

    class Planned(Message):
        """The plan for the typed input (nothing written)."""

        def __init__(self, plan: BatchPlan, given: dict[str, str]) -> None:
            self.plan = plan
            self.given = given
            super().__init__()

    class Applied(Message):
        """The batch was taken: its document (`console.words.batch_doc`)."""

        def __init__(self, doc: dict[str, Any]) -> None:
            self.doc = doc
            super().__init__()


    def __init__(self, filter_text: str, marked: list[JobKey]) -> None:
        self.filter_text = filter_text
        self.marked = marked
        self.acted: set[JobKey] = set()
        """The jobs the batch acted on (set once it is taken)."""
        if marked:
            which = Text(f"the {len(marked)} marked held job{'s' if len(marked) != 1 else ''}")
        elif filter_text.strip():
            which = Text.assemble("the held jobs matching ", safe_text(filter_text, 200, style="bold"))
        else:
            which = Text("every held job (no filter, nothing marked)")
        super().__init__(Text.assemble(("Decide ", "bold"), which),
                         Text("One finding, or one release, reject or remediate, for all of them: each job gets its "
                              "own event. Enter shows the plan (every job, allowed or refused and why) before "
                              "anything is written."))

    def fields(self) -> ComposeResult:
        yield Horizontal(Label("action", classes="form-label"),
                         Select([(ACTION_WORDS[a], a) for a in BATCH_ACTIONS], prompt="what to do", id="batch-action",
                                compact=True), classes="form-field")
        category = Horizontal(Label("category", classes="form-label"),
                              Select([(CATEGORY_HELP.get(c, c), c) for c in FINDING_CATEGORIES],
                                     prompt="what was found", id="batch-category", compact=True),
                              classes="form-field", id="batch-category-field")
        category.display = False  # shown when the action is a finding
        yield category
        yield Horizontal(Label("reason", classes="form-label", id="batch-text-label"),
                         Input(placeholder="recorded with each job's event (Enter shows the plan)", id="form-text",
                               compact=True, max_length=500), classes="form-field")

    def first_field(self) -> Widget:
        return self.query_one("#batch-action", Select)

    def _action(self) -> str | None:
        value = self.query_one("#batch-action", Select).value
        return value if isinstance(value, str) else None

    @on(Select.Changed, "#batch-action")
    def _action_chosen(self) -> None:
        action = self._action()
        self.query_one("#batch-category-field").display = action == "finding"
        if action is not None:
            self.query_one("#batch-text-label", Label).update(TEXT_FIELD[action].name)
            nxt = "#batch-category" if action == "finding" else "#form-text"
            self.query_one(nxt).focus()

    @on(Select.Changed, "#batch-category")
    def _category_chosen(self) -> None:
        self.query_one("#form-text", Input).focus()

    def given(self) -> dict[str, str] | None:
        """The input for the chosen action under the action table's names; None (and said) when something is
        missing."""
        action = self._action()
        if action is None:
            self.query_one("#batch-action", Select).focus()
            self.say(Text.assemble(("batch: ", "bold"), "choose what to do first"))
            return None
        text = TEXT_FIELD[action]
        given = {text.name: self.query_one("#form-text", Input).value}
        if action == "finding":
            category = self.query_one("#batch-category", Select).value
            given["category"] = category if isinstance(category, str) else ""
            if not given["category"]:
                self.query_one("#batch-category", Select).focus()
                self.say(Text.assemble(("batch: ", "bold"), "choose the category of what was found"))
                return None
        if text.problem(given[text.name]) is not None:
            self.query_one("#form-text", Input).focus()
            self.say(Text.assemble(("batch: ", "bold"), text.ask, " — then Enter"))
            return None
        return given

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.busy:
            return
        given = self.given()
        action = self._action()
        if given is None or action is None:
            return
        self.busy = True
        self.say("reading the plan: each job's verdict and the quota…")
        self.plan(action, given)

    def _read_plan(self, action: str, given: dict[str, str], keys: list[JobKey] | None = None) -> BatchPlan:
        """The plan for `keys` (the jobs a confirmation already shows), else for the marked jobs, else for the held
        jobs the filter matches."""
        app = self.reclaim
        keys = keys if keys is not None else self.marked
        flt = JobFilter.parse(self.filter_text, me=app.operator, now=app.clock.now()) \
            if self.filter_text.strip() and not keys else None
        with app.ledger() as ledger:
            jobs = ledger.batch_select(flt, keys)
            return ledger.batch_plan(action, jobs, given, actor=app.operator)

    @work(thread=True, exclusive=True, exit_on_error=False, group="batch")
    def plan(self, action: str, given: dict[str, str]) -> None:
        """Read the plan off the UI thread; write nothing."""
        try:
            planned = self._read_plan(action, given)
        except Exception as e:  # refused or bad input: said in the form; nothing was written
            self.refused(e)
            return
        self.post_message(self.Planned(planned, given))

    def on_batch_screen_planned(self, message: Planned) -> None:
        plan, given = message.plan, message.given
        app = self.reclaim
        if not plan.items:
            self.busy = False
            self.say(Text.assemble(("batch: ", "bold"), "no held job is selected (the filter matches none); nothing "
                                   "was changed"), error=True)
            return
        def recheck() -> Shown:
            """The same jobs planned again: one that changed meanwhile says why it is now refused; a job that
            started to match since is not added to what was reviewed."""
            again = self._read_plan(plan.action, given, [i.job.key for i in plan.items])
            return plan_shown(again, app.operator, app.source.read_only)

        shown = plan_shown(plan, app.operator, app.source.read_only)
        label = ACTION_WORDS[plan.action].capitalize()
        confirm = ConfirmScreen(
            Text.assemble((f"{label}? ", "bold"), f"{len(plan.items)} held jobs"), shown.summary, shown.lines,
            shown.refusal, f"{label} {len(plan.allowed)} — confirm", dangerous=plan.action == "release",
            detail=shown.detail, recheck=recheck, basis=plan)

        def decided(confirmed: bool | None) -> None:
            confirmed_plan = confirm.shown.basis  # the plan the confirmation showed when `y` was pressed
            if confirmed and confirm.refusal is None and isinstance(confirmed_plan, BatchPlan):
                self.say(Text.assemble(("batch: ", "bold"), f"{plan.action} of {len(confirmed_plan.allowed)} jobs…"))
                self.apply(confirmed_plan, given)
            else:
                self.busy = False
                self.say(Text.assemble(("batch: ", "bold"), "cancelled — nothing was changed"))

        self.app.push_screen(confirm, decided)

    @work(thread=True, exclusive=True, exit_on_error=False, group="batch")
    def apply(self, plan: BatchPlan, given: dict[str, str]) -> None:
        """Take the action on the jobs the plan allowed, each its own transaction and event."""
        app = self.reclaim
        try:
            with app.ledger(write=True) as ledger:
                result = ledger.batch_apply(plan.action, plan, given, actor=app.operator)
        except Exception as e:  # nothing of a refused job was written
            self.refused(e)
            return
        self.post_message(self.Applied(batch_doc(plan.action, app.operator, plan, result)))

    def on_batch_screen_applied(self, message: Applied) -> None:
        doc = message.doc
        self.acted = {JobKey(d["job_id"], d["operation"]) for d in doc["done"]}
        said = batch_done_line(doc)
        refused = [j for j in doc["jobs"] if not j["allowed"]]
        if refused:
            first = refused[0]
            said += f"; first refused: {first['job_id']}: {first['refusal']}"
        self.dismiss(clean(said, 600))

