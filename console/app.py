"""The operator console: a Textual app over a ledger that workers in other processes are writing.

`make_app()` builds it (the CLI, the tests and the screenshot script share it); `run_console()` runs it.
The UI thread only draws: every ledger read and every remote call runs in a thread worker that opens
its own connection, and reports back with typed messages. A remote's SDK is imported only when a remote call is
about to happen (a query or a reconcile, in that action's worker): opening the overview, a group or a job screen
imports none. Quitting stops nothing but the console, and waits for none of these.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.actions import parse as parse_action
from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState, get_current_worker

from console import bindings
from console.bindings import Keymap, config_file_for, load_keymap
from console.commands import MATCHES, CommandError, job_candidates, parse_command
from console.live import FEED_SIZE, Abandoned, Follower, LedgerSource, Pulse, clock_time, detached
from console.message_log import MessageLog
from console.sanitize import clean, use_redactor
from console.screens.base import ReclaimScreen, reason_for
from console.screens.overview import OverviewScreen
from ledger import (
    Clock,
    Config,
    Event,
    Identity,
    Job,
    JobKey,
    Ledger,
    LedgerError,
    Liveness,
    Redactor,
    SavedView,
    connect,
    process_clock,
    shown_ledger,
)

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from console.screens.jobs import JobListScreen
    from ledger import RemoteCache

POLL_SECONDS = 0.1
STALL_SECONDS = 1.5
"""A follower poll still running after this long makes the header say STALE: a lock can hold a read for the
ledger's 5 s busy timeout (and a reconnect as long again)."""
STALL_CHECK_SECONDS = 0.25


INSTALLED_SCREENS: dict[str, tuple[str, str]] = {
    "jobs": ("console.screens.jobs", "JobListScreen"),
    "quotas": ("console.screens.quotas", "QuotasScreen"),
    "report": ("console.screens.report", "ReportScreen"),
    "evidence": ("console.screens.evidence", "EvidenceScreen"),
    "notifications": ("console.screens.notifications", "NotificationsScreen"),
}
"""The screens kept for the console's life, by name: (module, class). Each is imported and built the first time it
is shown (the job list right after the overview's first read, `ReclaimApp.prepare_job_list`), so the first frame
waits for the overview's modules alone."""


def installed_screen(module: str, cls: str) -> Callable[[], Screen[Any]]:
    """What `install_screen` keeps for an installed screen: Textual builds it with this on its first `get_screen`."""

    def build() -> Screen[Any]:
        return cast("Screen[Any]", getattr(importlib.import_module(module), cls)())

    return build


class ReclaimCommands(Provider):
    """The command palette's view of every console action: enabled ones run, disabled ones say why."""

    def entries(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """(title, help, run) for every action the palette offers on the current screen."""
        app = self.app
        assert isinstance(app, ReclaimApp)
        out: list[tuple[str, str, Callable[[], Any]]] = []
        screen = self.screen
        for binding in bindings.APP:
            out.append((binding.description, f"key {app.key_label(binding)}", partial(app.run_action, binding.action)))
        if isinstance(screen, ReclaimScreen):
            for binding in screen.BINDINGS:
                if not isinstance(binding, Binding) or binding.action == "back":
                    continue
                _, name, params = parse_action(binding.action)
                enabled = screen.check_action(name, params)
                help_text = f"key {app.key_label(binding)}"
                if not enabled:
                    help_text = f"disabled: {app.disabled_reason(screen, name, params)}"
                out.append((binding.description, help_text, partial(app.run_screen_action, screen, binding.action)))
        return out

    async def discover(self) -> Hits:
        for title, help_text, command in self.entries():
            yield DiscoveryHit(title, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, command in self.entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), command, help=help_text)


