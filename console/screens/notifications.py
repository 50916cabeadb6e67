"""Notifications: the outbox, uncertain first; settle an uncertain one by hand, with confirmation."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Static
from textual.worker import get_current_worker

from console.bindings import NOTIFICATIONS
from console.live import READ_ONLY_REASON, clock_time
from console.sanitize import clean, compact_json, safe_text
from console.screens.base import ReclaimScreen
from console.screens.confirm import ConfirmScreen
from console.widgets.feedback_line import FeedbackLine
from console.widgets.guarded_action import GuardedAction
from console.widgets.key_footer import KeyFooter
from console.widgets.ledger_header import LedgerHeader
from ledger import LedgerError

SETTLE = {
    # decision: (role, label, what happens)
    "confirmed": ("triage", "Confirmed received", "marks the notification confirmed (it did arrive); nothing is sent"),
    "resend": ("approver", "Sent by other route", "records that you sent it by another route; nothing is sent from here"),
}


class NotificationsScreen(ReclaimScreen):
    """The outbox; `c` marks an uncertain notification confirmed received, `s` sent again by another route."""

    BINDINGS = NOTIFICATIONS

    class Loaded(Message):
        """The outbox page arrived."""

        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = rows
            super().__init__()

    class Settled(Message):
        """A settle finished (ok) or was refused (reason)."""

        def __init__(self, decision: str, reason: str | None) -> None:
            self.decision = decision
            self.reason = reason
            super().__init__()

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield LedgerHeader()
        with Vertical(id="notif-body"):
            yield Label("Notifications — uncertain first (never re-sent automatically)", classes="panel-title")
            table: DataTable[Text] = DataTable(id="notif-table", cursor_type="row", zebra_stripes=True)
            yield table
            yield Static("", id="notif-empty")
            with Horizontal(classes="fields"):
                yield Input(placeholder="note (recorded with the decision)", id="notif-note", compact=True)
            keys = {b.action: self.reclaim.key_label(b) for b in NOTIFICATIONS}
            for decision, (_, label, _) in SETTLE.items():
                yield GuardedAction(decision, label, keys[f"settle('{decision}')"], id=f"settle-{decision}")
            yield Static("", id="notif-outcome")
        yield FeedbackLine(id="feedback")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#notif-table", DataTable)
        for label, width in (("state", 11), ("channel", 10), ("job", 30), ("operation", 18), ("kind", 9),
                             ("tries", 5), ("updated", 16), ("last error", 30)):
            table.add_column(label, width=width, key=label)
        table.focus()

    def reload(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="outbox")
    def load(self) -> None:
        """Read the outbox (bounded) off the UI thread."""
        with self.reclaim.ledger() as ledger:
            rows = ledger.outbox()
        if not get_current_worker().is_cancelled:
            self.post_message(self.Loaded(rows))

    def on_notifications_screen_loaded(self, message: Loaded) -> None:
        self.rows = message.rows
        tz = self.reclaim.config.timezone
        table = self.query_one("#notif-table", DataTable)
        row = table.cursor_row
        table.clear()
        for i, r in enumerate(self.rows):
            state = str(r["state"])
            table.add_row(
                Text(state, style="bold red" if state == "uncertain" else ""),
                safe_text(r["channel"], 30), safe_text(r["job_id"], 60), safe_text(r["operation"], 40),
                safe_text(r["kind"], 20), Text(str(r["tries"])),
                Text(clock_time(float(r["updated_at"]), tz, with_date=True)),  # type: ignore[arg-type]
                safe_text(r.get("last_error") or "", 80, prose=True),
                key=str(i),
            )
        if self.rows:
            table.move_cursor(row=min(max(row, 0), len(self.rows) - 1))
        self.query_one("#notif-empty", Static).update(
            "" if self.rows else Text("None: the outbox is empty (no notification has been posted).", style="dim"))
        self._guard()
        self.loaded = True

    def selected(self) -> dict[str, Any] | None:
        """The outbox row under the cursor."""
        table = self.query_one("#notif-table", DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def refusal(self, decision: str) -> str | None:
        """Why this operator may not settle the selected notification so, or None."""
        app = self.reclaim
        row = self.selected()
        if app.source.read_only:
            return READ_ONLY_REASON
        role = SETTLE[decision][0]
        if role not in app.config.roles_of(app.operator):
            return f"{app.operator} lacks the {role} role to mark a notification {decision}"
        if row is None:
            return "no notification selected"
        if row["state"] != "uncertain":
            return f"it is {row['state']}; only uncertain notifications are settled by hand"
        return None

    def _guard(self) -> None:
        for decision, (_, _, summary) in SETTLE.items():
            why = self.refusal(decision)
            self.query_one(f"#settle-{decision}", GuardedAction).set_guard(why is None, why, summary)
        self.refresh_bindings()

    def on_data_table_row_highlighted(self) -> None:
        self._guard()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "settle" and parameters:
            return True if self.refusal(str(parameters[0])) is None else None
        return True

    def disabled_reason(self, action: str, params: tuple[object, ...]) -> str:
        if action == "settle" and params:
            return self.refusal(str(params[0])) or "not available"
        return super().disabled_reason(action, params)

    def typed(self) -> list[tuple[str, str]]:
        note = self.query_one("#notif-note", Input).value
        return [("note", note)] if note.strip() else []

    @on(Input.Submitted, "#notif-note")
    def _note_submitted(self) -> None:
        """Enter keeps the note and hands the keys back to the table: c or s settles the selected notification."""
        self.query_one("#notif-table", DataTable).focus()
        keys = " · ".join(f"{self.reclaim.key_label(b)} {b.description.lower()}" for b in NOTIFICATIONS
                          if b.action.startswith("settle"))
        self.feedback(Text.assemble(("note kept: ", "bold"), f"settle the selected notification with {keys}"),
                      prompt=True)

    def on_guarded_action_pressed(self, message: GuardedAction.Pressed) -> None:
        self.action_settle(message.action)

    def action_settle(self, decision: str) -> None:
        """Confirm (default Cancel), then settle the selected uncertain notification."""
        row = self.selected()
        why = self.refusal(decision)
        if row is None:
            return
        _, label, summary = SETTLE[decision]
        event_id = str(row["event_id"])
        note = self.query_one("#notif-note", Input).value

        def decided(confirmed: bool | None) -> None:
            if confirmed and why is None:
                self.settle(event_id, decision, note)

        title = Text.assemble((f"{label}? ", "bold"), safe_text(event_id, 80))
        lines = [f"job: {clean(row['job_id'], 100)}", f"body: {compact_json(row['body'], 200).plain}"]
        if note:
            lines.append(f"note: {note}")
        self.app.push_screen(ConfirmScreen(title, summary, lines, why, f"{label} — confirm"), decided)

    @work(thread=True, exclusive=True, exit_on_error=False, group="outbox-settle")
    def settle(self, event_id: str, decision: str, note: str) -> None:
        """Write the decision through `dispatch.resolve_uncertain`."""
        app = self.reclaim
        try:
            with app.ledger(write=True) as ledger:
                ledger.settle_notification(event_id, decision, actor=app.operator, note=note)
        except Exception as e:  # the transaction rolled back; the reason is shown
            self.post_message(self.Settled(decision, str(e) if isinstance(e, LedgerError) else repr(e)))
            return
        self.post_message(self.Settled(decision, None))

    def on_notifications_screen_settled(self, message: Settled) -> None:
        out = self.query_one("#notif-outcome", Static)
        if message.reason:
            out.update(Text.assemble(("refused: ", "bold red"), safe_text(message.reason, 300),
                                     " — nothing was changed"))
            self.app.notify(clean(message.reason, 300), severity="error", markup=False)
        else:
            out.update(Text(f"marked {message.decision}", style="bold green"))
            self.query_one("#notif-note", Input).value = ""
        self.reclaim.wake_follower()
        self.reload()
