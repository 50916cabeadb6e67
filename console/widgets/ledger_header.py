"""The header every screen shows: the ledger, who is at the keys, and whether the view is live."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from console.sanitize import safe_text

if TYPE_CHECKING:
    from console.app import ReclaimApp


class LedgerHeader(Horizontal):
    """Ledger path, operator and roles, a live indicator with the time of the last change, STALE and PAUSED,
    the remotes that are paused because they refuse every job, and whether workers are passing (red when no
    pass within policy.worker_silence_seconds)."""

    DEFAULT_CSS = """
    LedgerHeader {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    LedgerHeader > Label { padding: 0 1; height: 1; }
    LedgerHeader #hdr-title { text-style: bold; color: $accent; }
    LedgerHeader #hdr-path { width: 1fr; min-width: 11; }
    LedgerHeader #hdr-live { color: $success; }
    LedgerHeader #hdr-badge { display: none; text-style: bold; }
    LedgerHeader.-stale #hdr-live { color: $text-muted; }
    LedgerHeader.-stale #hdr-badge { display: block; background: $error; color: $text; }
    LedgerHeader.-paused #hdr-badge { display: block; background: $warning; color: $background; }
    LedgerHeader.-paused #hdr-live { color: $text-muted; }
    LedgerHeader #hdr-ro { display: none; background: $secondary; color: $background; text-style: bold; }
    LedgerHeader.-read-only #hdr-ro { display: block; }
    LedgerHeader #hdr-identity { background: $warning; color: $background; text-style: bold; }
    LedgerHeader #hdr-remote { display: none; background: $error; color: $text; text-style: bold; }
    LedgerHeader.-remote-paused #hdr-remote { display: block; }
    LedgerHeader #hdr-workers { color: $text-muted; }
    LedgerHeader #hdr-awaiting { display: none; color: $warning; text-style: bold; }
    LedgerHeader.-awaiting #hdr-awaiting { display: block; }
    LedgerHeader #hdr-workers.-silent { background: $error; color: $text; text-style: bold; }
    LedgerHeader.-narrow #hdr-title { display: none; }
    LedgerHeader.-narrow > Label { padding: 0 1 0 0; }
    LedgerHeader.-narrow #hdr-path { min-width: 9; }
    """

    NARROW = 110
    """Below this many cells the header says each thing in its short form (the long one is its tooltip), so the
    count to approve and the live time are never cut at 80 columns."""
    IDENTITY = "identity: declared, not verified"
    IDENTITY_SHORT = "unverified id"

    def __init__(self) -> None:
        super().__init__()
        self._drawn: tuple[str, str, str, tuple[str, ...], str, bool, int | None] | None = None

    def compose(self) -> ComposeResult:
        app = cast("ReclaimApp", self.app)
        yield Label("reclaim", id="hdr-title")
        yield Label(safe_text(app.display_path, 80), id="hdr-path")
        yield Label(safe_text(app.operator_label, 60), id="hdr-operator")
        if not app.identity.verified:
            yield Label(self.IDENTITY, id="hdr-identity")
        yield Label("READ-ONLY", id="hdr-ro")
        yield Label("", id="hdr-badge")
        yield Label("", id="hdr-remote")
        yield Label("", id="hdr-awaiting")
        yield Label("", id="hdr-workers")
        yield Label("○ connecting", id="hdr-live")

    def on_mount(self) -> None:
        app = cast("ReclaimApp", self.app)
        self.set_class(app.source.read_only, "-read-only")
        self.watch(app, "last_seen", self._draw, init=False)
        self.watch(app, "stale", self._draw, init=False)
        self.watch(app, "paused", self._draw, init=False)
        self.watch(app, "remotes_paused", self._draw, init=False)
        self.watch(app, "worker_liveness", self._draw, init=False)
        self.watch(app, "awaiting_me", self._draw, init=False)
        self.call_after_refresh(self._draw)

    def on_resize(self) -> None:
        narrow = 0 < self.size.width < self.NARROW
        if narrow == self.has_class("-narrow"):
            return
        self.set_class(narrow, "-narrow")
        for identity in self.query("#hdr-identity").results(Label):
            identity.update(self.IDENTITY_SHORT if narrow else self.IDENTITY)
            identity.tooltip = self.IDENTITY if narrow else None
        self._drawn = None
        self._draw()

    def redraw(self) -> None:
        """Draw the current state now (the screen was just shown)."""
        self._draw()

    def _draw(self) -> None:
        """Redraw the live indicator and badges from the app's state (labels change only when their text does).

        A header on a covered screen waits for `redraw()`: every screen has one, and a background screen that
        changes repaints the screen on top of it.
        """
        app = cast("ReclaimApp", self.app)
        screen = self.screen
        if not getattr(screen, "in_view", screen.is_current):
            return
        self.set_class(bool(app.stale), "-stale")
        self.set_class(app.paused and not app.stale, "-paused")
        when = app.format_time(app.last_seen) if app.last_seen is not None else "--:--:--"
        narrow = self.has_class("-narrow")
        if app.stale:
            badge, live = "STALE", f"○ {when}" if narrow else f"○ last change {when}"
        elif app.paused:
            badge, live = "PAUSED", f"‖ {when}" if narrow else f"‖ paused · last change {when}"
        elif app.last_seen is None:
            badge, live = "", "○ connecting"
        else:
            badge, live = "", f"● {when}" if narrow else f"● live {when}"  # the last change's time (tooltip)
        if app.head_hash and not narrow:
            live += f" · head {app.head_hash[:8]}"
        liveness = app.worker_liveness
        workers, silent = (liveness.short(), liveness.silent) if liveness is not None else ("", False)
        awaiting = app.awaiting_me
        if (badge, live, app.stale, app.remotes_paused, workers, silent, awaiting) == self._drawn:
            return
        self._drawn = (badge, live, app.stale, app.remotes_paused, workers, silent, awaiting)
        self.set_class(bool(awaiting), "-awaiting")
        self.query_one("#hdr-awaiting", Label).update(
            Text(f"{awaiting} to approve") if awaiting else "")
        workers_label = self.query_one("#hdr-workers", Label)
        workers_label.set_class(silent, "-silent")
        workers_label.display = bool(workers)
        workers_label.update(Text(workers))
        workers_label.tooltip = liveness.summary() if liveness is not None else None
        self.set_class(bool(app.remotes_paused), "-remote-paused")
        self.query_one("#hdr-remote", Label).update(
            Text(f"REMOTE PAUSED: {', '.join(app.remotes_paused)}") if app.remotes_paused else ""
        )
        badge_label = self.query_one("#hdr-badge", Label)
        badge_label.tooltip = safe_text(app.stale) if app.stale else None
        badge_label.update(badge)
        live_label = self.query_one("#hdr-live", Label)
        live_label.tooltip = f"last change to the ledger seen at {when}" if app.last_seen is not None else None
        live_label.update(Text(live))
