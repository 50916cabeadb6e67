"""`:` — the command line: one line at the bottom of the screen; Enter runs it, Esc closes it.

The line is handed back to the app (`dismiss`) as typed; `console.commands` parses it and the app runs it. After
`job `, what is typed is looked up as a part of a job id in every group (off the UI thread, at most
`console.commands.MATCHES` jobs): the hint lists the matches, the line suggests the first id that begins with it
(→ takes it) and Tab completes (the longest common beginning, then cycling through the matches).
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import Suggester, SuggestFromList, SuggestionReady
from textual.widgets import Input, Label, Static
from textual.worker import get_current_worker

from console.bindings import COMMAND
from console.commands import COMMANDS, MATCHES, completion
from console.sanitize import clean
from ledger import Job

HINT = " · ".join(":" + usage.split(" — ")[0].lstrip(":") for usage in COMMANDS.values()) + " — Enter runs, Esc closes"
JOB = "job "
"""The command whose argument is completed from the ledger."""


class JobIdSuggester(Suggester):
    """Suggests the command names, and after `job ` the first matching job id that begins with what is typed (from
    the screen's last lookup; no ledger read here)."""

    def __init__(self, screen: CommandScreen) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.screen = screen
        self.commands = SuggestFromList(["held", JOB, "view ", "owner me"], case_sensitive=False)

    async def get_suggestion(self, value: str) -> str | None:
        """The line completed: a command name, or `job ` and a matching id beginning with the typed part."""
        if not value.startswith(JOB):
            return await self.commands.get_suggestion(value)
        return self.screen.suggestion(value[len(JOB):])


class CommandScreen(ModalScreen[str | None]):
    """A prompt for `:held`, `:job <id> [operation]`, `:view <name>`, `:owner me`; suggests and completes as you
    type."""

    BINDINGS = COMMAND

    class Matched(Message):
        """The jobs whose id begins with or holds `typed` (at most MATCHES + 1)."""

        def __init__(self, typed: str, jobs: list[Job]) -> None:
            self.typed = typed
            self.jobs = jobs
            super().__init__()

    def __init__(self) -> None:
        super().__init__()
        self.matches: tuple[str, list[Job]] = ("", [])
        """The last lookup: the typed part of an id and the jobs it matched."""
        self._completed: str | None = None  # what Tab last wrote after `job `

    def compose(self) -> ComposeResult:
        with Vertical(id="command-bar"):
            yield Static(Text(HINT, style="dim"), id="command-hint")
            with Horizontal(id="command-line"):
                yield Label(":", id="command-colon")
                yield Input(
                    placeholder="a command, e.g. job article 2026-12-01 #7",
                    suggester=JobIdSuggester(self),
                    id="command-input", compact=True, select_on_focus=False,
                )

    def on_mount(self) -> None:
        self.query_one("#command-input", Input).focus()

    def match_ids(self, typed: str) -> list[str]:
        """The ids the last lookup found for `typed` ([] when it was for something else), in its order."""
        looked, jobs = self.matches
        return list(dict.fromkeys(job.job_id for job in jobs)) if looked == typed else []

    def suggestion(self, typed: str) -> str | None:
        """The line `job ID` for the first id of the last lookup that begins with `typed` (and is longer), or None."""
        ids = self.match_ids(typed) if typed else []
        return next((JOB + i for i in ids if i.startswith(typed) and i != typed), None)

    @on(Input.Changed, "#command-input")
    def _changed(self, event: Input.Changed) -> None:
        typed = event.value[len(JOB):] if event.value.startswith(JOB) else ""
        if typed and typed == self._completed:
            return  # Tab wrote it: the matches stay those it cycles through
        self._completed = None
        if typed.strip():
            self.look_up(typed)
        else:
            self.matches = ("", [])
            self._hint(Text(HINT, style="dim"))

    @work(thread=True, exclusive=True, exit_on_error=False, group="command-matches")
    def look_up(self, typed: str) -> None:
        """Read the jobs whose id begins with or holds `typed`, off the UI thread."""
        with self.app.ledger() as ledger:  # type: ignore[attr-defined]
            jobs = ledger.jobs_matching(typed, MATCHES + 1)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Matched(typed, jobs))

    def on_command_screen_matched(self, message: Matched) -> None:
        line = self.query_one("#command-input", Input)
        if line.value != JOB + message.typed:
            return  # typed on since: a newer lookup is on its way
        self.matches = (message.typed, message.jobs)
        jobs = message.jobs[:MATCHES]
        if not jobs:
            self._hint(Text(f"no job id begins with or holds {clean(message.typed, 60)!r}", style="dim"))
        else:
            count = f"{MATCHES}+" if len(message.jobs) > MATCHES else str(len(jobs))
            names = ", ".join(f"{clean(job.job_id, 40)} ({job.state})" for job in jobs[:5])
            self._hint(Text.assemble((f"{count} match: ", "bold"), names, " …" if len(jobs) > 5 else "",
                                     " — Tab completes, Enter opens"))
        suggestion = self.suggestion(message.typed)
        if suggestion is not None:  # the line asked before the lookup was known: suggest now
            line.post_message(SuggestionReady(line.value, suggestion))

    def _hint(self, text: Text) -> None:
        self.query_one("#command-hint", Static).update(text)

    def action_complete(self) -> None:
        """Tab: complete the id after `job ` (the matches' longest common beginning, then the next match); on a
        command name, take the suggestion."""
        line = self.query_one("#command-input", Input)
        if not line.value.startswith(JOB):
            line.cursor_position = len(line.value)
            line.action_cursor_right()  # at the end, this takes the suggestion
            return
        typed = line.value[len(JOB):]
        done = completion(typed, self.match_ids(typed))
        if done != typed:
            self.matches = (done, self.matches[1])  # the same matches, for the next Tab to cycle on
            self._completed = done
            line.value = JOB + done
            line.cursor_position = len(line.value)

    @on(Input.Submitted, "#command-input")
    def _run(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        """Close the command line without running anything."""
        self.dismiss(None)
