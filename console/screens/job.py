"""One job: every field, the event timeline, findings, the latest remote snapshot, fenced writes, and why held."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from console.bindings import JOB
from console.job_link import job_link
from console.live import Pulse, clock_time
from console.sanitize import clean, compact_json, safe_json, safe_text
from console.screens.base import TRIAGE_STATES, ReclaimScreen
from console.screens.job_read import JobRead, RemoteAnswer, read_job_then_remote
from console.times import full_time, readable_detail
from console.times import when as time_and_age
from console.widgets.console_link import ConsoleLink, copy_console_url
from console.widgets.event_feed import event_summary
from console.widgets.feedback_line import FeedbackLine
from console.widgets.field_table import FieldTable
from console.widgets.held_explanation import HeldExplanation
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from console.widgets.timeline import Timeline
from ledger import INVALID, JobDetail, JobKey, valid_time

COPY_NAMES = {"id": "job id", "idem": "idem key", "handle": "handle"}
NARROW = 110
"""Below this many columns the job's fields are listed one per line."""
READING_REMOTE = "asking which remote this is and what it can answer…"


def job_title(detail: JobDetail) -> Text:
    """'Job <id> · <operation> · <state>' with the untrusted parts literal."""
    job = detail.job
    style = "bold red" if job.state in TRIAGE_STATES else "bold"
    return Text.assemble(
        ("Job ", "bold"), safe_text(job.job_id, 100, style="bold"), ("  ·  ", "dim"), safe_text(job.operation, 60),
        ("  ·  ", "dim"), (job.state, style),
    )


def _or_none(lines: Text, empty: str) -> Text:
    """`lines` without its last newline, or `empty` (dim) when there are none. (Text.rstrip() returns None.)"""
    lines.rstrip()
    return lines if lines.plain else Text(empty, style="dim")


def snapshot_text(detail: JobDetail, tz: str) -> Text:
    """The latest remote query: when, by whom, what the remote said, and its raw snapshot (literal)."""
    q = detail.latest_query
    if q is None:
        return Text("No query recorded for this attempt yet.", style="dim")
    text = Text.assemble(
        (clock_time(q.at, tz, with_date=True), ""), " by ", safe_text(q.actor, 40), " — remote state ",
        (str(q.detail.get("remote_state")), "bold"),
    )
    if q.detail.get("remote_state") == "not_found" and q.detail.get("handle"):
        text.append("\nthe remote no longer has it (retention): this says nothing about whether it ran; "
                    "the finding it supports is cannot_determine", style="bold")
    for label in ("handle", "error"):
        if q.detail.get(label):
            text.append(f"\n{label}: ", style="bold")
            text.append_text(safe_text(q.detail[label], 500, prose=label == "error"))
    text.append("\n")
    text.append_text(safe_json(q.detail.get("snapshot"), 1500))
    return text


_SOURCES = {"query": "query", "webhook": "signed webhook", "fenced_outcome": "fenced accepted send"}


def evidence_text(detail: JobDetail, tz: str) -> Text:
    """Every source of evidence for the job, newest last, with duplicate sends in red."""
    text = Text()
    for d in detail.duplicates:
        text.append(f"{clock_time(d.at, tz, with_date=True)}  DUPLICATE SEND: ", style="bold red")
        text.append_text(safe_text(d.detail.get("handle"), 120, style="bold red"))
        text.append(f" (attempt {d.detail.get('attempt')}; cancel: {d.detail.get('cancel') or 'not needed'}) "
                    "— a second remote interaction for this idem key; never delivered as the result\n", style="red")
    for ev in detail.evidence:
        text.append(f"{clock_time(ev.at, tz, with_date=True)}  ")
        text.append(_SOURCES.get(ev.source, ev.source), style="bold")
        text.append(f"  attempt {ev.attempt if ev.attempt is not None else '?'}  says ")
        said = {"gone": "the remote no longer has it (retention)", "absent": "not there"}.get(
            ev.remote_state, ev.remote_state)
        text.append(said, style="bold")
        if ev.handle:
            text.append("  handle ")
            text.append_text(safe_text(ev.handle, 120))
        if ev.ref:
            text.append("  ")
            text.append_text(safe_text(ev.ref, 80, style="dim"))
        text.append("\n")
    return _or_none(text, "None yet: no query answered, no webhook delivery, no fenced accepted send.")


