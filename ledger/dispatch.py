"""The notification dispatcher: mark `sending` and commit before the POST; a lost reply is `uncertain`.

Outbox rows move only through `ledger.outbox.move()` and its table of transitions. A notification never
changes its job's state.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Literal

from ledger.clock import Clock
from ledger.config import Config, NotifyConfig
from ledger.crashpoints import crashpoint
from ledger.db import write_tx
from ledger.errors import BadInput, Refused
from ledger.outbox import move
from ledger.remotes.http import exchange
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store import outbox as outbox_store

Delivery = Literal["sent", "not_delivered", "uncertain"]
EVENT_ID_HEADER = "X-Reclaim-Event-Id"


def post_webhook(channel: NotifyConfig, event_id: str, body: str) -> tuple[Delivery, str | None]:
    """POST one notification once (stdlib http.client: no redirects, no proxy); classify it like a send.

    2xx: sent. Could not connect (refused, DNS, connect timeout) or HTTP 401/403/404/429: not delivered.
    Anything else (timeout or reset after the request was written, 5xx, other statuses): uncertain.
    """
    ex = exchange(
        "POST",
        channel.url,
        body=body.encode("utf-8"),
        headers={"Content-Type": "application/json", EVENT_ID_HEADER: event_id},
        timeout=channel.timeout_seconds,
    )
    if ex.outcome == "not_delivered":
        return "not_delivered", ex.error
    if ex.outcome == "unknown":
        return "uncertain", f"{ex.error} ({ex.reason})"
    status = ex.status or 0
    if 200 <= status < 300:
        return "sent", None
    if status in (401, 403, 404, 429):
        return "not_delivered", f"HTTP {status}"
    return "uncertain", f"HTTP {status}"


def sending_stale_after(config: Config, channel: NotifyConfig | None) -> float:
    """Seconds after its claim a `sending` row is taken as abandoned (its process died mid-POST)."""
    timeout = channel.timeout_seconds if channel is not None else 0.0
    return max(config.policy.lease_seconds, 3 * timeout)


def _backoff(config: Config, tries: int) -> float:
    return float(min(config.policy.retry_backoff_seconds * (2 ** max(tries - 1, 0)), 3600.0))


def dispatch_outbox(conn: Connection, config: Config, *, clock: Clock, limit: int = 100) -> dict[str, int]:
    """Send due notifications once each; return counts by outcome.

    A `sending` row older than its stale window was left by a process that died mid-POST: it becomes
    uncertain. A younger one may be in flight in another process and is left alone.
    """
    crashpoint("before_dispatch")
    counts = {"sent": 0, "not_delivered": 0, "uncertain": 0}
    now = clock.now()
    with write_tx(conn):
        for event_id, channel_name, claimed_at in outbox_store.sending(conn):
            if claimed_at + sending_stale_after(config, config.notify.get(channel_name)) > now:
                continue
            counts["uncertain"] += move(
                conn, event_id, "abandoned", now=now, last_error="process died while sending"
            ) is not None
    for event_id, channel_name, body in outbox_store.due(conn, clock.now(), limit):
        channel = config.notify.get(channel_name)
        if channel is None:
            continue
        with write_tx(conn):
            claimed = move(conn, event_id, "claim", now=clock.now(), count_try=True)
        if claimed is None:
            continue
        crashpoint("after_outbox_claim")
        try:
            result, error = post_webhook(channel, event_id, body)
        except Exception as e:  # never leave a row `sending` from a live process
            result, error = "uncertain", f"{type(e).__name__}: {e}"[:300]
        now = clock.now()
        with write_tx(conn):
            if result == "sent":
                # A delivery is a fact, even if a slow POST was meanwhile swept to uncertain.
                move(conn, event_id, "sent", now=now, last_error=None)
            elif result == "not_delivered":
                move(conn, event_id, "not_delivered", now=now, last_error=error,
                     next_try_at=now + _backoff(config, claimed.tries))
            else:
                move(conn, event_id, "reply_lost", now=now, last_error=error)
        counts[result] += 1
    return counts


def list_outbox(conn: Connection, limit: int = 100) -> list[dict[str, object]]:
    """Notifications, uncertain ones first, then newest."""
    return [{**asdict(r), "body": json.loads(r.body)} for r in outbox_store.listed(conn, limit)]


def resolve_uncertain(
    conn: Connection, config: Config, event_id: str, decision: str, *, actor: str, clock: Clock, note: str = ""
) -> None:
    """A person settles an uncertain notification: 'confirmed' (triage) or 'resend' by another route (approver).

    Recorded as an event on the notification's job; the job's state does not change.
    """
    need = {"confirmed": "triage", "resend": "approver"}.get(decision)
    if need is None:
        raise BadInput(f"decision {decision!r}: use 'confirmed' or 'resend'")
    if need not in config.roles_of(actor):
        raise Refused(f"notification {event_id}: {actor} lacks the {need} role to mark it {decision}")
    with write_tx(conn):
        row = outbox_store.get(conn, event_id)
        if row is None:
            raise BadInput(f"notification {event_id!r}: not in the outbox (see 'reclaim notifications')")
        if row.state != "uncertain":
            raise Refused(f"notification {event_id}: it is {row.state}, only uncertain ones are settled by hand")
        new_state = "confirmed" if decision == "confirmed" else "resent_other_route"
        now = clock.now()
        move(conn, event_id, new_state, now=now)
        job = jobs_store.state_and_epoch(conn, row.key)
        events_store.append(
            conn, row.key, at=now, actor=actor, kind=f"notification_{decision}",
            from_state=job[0] if job else None, to_state=job[0] if job else None,
            epoch=job[1] if job else None, detail={"event_id": event_id, "note": note},
        )
