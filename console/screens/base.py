"""What every console screen shares: the app's services, the live hook, the one worker-failure handler, the
feedback line, disabled keys that say why, and Esc that asks before throwing typed text away."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import events
from textual.actions import parse as parse_action
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.worker import Worker

from console.live import Pulse
from console.sanitize import clean, safe_text
from console.screens.confirm import ConfirmScreen
from console.widgets.feedback_line import FeedbackLine
from console.widgets.ledger_header import LedgerHeader
from ledger import Event, JobKey

if TYPE_CHECKING:
    from console.app import ReclaimApp

TRIAGE_STATES = ("held", "failed")
"""The states a job can be triaged in (the job screen's and the job list's `t`)."""


def disabled_key(screen: Screen[Any], key: str) -> tuple[str, tuple[object, ...], object] | None:
    """When `key` is bound, in `screen`'s current binding chain, to an action that is disabled now: that
    action's (name, parameters, namespace); else None (unbound, or enabled: the binding runs as usual)."""
    active = screen.active_bindings.get(key)
    if active is None or active.enabled:
        return None
    _, name, params = parse_action(active.binding.action)
    return name, params, active.node


def job_left_text(key: JobKey, now_on: JobKey | None, where: str, feed: list[Event]) -> Text:
    """'article today #12 left the held jobs (reject by carol -> rejected); the cursor is on article today #13'."""
    last = next((e for e in reversed(feed) if e.job_id == key.job_id and e.operation == key.operation), None)
    text = Text.assemble(safe_text(key.job_id, 80, style="bold"), " · ", safe_text(key.operation, 40), f" left {where}")
    if last is not None:
        text.append(f" ({last.kind} by ")
        text.append_text(safe_text(last.actor, 40))
        text.append(f" → {last.to_state})" if last.to_state else ")")
    if now_on is None:
        text.append("; the list is empty now")
    else:
        text.append("; the cursor is on ")
        text.append_text(safe_text(now_on.job_id, 80, style="bold"))
    return text


def reason_for(node: object, action: str, params: tuple[object, ...]) -> str:
    """Why `node`'s `action` is disabled, in its own words when it has them."""
    explain = getattr(node, "disabled_reason", None)
    if callable(explain):
        return str(explain(action, params))
    return "not available here"


class ReclaimScreen(Screen[None]):
    """A screen that reloads its own (paged) reads when it becomes current or the ledger changes."""

    loaded: bool = False
    _reload_timer: Timer | None = None
    """The pending `reload_at` read, if any."""
    """True once the screen drew its first read (tests wait on it)."""
    remote_read: bool = True
    """False while a job screen is still asking what the job's remote can answer (tests wait on it)."""

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

    def reload_at(self, when: float | None) -> None:
        """Read again once the console's clock reaches `when` (a moment that changes what the screen offers, e.g.
        the end of a held job's arrival window), when it is ahead; the latest call wins."""
        if self._reload_timer is not None:
            self._reload_timer.stop()
            self._reload_timer = None
        if when is None:
            return
        delay = when - self.reclaim.clock.now()
        if delay > 0:
            self._reload_timer = self.set_timer(delay + 0.05, self.reload)

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

    # -- feedback ----------------------------------------------------------------------------------------------
    def feedback(self, text: Text | str, *, error: bool = False, prompt: bool = False,
                 while_true: Callable[[], bool] | None = None) -> None:
        """Say `text` on the screen's feedback line (a notification when the screen has none); with `while_true`,
        taken back once that returns False."""
        lines = self.query(FeedbackLine)
        if lines:
            lines.first().say(text, error=error, prompt=prompt, while_true=while_true)
        elif str(text):
            plain = text.plain if isinstance(text, Text) else text
            self.app.notify(clean(plain, 300, prose=isinstance(text, Text)), severity="warning" if error else "information", markup=False)

    @property
    def feedback_text(self) -> str:
        """What the feedback line says now ('' when it is hidden or the screen has none)."""
        lines = self.query(FeedbackLine)
        return lines.first().message if lines else ""

    # -- disabled keys -----------------------------------------------------------------------------------------
    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        """Why this screen's `action` is disabled now (override with the real reason)."""
        return "not available here"

    def on_key(self, event: events.Key) -> None:
        """A key bound to a disabled action says why and stops there: it never falls through to a global key."""
        found = disabled_key(self, event.key)
        if found is None:
            return
        event.stop()
        event.prevent_default()
        name, params, node = found
        reason = reason_for(node, name, params)
        self.feedback(Text.assemble(("not available: ", "bold"), safe_text(reason, 300)), error=True)

    # -- leaving -----------------------------------------------------------------------------------------------
    def typed(self) -> list[tuple[str, str]]:
        """What the operator typed here and would lose by leaving, as (field, text) pairs (override)."""
        return []

    def action_back(self) -> None:
        """Go back one screen (never past the overview); with typed text on the screen, ask first."""
        typed = self.typed()
        if not typed:
            self.reclaim.go_back()
            return
        def decided(discard: bool | None) -> None:
            if discard:
                self.reclaim.go_back()

        self.app.push_screen(
            ConfirmScreen(
                Text("Discard what you typed?", style="bold"),
                "leaving this screen throws away what you typed; nothing was written",
                [f"{name}: {text}" for name, text in typed], None, "Discard and leave",
                cancel_label="Keep editing",
            ),
            decided,
        )
