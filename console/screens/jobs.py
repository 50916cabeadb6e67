"""A group's jobs, one page at a time from the ledger, sorted by the ledger by any column and filtered by typing.

A click on a column header sorts by that column (a second click flips the direction); `s` flips the direction and `S`
moves the sort to the next column (age, job, operation, state, target, owner, try, last word). The stage is computed
from a job's events, not a column of the ledger, so it is not a sort.

`w` shows one of the operator's saved views, `W` saves the group and filter as one, `b` bulk-assigns the held jobs
the filter matches (count first, then a confirmation). Space marks a held job; `B` decides the marked jobs (else the
held jobs the filter matches) at once: one finding, or one release, reject or remediate, planned and confirmed once,
each job its own event (console.screens.batch). A filter the ledger refuses (an unknown key) is said on the
feedback line and leaves the list as it was; a filter that matches no job of the group says how many it matches in
the other groups, and `g` lists the group it matches in (held or failed first, else the one with most).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, Label
from textual.worker import Worker, WorkerState, get_current_worker

from console.bindings import APP, GROUP_ORDER, JOBS
from console.live import PAGE_SIZE, PageRequest, Pulse
from console.sanitize import clean
from console.screens.base import TRIAGE_STATES, ReclaimScreen, job_left_text
from console.screens.bulk_assign import ACTION as BULK_ASSIGN
from console.screens.bulk_assign import BulkAssignScreen
from console.screens.pick import PickViewScreen
from console.screens.save_view import SaveViewScreen, view_words
from console.widgets.feedback_line import FeedbackLine
from console.widgets.filter_bar import FilterBar
from console.widgets.group_counts import GroupCounts
from console.widgets.group_tile import GroupTile
from console.widgets.job_table import JobTable
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import BATCH_ACTIONS, SORTS, Job, JobKey, JobPage, SavedView, get_action

JOBS_BY_ID = {b.id: b for b in JOBS}
HELD_KEY = next(b for b in APP if b.id == "app.group.held")
ELSEWHERE_CAP = 100
"""A filter that matches no job in the group listed counts the other groups' matches up to this (more reads "100+")."""
TRIAGE_GROUPS = ("held", "failed")
"""The groups `g` prefers when the filter matches jobs in several: where a person acts."""
SHOW_WAIT_S = 0.25
"""How long a switch from another screen waits for the page before showing the job list without it."""


