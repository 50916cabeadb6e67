"""What every console screen shares: the app's services, the live hook, and the one worker-failure handler."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.screen import ModalScreen, Screen
from textual.worker import Worker

from console.live import Pulse
from console.widgets.ledger_header import LedgerHeader

if TYPE_CHECKING:
    from console.app import ReclaimApp


class ReclaimScreen(Screen[None]):
    """A screen that reloads its own (paged) reads when it becomes current or the ledger changes."""

    loaded: bool = False
    """True once the screen drew its first read (tests wait on it)."""

    @property
    def reclaim(self) -> ReclaimApp:
        """The console app, typed."""
        return cast("ReclaimApp", self.app)

    @property
    def in_view(self) -> bool:
        """True when the screen is on top, or only modal dialogs cover it (so it is drawn behind them)."""
        stack = self.app.screen_stack
        if self not in stack:
            return False
        return all(isinstance(s, ModalScreen) for s in stack[stack.index(self) + 1 :])

    def reload(self) -> None:
        """Start this screen's read worker (override)."""

    def resumed(self) -> None:
        """The screen became current (shown, or uncovered): re-read by default (override)."""
        self.reload()

    def ledger_changed(self, pulse: Pulse) -> None:
        """Called for the screen on top when the follower saw a change (override to refresh what is visible)."""
        self.reload()

    def on_screen_resume(self) -> None:
        # The one resume handler (Textual calls a handler on every class of the MRO, so subclasses override
        # `resumed` instead, and nothing is read twice).
        for header in self.query(LedgerHeader):
            header.redraw()
        self.resumed()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.reclaim.worker_state_changed(event)

    def action_back(self) -> None:
        """Go back one screen (never past the overview)."""
        self.reclaim.go_back()