class JobScreen(ReclaimScreen):
    """Everything about one job; `t` opens guided triage for a held or failed job, `l` copies its remote-console URL.

    The ledger is read first and drawn as soon as it lands; what the remote can answer follows (from the config and
    the ledger: no adapter is built, no SDK imported). A key pressed before the job is read waits and runs then."""

    BINDINGS = JOB
    AUTO_FOCUS = "#job-body"

    class Loaded(JobRead):
        """The job's detail arrived (None when it is not in the ledger)."""

    class RemoteRead(RemoteAnswer):
        """What the job's remote can answer, in sentences (it follows `Loaded`)."""

    def __init__(self, key: JobKey) -> None:
        super().__init__()
        self.key = key
        self.detail: JobDetail | None = None
        self.expanded: int | None = None
        """The id of the event shown whole under the timeline (None: none)."""
        self._fields: list[tuple[str, Text]] = []
        self.remote_read = False
        self.queued: str | None = None
        """An action whose key was pressed before the job was read: it runs when the read lands."""

    def compose(self) -> ComposeResult:
        tz = self.reclaim.config.timezone
        yield LedgerHeader()
        with VerticalScroll(id="job-body"):
            yield Label(Text.assemble(("Job ", "bold"), safe_text(self.key.job_id, 100)), id="job-title")
            yield FieldTable(id="job-fields")
            yield Label("Why it is held", classes="section")
            yield HeldExplanation(id="job-why")
            yield Label("What the remote can answer", classes="section")
            yield Static(Text(READING_REMOTE, style="dim"), id="job-remote", classes="section-body")
            yield ConsoleLink(id="job-console-url")
            yield Label("Evidence: what the remote said", classes="section")
            yield Static("", id="job-evidence", classes="section-body")
            yield Label("Latest remote snapshot", classes="section")
            yield Static("", id="job-snapshot", classes="section-body")
            yield Label("Findings", classes="section")
            yield Static("", id="job-findings", classes="section-body")
            yield Label("New jobs refused while this job is held", classes="section")
            yield Static("", id="job-blocked", classes="section-body")
            yield Label("Fenced writes from stale workers", classes="section")
            yield Static("", id="job-fenced", classes="section-body")
            yield Label("Timeline (Enter on an event shows it whole)", classes="section")
            yield Timeline(tz=tz, id="job-timeline")
            yield Static("", id="job-event-detail", classes="section-body")
        yield FeedbackLine(id="feedback")
        yield KeyFooter()

    def ledger_changed(self, pulse: Pulse) -> None:
        if pulse.touches(self.key):
            self.reload()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="job")
    def load(self) -> None:
        """Read the job, its events and fenced writes off the UI thread and post them; then what the remote can
        answer (no adapter built)."""
        read_job_then_remote(self, self.key, self.Loaded, self.RemoteRead)

    def on_job_screen_remote_read(self, message: RemoteRead) -> None:
        self.remote_read = True
        self.query_one("#job-remote", Static).update(Text("\n").join(safe_text(line, 300) for line in message.lines))

    def on_job_screen_loaded(self, message: Loaded) -> None:
        self.detail = message.detail
        self.loaded = True
        if message.detail is None:
            self.query_one("#job-title", Label).update(
                Text.assemble(("Not in the ledger: ", "bold red"), safe_text(self.key.job_id, 100))
            )
            self.query_one("#job-remote", Static).update("")
            self.remote_read = True
        else:
            self.draw(message.detail)
        self.refresh_bindings()
        queued, self.queued = self.queued, None
        if queued is not None:
            self.call_later(self.run_action, queued)  # "triage", "copy_url", "copy('id')", ...

    def draw(self, detail: JobDetail) -> None:
        """Fill every section from `detail`."""
        tz = self.reclaim.config.timezone
        now = self.reclaim.clock.now()
        job = detail.job
        self.query_one("#job-title", Label).update(job_title(detail))

        def when(ts: float | None) -> Text:
            if ts is None:
                return Text("—", style="dim")
            if not valid_time(ts):
                return Text(INVALID, style="bold red")
            return Text(time_and_age(ts, now, tz))

        due = when(job.due_at)
        if job.due_at is not None and job.due_at <= now and job.state == "held":
            due.stylize("bold red")
        rows: list[tuple[str, Text]] = [
            ("job id", safe_text(job.job_id, 300)), ("operation", safe_text(job.operation, 80)),
            ("state", Text(job.state, style="bold red" if job.state in TRIAGE_STATES else "bold")),
            ("target", safe_text(job.target or "—", 300)),
            ("attempt", Text(str(job.attempt))), ("epoch", Text(str(job.epoch))),
            ("idem key", Text(job.idem_key)), ("handle", safe_text(job.handle or "none recorded", 120)),
            ("owner", safe_text(job.owner or "unassigned", 60)), ("due", due),
            ("created", when(job.created_at)), ("updated", when(job.updated_at)),
            ("held at", when(job.held_at)), ("held reason", safe_text(job.held_reason or "—", 300, prose=True)),
            ("send started", when(job.send_started_at)), ("tries", Text(str(job.tries))),
            ("lease owner", safe_text(job.lease_owner or "—", 80)), ("lease until", when(job.lease_until)),
            ("next try", when(job.next_try_at)), ("quota day", Text(job.quota_day)),
            ("last error", safe_text(job.last_error or "—", 300, prose=True)), ("result at", when(job.result_at)),
            ("payload", compact_json(job.payload, 300)),
            ("result", compact_json(job.result, 300) if job.result is not None else Text("—", style="dim")),
        ]
        self._fields = rows
        self.query_one("#job-fields", FieldTable).show(rows, columns=self.field_columns())
        self.query_one("#job-why", HeldExplanation).show(detail, self.reclaim.config.timezone)
        self.reload_at(detail.arrives_until)  # release, reject and remediate are allowed from then
        if detail.can_answer:
            self.query_one("#job-remote", Static).update(
                Text("\n").join(safe_text(line, 300) for line in detail.can_answer))
        self.query_one("#job-console-url", ConsoleLink).show(detail.console_url, self.key_for("copy_url"))
        self.query_one("#job-snapshot", Static).update(snapshot_text(detail, tz))
        self.query_one("#job-evidence", Static).update(evidence_text(detail, tz))
        findings = Text()
        for f in detail.findings:
            findings.append(f"{clock_time(f.at, tz, with_date=True)}  ")
            findings.append_text(safe_text(f.actor, 40, style="bold"))
            findings.append("  ")
            findings.append_text(safe_text(f.detail.get("category"), 40, style="bold"))
            findings.append(" — ")
            findings.append_text(safe_text(f.detail.get("note"), 500, prose=True))
            findings.append("\n")
        self.query_one("#job-findings", Static).update(_or_none(findings, "No findings yet."))
        blocked = Text()
        for e in detail.blocked_new_jobs:
            blocked.append(f"{clock_time(e.at, tz, with_date=True)}  ")
            blocked.append_text(event_summary(e) or Text(e.kind))
            blocked.append("\n")
        self.query_one("#job-blocked", Static).update(_or_none(blocked, "None."))
        fenced = Text()
        for w in detail.fenced:
            fenced.append(f"{clock_time(w['at'], tz, with_date=True)}  ")
            fenced.append_text(safe_text(w["actor"], 60))
            fenced.append(f"  {w['event']} at epoch {w['epoch']} refused  ")
            fenced.append_text(compact_json(w["detail"], 200))
            fenced.append("\n")
        self.query_one("#job-fenced", Static).update(_or_none(fenced, "None."))
        self.query_one("#job-timeline", Timeline).show_events(detail.events)

    def field_columns(self) -> int:
        """Field pairs per line: two on a wide terminal, one below NARROW columns (times then fit on a line)."""
        return 1 if self.size.width < NARROW else 2

    def on_resize(self) -> None:
        if self._fields:
            self.query_one("#job-fields", FieldTable).show(self._fields, columns=self.field_columns())

    def on_timeline_expanded(self, message: Timeline.Expanded) -> None:
        """Show the event's whole detail under the timeline (Enter on it again hides it)."""
        shown = self.query_one("#job-event-detail", Static)
        e = message.event
        if self.expanded == e.id:
            self.expanded = None
            shown.update("")
            return
        self.expanded = e.id
        tz = self.reclaim.config.timezone
        text = Text.assemble((f"Event #{e.seq} ", "bold"), safe_text(e.kind, 40, style="bold"), "  ",
                             full_time(e.at, tz), "  by ", safe_text(e.actor, 60), "\n")
        text.append_text(safe_json(readable_detail(e.detail, tz), 20000))
        shown.update(text)
        self.call_after_refresh(shown.scroll_visible)

    def key_for(self, action: str) -> str:
        """The key this screen's `action` answers to now (the keymap applied), as the footer shows it."""
        return self.reclaim.keymap.keys.get(f"job.{action}", next(b.key for b in JOB if b.action == action))

    def copy_value(self, what: str) -> str | None:
        """The text `copy(what)` puts on the clipboard (id, idem, handle), or None when the job has none."""
        job = self.detail.job if self.detail is not None else None
        if job is None:
            return None
        return {"id": job.job_id, "idem": job.idem_key, "handle": job.handle}.get(what)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.loaded and action in ("triage", "copy_url", "copy", "copy_link"):
            return True  # pressed before the read lands: queued (the action says so)
        if action == "copy":
            return self.copy_value(str(parameters[0]) if parameters else "") is not None or None
        if action == "copy_link":
            return (self.detail is not None and bool(self.reclaim.config.serve.public_url)) or None
        if action == "triage":
            return (self.detail is not None and self.detail.job.state in TRIAGE_STATES) or None
        if action == "copy_url":
            return (self.detail is not None and self.detail.console_url is not None) or None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        if action in ("triage", "copy_url") and self.detail is None:
            return "the job is still being read" if not self.loaded else "the job is not in the ledger"
        if action == "triage" and self.detail is not None:
            return f"the job is {self.detail.job.state}; only held or failed jobs are triaged"
        if action == "copy_url":
            return "this job's remote has no console to look in (only a Gemini remote on the simulator has one)"
        if action in ("copy", "copy_link") and self.detail is None:
            return "the job is still being read" if not self.loaded else "the job is not in the ledger"
        if action == "copy" and params and params[0] == "handle":
            return "no handle recorded for this job (the remote never named one, or its reply was lost)"
        if action == "copy_link":
            return ("no seat address to link to: set [serve] public_url in the config to the browser seat's address, "
                    "e.g. \"https://reclaim.example.com/\"")
        return super().disabled_reason(action, params)

    def _queue(self, action: str, what: str) -> bool:
        """Before the job is read: keep `action` to run when the read lands, say so, and return True."""
        if self.loaded:
            return False
        self.queued = action
        self.feedback(Text.assemble(("reading the job… ", "bold"), f"{what} as soon as it is read"), prompt=True)
        return True

    def action_triage(self) -> None:
        """Open guided triage for this job (pressed before the job is read: as soon as it is)."""
        if self._queue("triage", "triage opens"):
            return
        if self.detail is not None and self.detail.job.state in TRIAGE_STATES:
            self.reclaim.open_triage(self.key)
        else:
            self.feedback(Text.assemble(("not available: ", "bold"), self.disabled_reason("triage", ())), error=True)

    def action_copy(self, what: str) -> None:
        """Copy the job's id, idem key or handle (`what`: id, idem, handle) whole to the clipboard (OSC 52), and
        confirm it in a toast; with no such value, say why on the feedback line."""
        if self._queue(f"copy('{what}')", "it is copied"):
            return
        value = self.copy_value(what)
        if value is None:
            self.feedback(Text.assemble(("not available: ", "bold"), self.disabled_reason("copy", (what,))),
                          error=True)
            return
        self._copied(COPY_NAMES.get(what, what), value)

    def action_copy_link(self) -> None:
        """Copy the seat link that opens this job (`[serve] public_url` + ?job=..&op=..) for an incident channel."""
        if self._queue("copy_link", "the job link is copied"):
            return
        public = self.reclaim.config.serve.public_url
        if self.detail is None or not public:
            self.feedback(Text.assemble(("not available: ", "bold"), self.disabled_reason("copy_link", ())),
                          error=True)
            return
        self._copied("job link", job_link(public, self.key))

    def _copied(self, name: str, value: str) -> None:
        """Put `value` on the clipboard and say so on the feedback line, naming what, and how long, it is (this
        replaces whatever the line said before, such as why an earlier copy key was not available)."""
        self.app.copy_to_clipboard(value)
        self.feedback(f"copied the {name} ({len(value)} characters): {clean(value, 120)}")

    def action_copy_url(self) -> None:
        """Copy the job's remote-console URL to the clipboard, whole, and say so on the feedback line."""
        if self._queue("copy_url", "the console URL is copied"):
            return
        copy_console_url(self, self.query_one(ConsoleLink), self.disabled_reason("copy_url", ()))