class JobListScreen(ReclaimScreen):
    """Paged from `queries.list_jobs` (never all rows in memory); `/` filters, a header click or `S` sorts, `s`
    flips the order."""

    BINDINGS = JOBS
    AUTO_FOCUS = "#jobs-table"

    group: reactive[str] = reactive("held", init=False)
    oldest_first: reactive[bool] = reactive(True, init=False)
    """Ascending by `sort` (for age: the oldest first)."""
    sort: reactive[str] = reactive("age", init=False)
    """The ledger's sort key of the page (`ledger.SORTS`)."""
    offset: reactive[int] = reactive(0, init=False)
    filter_text: reactive[str] = reactive("", init=False)

    class Loaded(Message):
        """A page arrived."""

        def __init__(self, page: JobPage) -> None:
            self.page = page
            super().__init__()

    class Elsewhere(Message):
        """How many jobs of each group the filter matches (read because it matched none in `group`)."""

        def __init__(self, group: str, filter_text: str, counts: dict[str, int]) -> None:
            self.group = group
            self.filter_text = filter_text
            self.counts = counts
            super().__init__()

    class ViewsRead(Message):
        """The operator's saved views, for the picker."""

        def __init__(self, views: list[SavedView]) -> None:
            self.views = views
            super().__init__()

    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        super().__init__()
        self.page: JobPage | None = None
        self.page_size = page_size
        self._reading: tuple[PageRequest, Worker[None]] | None = None
        self._info: Text | None = None
        self._show_over: Screen[Any] | None = None  # open_group(): show this screen over that one once loaded
        self._show_timer: Timer | None = None
        self._fresh = False
        self._refused = False  # the feedback line says the filter was refused
        self._acted: set[JobKey] = set()  # the jobs this console's last batch acted on
        self._elsewhere: str | None = None  # the group `g` goes to: the filter matches none here, some there
        self.marked: dict[JobKey, None] = {}
        """The held jobs marked for a batch decision, in the order they were marked."""

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        yield GroupCounts(id="jobs-counts")
        yield FilterBar(id="jobs-filter")
        yield Label("", id="jobs-info")
        yield JobTable(id="jobs-table")
        yield FeedbackLine(id="feedback")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(GroupCounts).current = self.group
        if self.filter_text:
            self.query_one(FilterBar).value = self.filter_text  # set by a command before the list was first shown

    def resumed(self) -> None:
        if self.reclaim.counts is not None:
            self.query_one(GroupCounts).show_counts(self.reclaim.counts)
        if self._fresh:
            self._fresh = False  # shown because its page just arrived: no second read
        else:
            self.reload()

    def ledger_changed(self, pulse: Pulse) -> None:
        self.query_one(GroupCounts).show_counts(pulse.counts)
        if pulse.touches_group(self.group):
            self.reload(again=True)

    def watch_group(self, group: str) -> None:
        if self.is_mounted:
            self.query_one(GroupCounts).current = group
        self.offset = 0
        self.reload()

    def watch_oldest_first(self) -> None:
        self.offset = 0
        self.reload()

    def watch_sort(self) -> None:
        self.offset = 0
        self.reload()

    def watch_offset(self) -> None:
        self.reload()

    def watch_filter_text(self) -> None:
        self.offset = 0
        self.reload()

    def reload(self, again: bool = False) -> None:
        """Read the page the screen is set to, unless that very read is already on its way (`again` re-reads)."""
        request = PageRequest(self.group, self.offset, self.oldest_first, self.filter_text, self.page_size, self.sort)
        if not again and self._reading is not None:
            pending, worker = self._reading
            if pending == request and worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
                return
        self._reading = (request, self.load(request))

    @work(thread=True, exclusive=True, exit_on_error=False, group="jobs-page")
    def load(self, request: PageRequest) -> None:
        """Read one page (page size + 1 rows) off the UI thread."""
        app = self.reclaim
        with app.ledger() as ledger:
            page = ledger.page(request.group, offset=request.offset, oldest_first=request.oldest_first,
                               filter_text=request.filter_text, me=app.operator, page_size=request.page_size,
                               sort=request.sort)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(page))

    def on_job_list_screen_loaded(self, message: Loaded) -> None:
        page = message.page
        if (page.group, page.offset, page.oldest_first, page.filter_text, page.sort) != (
            self.group, self.offset, self.oldest_first, self.filter_text, self.sort
        ):
            return  # an older request; a newer one is on its way
        if not self.is_mounted:
            return  # read before the screen was first shown; its resume reads again
        if not self.query(JobTable):
            return  # its widgets are already gone: the console is quitting while the page was read
        if page.error:  # the filter was refused: say why, and leave the rows shown as they were
            self.page = page
            self._refused = True
            self.feedback(Text.assemble(("filter refused: ", "bold"), page.error, " — the list is unchanged"),
                          error=True)
            self._show_info(Text.assemble(("filter refused: ", "bold red"), page.error))
            self.loaded = True
            self.refresh_bindings()
            if self._show_over is not None:
                self._show_now(True)
            return
        if self._refused:
            self._refused = False
            self.feedback("")
        shown = self.page
        same = shown is not None and (shown.group, shown.offset, shown.oldest_first, shown.filter_text,
                                      shown.sort) == (page.group, page.offset, page.oldest_first, page.filter_text,
                                                      page.sort)
        self.page = page
        self.query_one(JobTable).show_page(page, self.reclaim.clock.now(), follow=same)
        total = (self.reclaim.counts or {}).get(page.group)
        first, last = page.offset + 1, page.offset + len(page.jobs)
        if not page.jobs:
            span = "no jobs" if page.offset == 0 else "no more jobs"
        else:
            span = f"rows {first:,}–{last:,}"
            if not page.filter_text and total is not None:
                span += f" of {total:,}"
        order = order_words(page.sort, page.oldest_first)
        more = " · ] next page" if page.has_more else ""
        prev = " · [ previous page" if page.offset else ""
        info = Text.assemble((page.group, "bold"), f" · {span} · {order}{more}{prev}")
        if page.filter_text:
            info.append(" · filtered", style="bold")
        self._show_info(info)
        self._elsewhere = None
        if page.filter_text.strip() and not page.jobs and page.offset == 0:
            self.look_elsewhere(page.group, page.filter_text)
        self.loaded = True
        self.refresh_bindings()  # `t` depends on the job at the cursor
        if self._show_over is not None:
            # Shown after the table has taken the rows in (its size settles on idle), so one paint has them.
            self.query_one(JobTable).call_next(self._show_now, True)

    def _show_info(self, info: Text) -> None:
        if info != self._info:
            self._info = info
            self.query_one("#jobs-info", Label).update(info)

    @on(Input.Changed, "#jobs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        words = event.value.split(maxsplit=1)
        if words and words[0] in GROUP_ORDER and (len(words) > 1 or event.value.endswith(" ")):
            self.group = words[0]  # "/held owner:me": a leading group name picks the group
            self.filter_text = words[1] if len(words) > 1 else ""
        else:
            self.filter_text = event.value

    @on(Input.Submitted, "#jobs-filter")
    def _filter_submitted(self) -> None:
        self.query_one(JobTable).focus()

    def on_job_table_opened(self, message: JobTable.Opened) -> None:
        self.reclaim.open_job(message.key)

    def on_job_table_job_left(self, message: JobTable.JobLeft) -> None:
        if message.key in self._acted:
            return  # it left because of this console's own batch, which the feedback line already reports
        page = self.page
        where = f"the {page.group} jobs" + (" shown (filtered)" if page and page.filter_text else "") if page else "the list"
        table = self.query_one(JobTable)
        empty = message.now_on is None
        self.feedback(job_left_text(message.key, message.now_on, where, self.reclaim.feed),
                      while_true=(lambda: table.key_at_cursor() is None) if empty else None)

    def on_data_table_row_highlighted(self) -> None:
        self.refresh_bindings()

    def on_job_table_sort_requested(self, message: JobTable.SortRequested) -> None:
        if message.sort is None:
            self.feedback(f"the {message.label} is worked out from each job's events, not kept by the ledger: the "
                          "list cannot be sorted by it")
        elif message.sort == self.sort:
            self.action_toggle_sort()
        else:
            self.sort_by(message.sort)

    def on_group_tile_selected(self, message: GroupTile.Selected) -> None:
        self.group = message.group

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "triage":
            job = self._job_at_cursor()
            return True if job is not None and job.state in TRIAGE_STATES else None
        if action == "bulk_assign":
            return True if self._bulk_refusal() is None else None
        if action == "mark":
            job = self._job_at_cursor()
            return True if job is not None and job.state == "held" else None
        if action == "batch":
            return True if self._batch_refusal() is None else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        if action == "triage":
            job = self._job_at_cursor()
            if job is None:
                return "no job at the cursor"
            return f"{clean(job.job_id, 80)} is {job.state}; only held or failed jobs are triaged"
        if action == "bulk_assign":
            return self._bulk_refusal() or "not available here"
        if action == "mark":
            job = self._job_at_cursor()
            if job is None:
                return "no job at the cursor"
            return f"{clean(job.job_id, 80)} is {job.state}; only held jobs are marked for a batch decision"
        if action == "batch":
            return self._batch_refusal() or "not available here"
        return super().disabled_reason(action, params)

    def _batch_refusal(self) -> str | None:
        """Why `B` may not open the batch decision now (read-only, neither role a batch needs, the group, a refused
        filter), or None. What each job allows this operator is the plan's own question, job by job."""
        app = self.reclaim
        if app.source.read_only:
            return "the console is read-only (--read-only)"
        roles = app.config.roles_of(app.operator)
        if not any(get_action(name).role in roles for name in BATCH_ACTIONS):
            return (f"{app.operator} has neither the triage nor the approver role a batch needs (roles come from "
                    "[operators] in the config)")
        if self.marked:
            return None
        if self.group != "held":
            held = self.reclaim.key_label(HELD_KEY)
            return f"a batch decides held jobs; this list shows {self.group} jobs ({held} shows the held jobs)"
        if self.page is not None and self.page.error and self.page.filter_text == self.filter_text:
            return f"the filter is refused: {self.page.error}"
        return None

    def action_mark(self) -> None:
        """Mark (or unmark) the held job at the cursor for a batch decision, and move to the next row."""
        job = self._job_at_cursor()
        if job is None or job.state != "held":
            return
        if job.key in self.marked:
            del self.marked[job.key]
        else:
            self.marked[job.key] = None
        table = self.query_one(JobTable)
        table.set_marks(set(self.marked))
        table.action_cursor_down()
        self._say_marks()

    def _say_marks(self) -> None:
        n = len(self.marked)
        key = self.reclaim.key_label(JOBS_BY_ID["jobs.batch"])
        self.feedback(f"{n} held job{'s' if n != 1 else ''} marked — {key} decides them at once" if n else
                      "no job marked")

    def action_batch(self) -> None:
        """Decide the marked held jobs (else those the filter matches) at once: a plan, then one confirmation."""
        refusal = self._batch_refusal()
        if refusal is not None:
            self.feedback(Text.assemble(("batch not available: ", "bold"), refusal), error=True)
            return
        from console.screens.batch import BatchScreen

        form = BatchScreen(self.filter_text, list(self.marked))
        self.app.push_screen(form, lambda said: self._batch_done(said, form.acted))

    def _batch_done(self, said: str | None, acted: set[JobKey]) -> None:
        if said:
            self._acted = acted
            self.marked.clear()
            self.query_one(JobTable).set_marks(set())
        self._form_done(said)

    def _bulk_refusal(self) -> str | None:
        """Why `b` may not open the bulk assign now (the action table's role, the group, the filter), or None."""
        app = self.reclaim
        if BULK_ASSIGN.role not in app.config.roles_of(app.operator):
            return BULK_ASSIGN.role_refusal(app.operator)
        if app.source.read_only:
            return "the console is read-only (--read-only)"
        if self.group != "held":
            held = self.reclaim.key_label(HELD_KEY)
            return f"bulk assign acts on held jobs; this list shows {self.group} jobs ({held} shows the held jobs)"
        if self.page is not None and self.page.error and self.page.filter_text == self.filter_text:
            return f"the filter is refused: {self.page.error}"
        return None

    def _job_at_cursor(self) -> Job | None:
        tables = self.query(JobTable)
        return tables.first().job_at_cursor() if tables else None

    def action_triage(self) -> None:
        """Open guided triage for the (held or failed) job at the cursor."""
        job = self._job_at_cursor()
        if job is not None and job.state in TRIAGE_STATES:
            self.reclaim.open_triage(job.key)

    def action_filter(self) -> None:
        """Focus the filter."""
        self.query_one(FilterBar).focus()

    def action_toggle_sort(self) -> None:
        """Flip the order: oldest first <-> newest first, or ascending <-> descending by another column."""
        self.oldest_first = not self.oldest_first

    def action_next_sort(self) -> None:
        """Sort by the next column (`ledger.SORTS`, after the last back to age), ascending."""
        self.sort_by(SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)] if self.sort in SORTS else "age")

    def sort_by(self, sort: str) -> None:
        """Have the ledger sort the list by `sort` (`ledger.SORTS`), ascending (for age: the oldest first); the
        first page is read again."""
        self.set_reactive(JobListScreen.oldest_first, True)  # read once, by the sort's watcher
        if sort == self.sort:
            self.offset = 0
            self.reload()
        else:
            self.sort = sort

    @work(thread=True, exclusive=True, exit_on_error=False, group="jobs-elsewhere")
    def look_elsewhere(self, group: str, filter_text: str) -> None:
        """Count, off the UI thread, the jobs of every group the filter matches (it matched none in `group`)."""
        app = self.reclaim
        with app.ledger() as ledger:
            counts = ledger.match_counts(filter_text, me=app.operator, cap=ELSEWHERE_CAP)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Elsewhere(group, filter_text, counts))

    def on_job_list_screen_elsewhere(self, message: Elsewhere) -> None:
        page = self.page
        if (message.group, message.filter_text) != (self.group, self.filter_text) or page is None or page.jobs:
            return  # the list moved on meanwhile
        there = {g: n for g, n in message.counts.items() if g != message.group}
        shown = clean(message.filter_text, 60)
        if not there:
            self.feedback(f"no job in any group matches {shown!r}")
            return
        self._elsewhere = max(there, key=lambda g: (g in TRIAGE_GROUPS, there[g]))
        counts = ", ".join(f"{ELSEWHERE_CAP}+ in {g}" if n > ELSEWHERE_CAP else f"{n} in {g}"
                           for g, n in there.items())
        key = self.reclaim.key_label(JOBS_BY_ID["jobs.go_matches"])
        self.feedback(Text.assemble(f"no {message.group} job matches {shown!r}: {counts} — ",
                                    (key, "bold"), f" lists those in {self._elsewhere}"), prompt=True)

    def action_go_matches(self) -> None:
        """List the group where the filter matches jobs (it matched none in this one); the filter stays."""
        if self._elsewhere is None:
            self.feedback("the filter matches jobs in this group, or in none: nothing to go to")
            return
        group, self._elsewhere = self._elsewhere, None
        self.feedback("")
        self.group = group

    def action_next_page(self) -> None:
        """Show the next page, when there is one."""
        if self.page is not None and self.page.has_more:
            self.offset = self.page.offset + self.page_size

    def action_prev_page(self) -> None:
        """Show the previous page."""
        self.offset = max(self.offset - self.page_size, 0)

    # -- saved views and bulk assign ----------------------------------------------------------------------------
    def action_views(self) -> None:
        """Read the operator's saved views, then offer them in a picker."""
        self.read_views()

    @work(thread=True, exclusive=True, exit_on_error=False, group="jobs-views")
    def read_views(self) -> None:
        """The operator's saved views, read off the UI thread."""
        app = self.reclaim
        with app.ledger() as ledger:
            views = ledger.views(app.operator)
        self.post_message(self.ViewsRead(views))

    def on_job_list_screen_views_read(self, message: ViewsRead) -> None:
        key = self.reclaim.key_label(JOBS_BY_ID["jobs.save_view"])
        if not message.views:
            self.feedback(f"{self.reclaim.operator} has no saved views yet — {key} saves this group and filter as one")
            return

        def picked(view: SavedView | None) -> None:
            if view is not None:
                self.reclaim.show_listing(view.group, view.filter,
                                          Text.assemble("saved view ", (clean(view.name, 80), "bold"), ": ",
                                                        view_words(view.group, view.filter)))

        self.app.push_screen(PickViewScreen(self.reclaim.operator, message.views, key), picked)

    def action_save_view(self) -> None:
        """Ask for a name, then save this group and filter as one of the operator's views."""
        self.app.push_screen(SaveViewScreen(self.group, self.filter_text), self._form_done)

    def action_bulk_assign(self) -> None:
        """Open the bulk assign for the held jobs the filter matches (a count preview comes first)."""
        refusal = self._bulk_refusal()
        if refusal is not None:
            self.feedback(Text.assemble(("bulk assign not available: ", "bold"), refusal), error=True)
            return
        self.app.push_screen(BulkAssignScreen(self.filter_text), self._form_done)

    def _form_done(self, said: str | None) -> None:
        if said:
            self.feedback(Text(clean(said, 400)))
            self.reclaim.wake_follower()
            self.reload(again=True)

    def set_filter(self, filter_text: str) -> None:
        """Type `filter_text` into the filter (a command or a saved view chose it); its page is read again."""
        self.filter_text = filter_text
        bars = self.query(FilterBar)
        if bars and bars.first().value != filter_text:
            bars.first().value = filter_text

    def show_group(self, group: str) -> None:
        """List `group` (one of the console groups); its first page is read at once."""
        if group in GROUP_ORDER:
            self.group = group
            self.reload()

    def open_group(self, group: str) -> None:
        """From another screen: read `group`'s first page, then show this screen with it (one paint, not two).

        The screen is shown anyway after SHOW_WAIT_S, so a slow or locked ledger never makes the key feel dead;
        if the operator went elsewhere meanwhile, it is not shown at all.
        """
        self._show_over = self.app.screen
        if self._show_timer is not None:
            self._show_timer.stop()
        self._show_timer = self.set_timer(SHOW_WAIT_S, self._show_now)
        self.show_group(group)

    def _show_now(self, fresh: bool = False) -> None:
        over, self._show_over = self._show_over, None
        if self._show_timer is not None:
            self._show_timer.stop()
            self._show_timer = None
        if over is not None and self.app.screen is over:
            self._fresh = fresh
            self.reclaim.show_screen("jobs")


SORT_WORDS = {"job": "job id", "attempt": "try", "reason": "last word"}
"""How the info line names a sort key that is not the column's label."""


def order_words(sort: str, ascending: bool) -> str:
    """The info line's words for the list's order: "oldest first" / "newest first" for age, else the column and the
    direction ("by owner A→Z")."""
    if sort == "age":
        return "oldest first" if ascending else "newest first"
    name = SORT_WORDS.get(sort, sort)
    if sort == "attempt":
        return f"by {name} " + ("1→9" if ascending else "9→1")
    return f"by {name} " + ("A→Z" if ascending else "Z→A")
