"""The notification outbox: rows written in the same transaction as the state change they report.

Its states move only through `OUTBOX_TRANSITIONS`, by `move()`: pending -> sending (claimed, committed
before the POST) -> sent | pending (refused before delivery, retried later) | uncertain (the reply was
lost, or the process died mid-POST: never re-sent automatically) -> confirmed | resent_other_route (a
person settled it). A delivery that arrives after its row was swept to uncertain is still a fact: sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ledger.config import NotifyConfig
from ledger.model import Job
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import outbox as outbox_store
from ledger.store.outbox import OutboxRow

# (from state, event) -> to state, for outbox rows.
OUTBOX_TRANSITIONS: dict[tuple[str, str], str] = {
    ("pending", "claim"): "sending",
    ("sending", "sent"): "sent",
    ("uncertain", "sent"): "sent",
    ("sending", "not_delivered"): "pending",
    ("sending", "reply_lost"): "uncertain",
    ("sending", "abandoned"): "uncertain",
    ("uncertain", "confirmed"): "confirmed",
    ("uncertain", "resent_other_route"): "resent_other_route",
}


def move(
    conn: Connection, event_id: str, event: str, *, now: float, count_try: bool = False, **fields: Any
) -> OutboxRow | None:
    """Move one outbox row by `event` from any state the table allows (inside the caller's transaction).

    Returns the updated row, or None when the row is not in such a state (someone else moved it first).
    `fields` sets `last_error` / `next_try_at`; `count_try` adds one to `tries`. Raises ValueError for an
    event the table does not know or a column that cannot be set.
    """
    sources = [s for (s, e) in OUTBOX_TRANSITIONS if e == event]
    if not sources:
        raise ValueError(f"outbox event {event!r} is not in the table")
    return outbox_store.move(conn, event_id, to_state=OUTBOX_TRANSITIONS[(sources[0], event)], from_states=sources,
                             now=now, fields=fields, count_try=count_try)


# Which transition events a notification kind reports.
_EVENT_KINDS: dict[str, str] = {
    "send_unknown": "held",
    "orphan_held": "held",
    "decision_unverified": "held",
    "handle_unknown": "held",
    "remote_needs_person": "held",
    "remote_paused": "paused",
    "reject": "resolved",
    "remediate": "resolved",
    "reconcile": "resolved",
    "release": "resolved",
    "delivered": "consumed",
}


def channels_for(channels: Mapping[str, NotifyConfig], job: Job, event: str) -> list[str]:
    """The names of the channels that want `event` on `job` (the order the config gives); [] when none."""
    kind = _EVENT_KINDS.get(event)
    if kind is None:
        return []
    return [c.name for c in channels.values()
            if kind in c.events and (c.operations is None or job.operation in c.operations)]


def outbox_id(event_id: int, channel: str) -> str:
    """The stable id of the notification of event `event_id` on `channel` (what the receiver dedups on)."""
    return f"evt-{event_id}-{channel}"


def enqueue_for_transition(
    conn: Connection, channels: Mapping[str, NotifyConfig], job: Job, event: str, event_id: int, now: float,
    names: list[str],
) -> list[str]:
    """Queue one outbox row for each of the channels `names` (`channels_for`: those that want this transition);
    return their stable event ids."""
    kind = _EVENT_KINDS[event]
    ids = []
    for name in names:
        channel = channels[name]
        oid = outbox_id(event_id, channel.name)
        body: dict[str, Any] = {
            "event_id": oid,
            "kind": kind,
            "event": event,
            "job_id": job.job_id,
            "operation": job.operation,
            "target": job.target,
            "state": job.state,
            "attempt": job.attempt,
            "held_reason": job.held_reason,
        }
        # The audit chain's head as of this event: a copy outside the ledger that anchors it.
        body["ledger_head"] = {"event_id": event_id, "hash": events_store.hash_of(conn, event_id)}
        if kind == "paused":  # the remote refuses every job: say what it answered
            body["remote_error"] = job.last_error
        outbox_store.insert(conn, event_id=oid, channel=channel.name, key=job.key, kind=kind,
                            body=json.dumps(body, sort_keys=True), now=now)
        ids.append(oid)
    return ids