class ReclaimApp(App[int]):
    """The reclaim operator console."""

    CSS_PATH = "app.tcss"
    TITLE = "reclaim"
    BINDINGS = bindings.APP
    COMMANDS = App.COMMANDS | {ReclaimCommands}
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (160, "-wide")]
    """Each screen gets the class for its width: below 160 columns the overview stacks its panels."""
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-short"), (36, "-tall")]
    """Below 36 rows the overview's tiles go to one line and the latest events give their room to the held jobs."""

    last_seen: reactive[float | None] = reactive(None)
    stale: reactive[str] = reactive("")
    paused: reactive[bool] = reactive(False)
    remotes_paused: reactive[tuple[str, ...]] = reactive(())
    worker_liveness: reactive[Liveness | None] = reactive(None)
    awaiting_me: reactive[int | None] = reactive(None)
    """Held jobs awaiting this operator's approval (None: not an approver), as of the last pulse."""

    class LiveChanged(Message):
        """The follower saw the ledger change (or read it for the first time)."""

        def __init__(self, pulse: Pulse) -> None:
            self.pulse = pulse
            super().__init__()

    class LiveStale(Message):
        """The follower could not read the ledger; it keeps trying."""

        def __init__(self, reason: str) -> None:
            self.reason = reason
            super().__init__()

    class LiveAnswered(Message):
        """A follower poll that had stalled returned with nothing new: the view is live again."""

    class JobsFound(Message):
        """`:job` found these jobs (one, or one per operation sharing the id)."""

        def __init__(self, job_id: str, jobs: list[Job]) -> None:
            self.job_id = job_id
            self.jobs = jobs
            super().__init__()

    class ViewFound(Message):
        """`:view NAME` read the saved view."""

        def __init__(self, view: SavedView) -> None:
            self.view = view
            super().__init__()

    class ViewsListed(Message):
        """`:view` alone read the operator's saved views."""

        def __init__(self, views: list[SavedView]) -> None:
            self.views = views
            super().__init__()

    class CommandFailed(Message):
        """A command could not be carried out; `reason` says why, in one line."""

        def __init__(self, reason: str) -> None:
            self.reason = reason
            super().__init__()

    class LiveWorkers(Message):
        """What the header says about the workers changed (a pass was recorded, or the silence grew)."""

        def __init__(self, liveness: Liveness) -> None:
            self.liveness = liveness
            super().__init__()

    def __init__(
        self, source: LedgerSource, config: Config, operator: str | Identity, *, clock: Clock,
        keymap: Keymap | None = None, poll_seconds: float = POLL_SECONDS,
        start_job: tuple[str, str | None] | None = None,
    ) -> None:
        super().__init__()
        self.start_job = start_job
        """A job to open once the overview is up ((id, operation or None), e.g. from a seat link); only opened."""
        self.source = source
        self.config = config
        self.identity = operator if isinstance(operator, Identity) else Identity(operator, config.identity_source)
        self.operator = self.identity.name
        self.head_hash: str | None = None
        """The audit chain's head as of the last pulse (the newest event's hash)."""
        self.clock = clock
        self.keymap = keymap or Keymap({})
        self.poll_seconds = poll_seconds
        self._remotes: RemoteCache | None = None
        self._remotes_lock = threading.Lock()
        self.counts: dict[str, int] | None = None
        self.feed: list[Event] = []
        self.messages = MessageLog()
        """Every feedback line and toast said in this console, newest last (`L` shows them)."""
        self.pulses = 0
        self.polls = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_failure = ""
        self.polling_since: float | None = None
        """When the follower's poll in progress began (None between polls)."""

    @property
    def remotes(self) -> RemoteCache:
        """The remotes' adapters, built on first use (an action that asks a remote, in its worker): no adapter is
        built, and the worker's modules are not imported, before then."""
        with self._remotes_lock:  # one cache for the console's life, whichever worker asks first
            if self._remotes is None:
                from ledger import RemoteCache

                self._remotes = RemoteCache(self.config)
            return self._remotes

    # -- facts the widgets show ---------------------------------------------------------------------------
    @property
    def roles(self) -> list[str]:
        """The operator's roles, strongest first (a plain viewer has just 'viewer')."""
        roles = self.config.roles_of(self.operator)
        named = [r for r in ("approver", "triage", "sender") if r in roles]
        return named or ["viewer"]

    @property
    def operator_label(self) -> str:
        """'carol · approver' for the header."""
        return f"{self.operator} · {', '.join(self.roles)}"

    @property
    def display_path(self) -> str:
        """The ledger path, relative to the working folder when inside it, with ~ for home; a PostgreSQL
        ledger's URL without its password."""
        if isinstance(self.source.path, str):
            return shown_ledger(self.source.path)
        path = self.source.path.absolute()
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            pass
        try:
            return "~/" + str(path.relative_to(Path.home()))
        except ValueError:
            return str(path)

    def format_time(self, ts: float | None) -> str:
        """HH:MM:SS in the config's time zone."""
        return clock_time(ts, self.config.timezone)

    def key_label(self, binding: Binding) -> str:
        """The key a binding answers to now (keymap applied), as shown in the footer."""
        key = bindings.key_for(binding, self.keymap.keys).split(",")[0].strip()
        return self.get_key_display(Binding(key, binding.action, binding.description))

    def disabled_reason(self, screen: Screen[Any], action: str, params: tuple[object, ...]) -> str:
        """Why a screen's action is disabled (the screen's own words), for the palette and the disabled keys."""
        return reason_for(screen, action, params)

    def say(self, text: Text | str, *, error: bool = False) -> None:
        """Say `text` on the current screen's feedback line (a notification on a screen without one)."""
        screen = self.shown_screen()
        if screen is None:
            return  # the app is closing
        if isinstance(screen, ReclaimScreen):
            screen.feedback(text, error=error)
        else:
            self.notify(clean(text.plain if isinstance(text, Text) else text, 300, prose=isinstance(text, Text)),
                        severity="warning" if error else "information", markup=False)

    # -- lifecycle ------------------------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.keymap.keys:
            self.set_keymap(self.keymap.keys)
        for problem in self.keymap.problems:
            self.notify(clean(problem, 300), severity="warning", markup=False)
        for name, (module, cls) in INSTALLED_SCREENS.items():
            self.install_screen(installed_screen(module, cls), name)  # type: ignore[arg-type]  # built on first use
        self.push_screen(OverviewScreen())
        if self.start_job is not None:
            self.open_linked_job(*self.start_job)
        self.follow()
        self.set_interval(STALL_CHECK_SECONDS, self._check_stall)

    def on_unmount(self) -> None:
        self._stop.set()
        self._wake.set()

    # -- the live loop ----------------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="live")
    def follow(self) -> None:
        """Follow the ledger from a daemon thread, so a poll stuck on a locked ledger never holds up quitting."""
        worker = get_current_worker()
        try:
            detached(self._follow, lambda: worker.is_cancelled or self._stop.is_set(), name="reclaim-follower")
        except Abandoned:
            pass

    def _follow(self) -> None:
        """Poll `data_version` every ~0.1 s on a dedicated connection; post changes and staleness."""
        follower = Follower(self.source, self.config, self.clock, FEED_SIZE,
                            awaiting=lambda ledger: ledger.awaiting_count(self.operator))
        was_stale = ""
        workers_shown: tuple[str, bool] | None = None
        try:
            while not self._stop.is_set():
                if not self.paused or self._wake.is_set():
                    self._wake.clear()
                    self.polling_since = time.monotonic()
                    try:
                        pulse = follower.poll()
                    except (LedgerError, OSError) as e:
                        follower.close()
                        reason = clean(str(e) or type(e).__name__, 300)
                        if reason != was_stale:
                            self.post_message(self.LiveStale(reason))
                        was_stale = reason
                    else:
                        if pulse is not None:
                            was_stale = ""
                            self.post_message(self.LiveChanged(pulse))
                        elif self.stale:  # a poll that stalled came back with nothing new
                            self.post_message(self.LiveAnswered())
                        workers = follower.workers()
                        if workers is not None and (workers.short(), workers.silent) != workers_shown:
                            workers_shown = (workers.short(), workers.silent)
                            self.post_message(self.LiveWorkers(workers))
                    finally:
                        self.polling_since = None
                self.polls += 1
                if self.paused:
                    self._wake.wait(self.poll_seconds)
                elif not follower.behind:  # a burst still being read goes on at once
                    follower.wait(self.poll_seconds, self._wake)  # PostgreSQL: woken by NOTIFY
        finally:
            follower.close()

    def _check_stall(self) -> None:
        """STALE when the follower's poll has not returned for STALL_SECONDS (a lock holds it)."""
        since = self.polling_since
        if since is not None and not self.stale and time.monotonic() - since >= STALL_SECONDS:
            self.stale = (f"the ledger has not answered for {STALL_SECONDS:g} s (locked by another process?); "
                          "still waiting for it")

    def wake_follower(self) -> None:
        """Look at the ledger now (after our own write, or on request), even when paused."""
        self._wake.set()

    @on(LiveChanged)
    def _live_changed(self, message: LiveChanged) -> None:
        pulse = message.pulse
        self.pulses += 1
        self.counts = pulse.counts
        self.feed = list(pulse.events if pulse.reset else (self.feed + pulse.events))[-FEED_SIZE:]
        self.stale = ""
        self.remotes_paused = pulse.paused_remotes
        self.head_hash = pulse.head_hash
        self.awaiting_me = pulse.awaiting_me
        self.last_seen = pulse.seen_at
        for changed in self._live_screens():
            try:
                changed(pulse)
            except NoMatches:
                # A screen between states (pushed but not yet composed, or its widgets being removed as the app
                # closes) has nothing to draw on: it reads the counts and feed kept above when it resumes.
                pass

    def _live_screens(self) -> list[Callable[[Pulse], None]]:
        """The `ledger_changed` of the screens a change in the ledger redraws: the one on top and, under a dialog
        (a confirmation with a recheck, a form), the screen it covers, so neither says what is no longer true."""
        found: list[Callable[[Pulse], None]] = []
        for screen in reversed(self.screen_stack if self.shown_screen() is not None else []):
            changed = getattr(screen, "ledger_changed", None)
            if callable(changed):
                found.append(changed)
            if not isinstance(screen, ModalScreen):
                break
        return found

    @contextmanager
    def ledger(self, *, write: bool = False) -> Iterator[Ledger]:
        """The ledger for one read, or with `write` one operator action, on the calling thread (a worker's): a fresh
        connection, closed afterwards, with the console's config (under the ledger's policy since the console
        started) and clock. A write in a read-only console raises Refused before anything is opened."""
        with (self.source.writing() if write else self.source.reading()) as conn:
            yield Ledger(self.source.path, conn, self.config, self.clock)

    def shown_screen(self) -> Screen[object] | None:
        """The screen on top, or None while the app closes: a message from a worker or the follower may still
        arrive after the last screen was popped, and must then change nothing."""
        stack = self.screen_stack
        return stack[-1] if stack else None

    @on(LiveStale)
    def _live_stale(self, message: LiveStale) -> None:
        self.stale = message.reason

    @on(LiveAnswered)
    def _live_answered(self, message: LiveAnswered) -> None:
        self.stale = ""

    @on(LiveWorkers)
    def _live_workers(self, message: LiveWorkers) -> None:
        self.worker_liveness = message.liveness

    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a failed worker becomes a visible notification (never a crash)."""
        if event.state != WorkerState.ERROR or isinstance(event.worker.error, Abandoned):
            return
        error = event.worker.error
        text = clean(f"{event.worker.name or 'work'} failed: {error}", 300)
        if text != self._last_failure:
            self.notify(text, title="could not read or write the ledger", severity="error", markup=False)
        self._last_failure = text

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.worker_state_changed(event)

    # -- navigation ----------------------------------------------------------------------------------------------
    def _base(self) -> None:
        """Pop back to the overview."""
        while len(self.screen_stack) > 2:
            self.pop_screen()

    def go_back(self) -> None:
        """One screen back, never past the overview."""
        if len(self.screen_stack) > 2:
            self.pop_screen()

    def show_screen(self, name: str) -> None:
        """Show an installed screen (or the overview) right above the overview."""
        self._base()
        if name != "overview":
            self.push_screen(name)

    def job_list(self) -> JobListScreen:
        """The installed job list screen (built, and its module imported, on the first call)."""
        from console.screens.jobs import JobListScreen

        screen = self.get_screen("jobs")
        assert isinstance(screen, JobListScreen)
        return screen

    def show_group(self, group: str) -> None:
        """List one group's jobs: read the page first and show the list with it when the list is composed."""
        screen = self.job_list()
        if self.screen is screen:
            screen.show_group(group)
        elif screen.is_running:
            screen.open_group(group)
        else:
            self.show_screen("jobs")  # composes it (first use, before prepare_job_list ran)
            screen.show_group(group)

    def prepare_job_list(self) -> None:
        """Compose the job list off-screen while the console is idle, so the first switch only swaps data.

        Pushed and popped again in one batch (public `push_screen` / `pop_screen`): the installed screen stays
        mounted, nothing is painted in between, and the overview is current again before the next key is read.
        """
        screen = self.get_screen("jobs")
        if screen.is_running or screen in self.screen_stack or not isinstance(self.screen, OverviewScreen):
            return
        with self.batch_update():
            self.push_screen(screen)
            self.pop_screen()

    def show_listing(self, group: str | None, filter_text: str, said: Text | str = "") -> None:
        """The job list for `group` (None: the group it shows now) with `filter_text` typed in its filter."""
        screen = self.job_list()
        self.show_group(group or screen.group)
        screen.set_filter(filter_text)
        if said:
            screen.feedback(said)

    def open_job(self, key: JobKey) -> None:
        """Open the job screen."""
        from console.screens.job import JobScreen

        self.push_screen(JobScreen(key))

    def open_triage(self, key: JobKey) -> None:
        """Open guided triage for a job."""
        from console.screens.triage import TriageScreen

        self.push_screen(TriageScreen(key))

    async def run_screen_action(self, screen: Screen[Any], action: str) -> None:
        """Run a screen's action from the command palette (a disabled one only explains itself)."""
        _, name, params = parse_action(action)
        if screen.check_action(name, params):
            await screen.run_action(action)
        else:
            self.notify(clean(self.disabled_reason(screen, name, params), 300), title="not available",
                        severity="warning", markup=False)

    # -- command mode ---------------------------------------------------------------------------------------------
    def action_command(self) -> None:
        """Open the command line (`:held`, `:job <id> [operation]`, `:view <name>`, `:owner me`)."""
        from console.screens.command import CommandScreen

        if not isinstance(self.screen, CommandScreen):
            self.push_screen(CommandScreen(), self._command_typed)

    def _command_typed(self, line: str | None) -> None:
        if line is not None and line.strip():
            self.run_command(line)

    def run_command(self, line: str) -> None:
        """Carry out one command line; what is wrong with it is said on the feedback line."""
        try:
            command = parse_command(line)
        except CommandError as e:
            self.say(Text(clean(str(e), 300)), error=True)
            return
        if command.name == "held":
            self.show_listing("held", "", "held jobs, oldest first (:held)")
        elif command.name == "owner":
            who = self.operator if command.rest == "me" else command.rest
            self.show_listing(None, f"owner:{command.rest}", Text.assemble("jobs owned by ", clean(who, 60),
                                                                           " (/ edits the filter)"))
        elif command.name == "job":
            self.find_jobs(command.rest)
        elif command.rest:
            self.read_view(command.rest)
        else:
            self.read_views()

    @work(thread=True, exclusive=True, exit_on_error=False, group="command")
    def find_jobs(self, rest: str) -> None:
        """`:job`: the jobs the typed id names, trying the whole text as an id first (ids may hold spaces)."""
        with self.ledger() as ledger:
            for job_id, operation in job_candidates(rest, self.config.operations):
                jobs = ledger.jobs_named(job_id, operation)
                if jobs:
                    self.post_message(self.JobsFound(job_id, jobs))
                    return
            matches = ledger.jobs_matching(rest, MATCHES + 1)  # a part of an id, in every group
        if matches:
            self.post_message(self.JobsFound(rest, matches))
            return
        self.post_message(self.CommandFailed(
            f"no job id begins with or holds {clean(rest, 120)!r} (:job <id> <operation>, or / in the job list "
            "to search the other fields)"))

    @work(thread=True, exclusive=True, exit_on_error=False, group="linked-job")
    def open_linked_job(self, job_id: str, operation: str | None) -> None:
        """`reclaim console --job ID [--operation OP]` (a seat link): open that job's screen when it is in the
        ledger (one per operation sharing the id: a choice), else say it is not; nothing else is done with it."""
        with self.ledger() as ledger:
            jobs = ledger.jobs_named(job_id, operation)
        if jobs:
            self.post_message(self.JobsFound(job_id, jobs))
        else:
            named = f"{clean(job_id, 120)!r}" + (f" / {clean(operation, 80)!r}" if operation is not None else "")
            self.post_message(self.CommandFailed(f"the linked job {named} is not in this ledger; showing the "
                                                 "overview"))

    @work(thread=True, exclusive=True, exit_on_error=False, group="command")
    def read_view(self, name: str) -> None:
        """`:view NAME`: the operator's saved view."""
        try:
            with self.ledger() as ledger:
                view = ledger.view(self.operator, name)
        except LedgerError as e:
            self.post_message(self.CommandFailed(str(e)))
            return
        self.post_message(self.ViewFound(view))

    @work(thread=True, exclusive=True, exit_on_error=False, group="command")
    def read_views(self) -> None:
        """`:view` alone: the operator's saved views."""
        with self.ledger() as ledger:
            self.post_message(self.ViewsListed(ledger.views(self.operator)))

    @on(JobsFound)
    def _jobs_found(self, message: JobsFound) -> None:
        if len(message.jobs) == 1:
            self.open_job(message.jobs[0].key)
            return

        def picked(key: JobKey | None) -> None:
            if key is not None:
                self.open_job(key)

        from console.screens.pick import PickJobScreen, PickMatchScreen

        if any(job.job_id != message.job_id for job in message.jobs):  # a part of an id: the jobs it matched
            jobs = message.jobs[:MATCHES]
            self.push_screen(PickMatchScreen(message.job_id, jobs, len(message.jobs) > MATCHES), picked)
            return
        self.push_screen(PickJobScreen(message.job_id, message.jobs), picked)

    @on(ViewFound)
    def _view_found(self, message: ViewFound) -> None:
        view = message.view
        said = Text.assemble("saved view ", (clean(view.name, 80), "bold"), f": {view.group}")
        if view.filter:
            said.append(" · ")
            said.append(clean(view.filter, 200))
        self.show_listing(view.group, view.filter, said)

    @on(ViewsListed)
    def _views_listed(self, message: ViewsListed) -> None:
        if not message.views:
            self.say(f"{self.operator} has no saved views (reclaim views --save NAME --group held --filter "
                     "'owner:me')")
            return
        names = ", ".join(clean(v.name, 60) for v in message.views)
        self.say(f"saved views of {self.operator}: {names} — :view <name> shows one")

    @on(CommandFailed)
    def _command_failed(self, message: CommandFailed) -> None:
        self.say(Text(clean(message.reason, 300)), error=True)

    def action_overview(self) -> None:
        """Show the overview."""
        self.show_screen("overview")

    def action_jobs(self) -> None:
        """Show the job list (held, unless another group was chosen)."""
        screen = self.job_list()
        self.show_group(screen.group)

    def action_group(self, group: str) -> None:
        """List one group's jobs."""
        self.show_group(group)

    def action_quotas(self) -> None:
        """Show the quotas."""
        self.show_screen("quotas")

    def action_report(self) -> None:
        """Show the hold-resolution report of the last 7 days."""
        self.show_screen("report")

    def action_orphan_evidence(self) -> None:
        """Show the evidence for idem keys no job carries."""
        self.show_screen("evidence")

    def action_notifications(self) -> None:
        """Show the notifications."""
        self.show_screen("notifications")

    def log_said(self, screen: Screen[Any] | None, text: str, kind: str) -> None:
        """Keep a message a screen's feedback line said (or a toast) in the message log, with when and where."""
        where = getattr(screen, "log_name", None) or type(screen).__name__.removesuffix("Screen").lower()
        self.messages.add(self.clock.now(), str(where), text, kind)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """A toast, kept in the message log too."""
        self.log_said(self.shown_screen(), f"{title}: {message}" if title else message,
                      "error" if severity == "error" else "toast")
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def action_messages(self) -> None:
        """Show the message log: what the console said, newest last."""
        from console.screens.messages import MessagesScreen

        if not isinstance(self.screen, MessagesScreen):
            self.push_screen(MessagesScreen())

    def action_help(self) -> None:
        """Show the keys."""
        from console.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_pause(self) -> None:
        """Pause or resume live refresh."""
        self.paused = not self.paused
        if not self.paused:
            self.wake_follower()

    def action_refresh(self) -> None:
        """Look at the ledger now and reload the screen."""
        self.wake_follower()
        if isinstance(self.screen, ReclaimScreen):
            self.screen.reload()


