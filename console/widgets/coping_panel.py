"""The overview's "how the system copes" panel: over the last 24 hours, holds begun and ended, ended by reclaim (the
remote's own evidence) or by a person, the time to decision, and a sparkline per hour of each."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline, Static

from ledger import Coping, span

SERIES = (("begun", "coping-begun"), ("by reclaim", "coping-reclaim"), ("by a person", "coping-person"))
"""The sparklines: their label and id, in the order drawn (each label leads with its count over the window)."""


def took(seconds: float | None) -> str:
    """A time to decision as the panel shows it, to the second under ten minutes ('1m 30s', '15m', '6h 29m';
    '-' when no hold ended)."""
    return "-" if seconds is None else span(seconds, parts=2, finest="s" if seconds < 600 else "m")


def counts_line(c: Coping) -> Text:
    """'6 begun · 5 ended: 4 by reclaim, 1 by a person' over the window."""
    reclaim, person = sum(c.by_reclaim), sum(c.by_person)
    return Text.assemble((f"{sum(c.begun):,}", "bold"), " begun · ", (f"{reclaim + person:,}", "bold"), " ended: ",
                         (f"{reclaim:,}", "bold"), " by reclaim, ", (f"{person:,}", "bold"), " by a person")


def short_decision(c: Coping) -> Text:
    """'p50 2s p90 1h 55m': the time to decision on the one line a short screen gives the panel."""
    t = c.time_to_decision
    return Text.assemble(("p50 ", "dim"), (took(t.p50), "bold"), (" p90 ", "dim"), (took(t.p90), "bold"))


def decision_line(c: Coping) -> Text:
    """'time to decision p50 2s · p90 1h 55m' over the holds ended in the window."""
    t = c.time_to_decision
    return Text.assemble("time to decision ", ("p50 ", "dim"), (took(t.p50), "bold"), (" · p90 ", "dim"),
                         (took(t.p90), "bold"))


class CopingPanel(Vertical):
    """Holds begun and ended per hour over the last 24 hours, by reclaim or by a person, and the time to decision:
    two lines of figures and a sparkline per series (oldest hour left), each led by its count. On a short screen
    (80x24) the panel is one line: the window, each count with its sparkline, and p50 / p90. `show` draws a read;
    nothing here reads."""

    DEFAULT_CSS = """
    CopingPanel { height: auto; }
    CopingPanel .coping-line { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    CopingPanel #coping-sparks { height: auto; }
    CopingPanel .coping-axis { width: auto; padding: 0 1 0 0; color: $text-muted; }
    CopingPanel .coping-axis-next { padding: 0 1 0 1; }
    CopingPanel .coping-short { display: none; width: auto; padding: 0 0 0 1; }
    CopingPanel #coping-window { padding: 0 1 0 0; }
    CopingPanel Sparkline { width: 1fr; height: 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("reading the ledger…", id="coping-counts", classes="coping-line")
        yield Static("", id="coping-decision", classes="coping-line")
        with Horizontal(id="coping-sparks"):
            yield Label("24 h:", id="coping-window", classes="coping-short coping-axis")
            for i, (label, spark_id) in enumerate(SERIES):
                yield Label(label, id=f"{spark_id}-label", classes="coping-axis" + (" coping-axis-next" if i else ""))
                yield Sparkline([0], summary_function=max, id=spark_id)
            yield Static("", id="coping-short-decision", classes="coping-short")

    def show(self, coping: Coping) -> None:
        """Draw `coping`'s figures and its per-hour series."""
        self.query_one("#coping-counts", Static).update(counts_line(coping))
        self.query_one("#coping-decision", Static).update(decision_line(coping))
        self.query_one("#coping-short-decision", Static).update(short_decision(coping))
        for (label, spark_id), data in zip(SERIES, (coping.begun, coping.by_reclaim, coping.by_person), strict=True):
            self.query_one(f"#{spark_id}-label", Label).update(Text.assemble((f"{sum(data):,}", "bold"), f" {label}"))
            self.query_one(f"#{spark_id}", Sparkline).data = list(data)
