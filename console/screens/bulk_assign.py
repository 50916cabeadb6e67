"""`b` on the held job list: give every held job its filter matches an owner and a due time (`bulk-assign`).

The fields are the action table's (owner, due, reason: all required, asked for in its words). Enter first counts
the jobs (`triage.bulk_assign(..., apply=False)`, which writes nothing) and shows that count in a confirmation whose
default is Cancel; only `y` (or the confirm button) assigns them, each with its own assign event by this operator.
It never sends or releases anything.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Input

from console.sanitize import clean, safe_text
from console.screens.confirm import ConfirmScreen
from console.screens.form import FormScreen, field
from ledger import ACTION_TABLE as ACTIONS
from ledger import JobFilter, JobKey, iso, parse_due

ACTION = ACTIONS["bulk-assign"]
FIELDS = {f.name: f for f in ACTION.fields}
ORDER = ("owner", "due", "reason")
"""The order the form shows its fields in (the action table's order is reason first)."""



def preview_words(count: int, filter_text: str, owner: str, due: str, due_at: float) -> str:
    """'assign 7 held jobs matching `op:article.*` to bob, due 2h (2026-12-01T11:00:00Z)' — the count preview, in one line."""
    jobs = "1 held job" if count == 1 else f"{count} held jobs"
    matching = f"matching `{clean(filter_text, 200)}`" if filter_text.strip() else "(no filter: every held job)"
    return f"assign {jobs} {matching} to {clean(owner, 80)}, due {clean(due, 40)} ({iso(due_at)})"


class BulkAssignScreen(FormScreen):
    """Owner, due and reason for every held job the list's filter matches; a count preview, then a confirmation."""

    REFUSED = "bulk assign refused"

    class Counted(Message):
        """The count preview: which jobs would be assigned, for the given input (nothing written)."""

        def __init__(self, keys: list[JobKey], due_at: float, given: dict[str, str]) -> None:
            self.keys = keys
            self.count = len(keys)
            self.due_at = due_at
            self.given = given
            super().__init__()

    class Assigned(Message):
        """The jobs were assigned."""

        def __init__(self, assigned: int, previewed: int, given: dict[str, str]) -> None:
            self.assigned = assigned
            self.previewed = previewed
            self.given = given
            super().__init__()


    def __init__(self, filter_text: str) -> None:
        self.filter_text = filter_text
        matching = Text.assemble("matching ", safe_text(filter_text, 200, style="bold")) if filter_text.strip() \
            else Text("(no filter: every held job)")
        super().__init__(Text.assemble(("Bulk assign held jobs ", "bold"), matching),
                         Text(f"{ACTION.summary}. Enter counts the jobs first; the count is shown before anything "
                              "is written."))

    def fields(self) -> ComposeResult:
        yield field("owner", Input(placeholder="who sees these through", id="form-owner", compact=True,
                                   max_length=200))
        yield field("due", Input(placeholder="2h, 30m, 2d, tomorrow 09:00 or an ISO time", id="form-due",
                                 compact=True, max_length=100))
        yield field("reason", Input(placeholder="recorded with each assign (Enter counts the jobs)", id="form-reason",
                                    compact=True, max_length=500))

    def given(self) -> dict[str, str]:
        """What the operator typed, by the action table's field names."""
        return {name: self.query_one(f"#form-{name}", Input).value for name in ORDER}

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        """Enter: move to the first field still blank (saying what to type), else count the jobs."""
        event.stop()
        if self.busy:
            return
        given = self.given()
        for name in ORDER:
            if FIELDS[name].problem(given[name]) is not None:
                self.query_one(f"#form-{name}", Input).focus()
                self.say(Text.assemble(("bulk assign: ", "bold"), FIELDS[name].ask, " — then Enter"))
                return
        self.busy = True
        self.say("counting the held jobs the filter matches…")
        self.count(given)

    @work(thread=True, exclusive=True, exit_on_error=False, group="bulk-assign")
    def count(self, given: dict[str, str]) -> None:
        """The count preview: parse the due time and the filter, check the role, count the matches; write nothing."""
        app = self.reclaim
        try:
            due_at = parse_due(given["due"], app.clock.now(), app.config.timezone, name="due")
            flt = JobFilter.parse(self.filter_text, me=app.operator, now=app.clock.now()) if self.filter_text.strip() \
                else None
            with app.ledger() as ledger:
                done = ledger.bulk_assign(flt, given["owner"], due_at, actor=app.operator, reason=given["reason"],
                                          apply=False)
        except Exception as e:  # refused or bad input: said in the form; nothing was written
            self.refused(e)
            return
        self.post_message(self.Counted(done.matched, due_at, given))

    def on_bulk_assign_screen_counted(self, message: Counted) -> None:
        given = message.given
        words = preview_words(message.count, self.filter_text, given["owner"], given["due"], message.due_at)
        refusal = None
        if message.count == 0:
            refusal = "no held job matches the filter; there is nothing to assign"
        elif self.reclaim.source.read_only:
            refusal = "the console is read-only (--read-only)"
        self.say(Text.assemble(("preview: ", "bold"), words))

        def decided(confirmed: bool | None) -> None:
            if confirmed and refusal is None:
                self.say(Text.assemble(("assigning: ", "bold"), words, "…"))
                self.apply(given, message.due_at, message.keys)
            else:
                self.busy = False
                self.say(Text.assemble(("bulk assign: ", "bold"), "cancelled — nothing was changed"))

        self.app.push_screen(
            ConfirmScreen(Text.assemble(("Bulk assign? ", "bold"), f"{message.count} held jobs"), words,
                          [f"{f.name}: {given[f.name]}" for f in ACTION.fields], refusal,
                          f"Assign {message.count} — confirm"),
            decided,
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="bulk-assign")
    def apply(self, given: dict[str, str], due_at: float, previewed: list[JobKey]) -> None:
        """Assign the previewed jobs that the filter still matches (each its own assign event), as this operator;
        a job that started to match after the preview is not touched."""
        app = self.reclaim
        try:
            flt = JobFilter.parse(self.filter_text, me=app.operator, now=app.clock.now()) if self.filter_text.strip() \
                else None
            with app.ledger(write=True) as ledger:
                done = ledger.bulk_assign(flt, given["owner"], due_at, actor=app.operator, reason=given["reason"],
                                          apply=True, only=previewed)
        except Exception as e:  # each assign is its own transaction: what was refused wrote nothing
            self.refused(e)
            return
        self.post_message(self.Assigned(done.assigned, len(previewed), given))

    def on_bulk_assign_screen_assigned(self, message: Assigned) -> None:
        said = f"bulk assign: assigned {message.assigned} held jobs to {clean(message.given['owner'], 80)}"
        if message.assigned != message.previewed:
            said += (f" (the preview counted {message.previewed}; the others left the held list in between; "
                     "jobs held since the preview were not touched)")
        self.dismiss(said)