def make_app(
    ledger_path: str | Path, config: Config, operator: str | Identity, read_only: bool = False,
    clock: Clock | None = None,
    *, config_path: str | Path | None = None, keymap: Keymap | None = None, poll_seconds: float = POLL_SECONDS,
    start_job: tuple[str, str | None] | None = None,
) -> ReclaimApp:
    """Build the console over `ledger_path` for `operator` (read-only: the ledger opens `mode=ro`, no actions).

    No remote's adapter is built and no SDK imported until an action asks the remote (in that action's worker).

    Key overrides come from `keymap`, else the `[keys]` table of `config_path` (or $RECLAIM_CONFIG, or
    reclaim.toml beside the config).
    """
    if keymap is None:
        keymap = load_keymap(config_file_for(config.base_dir, config_path))
    return ReclaimApp(
        LedgerSource(ledger_path, read_only), config, operator, clock=clock or process_clock(), keymap=keymap,
        poll_seconds=poll_seconds, start_job=start_job,
    )


def run_console(
    ledger_path: str | Path, config: Config, operator: str | Identity, read_only: bool = False, *,
    config_path: str | Path | None = None, start_job: tuple[str, str | None] | None = None,
) -> int:
    """Check the ledger opens (raising the ledger's one-line error if not), then run the console until quit.

    Every secret the config names is replaced by `[redacted:NAME]` in what the console draws.
    """
    use_redactor(Redactor.from_config(config))
    connect(ledger_path, readonly=True).close()
    app = make_app(ledger_path, config, operator, read_only, config_path=config_path, start_job=start_job)
    app.run()
    return app.return_code or 0
