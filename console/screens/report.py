"""Report: the last 7 days' holds — how they ended, the time to decision, held and decided per day, per remote and
per operation — the figures `reclaim report` prints, read in a thread worker. Fits 80x24 (the body scrolls)."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Label, Sparkline, Static
from textual.worker import get_current_worker

from console.bindings import REPORT
from console.sanitize import safe_text
from console.screens.base import ReclaimScreen
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import REPORT_ENDINGS as ENDINGS
from ledger import Report, iso, span
from ledger import ReportFigures as Figures

WINDOW_SECONDS = 7 * 86_400.0
"""The screen's window: the last seven days, as `reclaim report` by default."""
COLUMNS = ("scope", "holds", *ENDINGS, "p50", "p90", "max", "releases", "queries")


def took(seconds: float | None) -> str:
    """A time to decision as the screen shows it ('-' when none was decided)."""
    return "-" if seconds is None else span(seconds, parts=2)


def endings_line(f: Figures) -> Text:
    """'12 holds · 3 evidence · 1 reconciled · … · 5 open'."""
    text = Text.assemble((f"{f.holds:,} holds", "bold"))
    for e in ENDINGS:
        n = f.endings.get(e, 0)
        text.append(" · ")
        text.append(f"{n:,} {e}", style=("bold red" if e == "open" and n else "dim" if not n else ""))
    return text


def decision_line(f: Figures) -> Text:
    """'time to decision p50 16m · p90 1h 00m · max 1h 00m (5 decided)'."""
    t = f.time_to_decision
    return Text.assemble("time to decision ", ("p50 ", "dim"), (took(t.p50), "bold"), (" · p90 ", "dim"),
                         (took(t.p90), "bold"), (" · max ", "dim"), (took(t.max), "bold"), f" ({t.count:,} decided)")


class ReportScreen(ReclaimScreen):
    """The hold-resolution report for the last 7 days, with sparklines of holds begun and decided per day."""

    BINDINGS = REPORT

    class Loaded(Message):
        """The report arrived."""

        def __init__(self, report: Report) -> None:
            self.report = report
            super().__init__()

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with VerticalScroll(id="report-body"):
            yield Label("Report — holds begun in the last 7 days and how they ended", classes="panel-title")
            yield Static("reading the ledger…", id="report-window")
            yield Static("", id="report-endings")
            yield Static("", id="report-decision")
            yield Label("held per day", classes="report-axis")
            yield Sparkline([0], summary_function=max, id="report-held")
            yield Label("decided per day", classes="report-axis")
            yield Sparkline([0], summary_function=max, id="report-decided")
            yield Static("", id="report-days", classes="report-axis")
            yield Static("", id="report-causes")
            yield DataTable(id="report-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#report-table", DataTable).add_columns(*COLUMNS)

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="report")
    def load(self) -> None:
        """Read the last 7 days' report off the UI thread (one read snapshot)."""
        app = self.reclaim
        now = app.clock.now()
        with app.ledger() as ledger:
            report = ledger.report(now - WINDOW_SECONDS, now)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(report))

    def on_report_screen_loaded(self, message: Loaded) -> None:
        r = message.report
        self.query_one("#report-window", Static).update(
            Text(f"{iso(r.since)} .. {iso(r.until)} ({r.timezone})", style="dim"))
        self.query_one("#report-endings", Static).update(endings_line(r.total))
        self.query_one("#report-decision", Static).update(decision_line(r.total))
        self.query_one("#report-held", Sparkline).data = [d.held for d in r.days]
        self.query_one("#report-decided", Sparkline).data = [d.decided for d in r.days]
        held, decided = sum(d.held for d in r.days), sum(d.decided for d in r.days)
        self.query_one("#report-days", Static).update(Text(
            f"{r.days[0].day} … {r.days[-1].day} · held {held:,} · decided {decided:,} · "
            f"peak {max(d.held for d in r.days):,} held/day"))
        causes = Text("causes: ", style="dim")
        for i, (cause, n) in enumerate(sorted(r.total.causes.items(), key=lambda c: (-c[1], c[0]))):
            causes.append("; " if i else "")
            causes.append_text(safe_text(f"{cause} {n:,}", 120))
        if not r.total.causes:
            causes.append("none")
        self.query_one("#report-causes", Static).update(causes)
        table = self.query_one("#report-table", DataTable)
        table.clear()
        for f in [*r.remotes, *r.operations]:
            t = f.time_to_decision
            table.add_row(safe_text(f"{f.scope} {f.name}", 60), f"{f.holds:,}", *[f"{f.endings.get(e, 0):,}" for e in ENDINGS],
                          took(t.p50), took(t.p90), took(t.max), f"{f.releases:,}", f"{f.queries:,}")
        self.loaded = True
