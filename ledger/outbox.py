"""The notification outbox: rows written in the same transaction as the state change they report."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ledger.config import NotifyConfig
from ledger.model import Job

# Which transition events a notification kind reports.
_EVENT_KINDS: dict[str, str] = {
    "send_unknown": "held",
    "orphan_held": "held",
    "handle_unknown": "held",
    "remote_needs_person": "held",
    "remote_paused": "paused",
    "reject": "resolved",
    "remediate": "resolved",
    "reconcile": "resolved",
    "release": "resolved",
    "delivered": "consumed",
}


def enqueue_for_transition(
    conn: sqlite3.Connection, channels: Mapping[str, NotifyConfig], job: Job, event: str, event_id: int, now: float
) -> list[str]:
    """Queue one outbox row per channel that wants this transition; return their stable event ids."""
    kind = _EVENT_KINDS.get(event)
    if kind is None:
        return []
    ids = []
    for channel in channels.values():
        if kind not in channel.events:
            continue
        if channel.operations is not None and job.operation not in channel.operations:
            continue
        oid = f"evt-{event_id}-{channel.name}"
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
        conn.execute(
            "INSERT INTO outbox (event_id, channel, job_id, operation, kind, body, state, created_at, updated_at, "
            "next_try_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (oid, channel.name, job.job_id, job.operation, kind, json.dumps(body, sort_keys=True), now, now, now),
        )
        ids.append(oid)
    return ids
