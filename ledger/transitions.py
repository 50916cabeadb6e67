"""The state machine: the one function that applies an event, as the event table (ledger.event_table) says.

Every state change in the ledger goes through `apply()`: it checks the step against the table and the expected
state (and epoch, for a worker's write), updates the job as the table says the event does, appends the event
with the next per-job sequence number, and queues any notification, all inside the caller's BEGIN IMMEDIATE
transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger import event_table
from ledger.config import NotifyConfig
from ledger.model import Job, JobKey, canonical_json, detail_json
from ledger.outbox import channels_for, enqueue_for_transition
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

TRANSITIONS = event_table.TRANSITIONS
"""(from state, event) -> to state, from the event table (ledger.event_table)."""
WORKER_EVENTS = event_table.WORKER_EVENTS
"""Events a worker writes: they must name the epoch they hold."""


@dataclass(frozen=True)
class Applied:
    """The outcome of `apply()`: `ok`, or `refusal` is 'fenced' (epoch moved on) or 'state' (state moved on)."""

    ok: bool
    job: Job | None
    event_id: int | None = None
    refusal: str | None = None


def next_state(state: str | None, event: str) -> str | None:
    """The state `event` leads to from `state`, or None when the transition is not allowed."""
    return TRANSITIONS.get((state, event))


_JSON_COLUMNS = frozenset({"payload", "result"})


def _encode(column: str, value: Any) -> Any:
    if column == "payload" and value is not None:
        return canonical_json(value)
    if column == "result" and value is not None:
        return detail_json(value)
    return value


def record_fenced(
    conn: Connection, key: JobKey, *, at: float, actor: str, event: str, epoch: int | None, detail: dict[str, Any]
) -> None:
    """Count a write refused because its epoch was stale, keeping what it tried to say.

    A fenced *accepted* outcome still names a real remote interaction: its handle is kept as evidence
    (source `fenced_outcome`), so `query`, `show` and the release rule see it.
    """
    fenced_id = jobs_store.record_fenced_write(conn, key, at=at, actor=actor, event=event, epoch=epoch,
                                               detail=detail)
    handle = detail.get("handle")
    if event in ("accepted", "orphan_found") and isinstance(handle, str) and handle:
        from ledger.store import evidence as evidence_store

        idem = jobs_store.idem_key_of(conn, key)
        if idem is not None:
            attempt = detail.get("attempt")
            evidence_store.record(
                conn, at=at, source="fenced_outcome", idem_key=idem,
                attempt=attempt if isinstance(attempt, int) else None, handle=handle, remote_state="running",
                job=key, ref=f"fenced-{fenced_id}", detail={"actor": actor, "epoch": epoch, "event": event},
            )


def apply(
    conn: Connection,
    key: JobKey,
    event: str,
    *,
    actor: str,
    now: float,
    expected_state: str | None,
    expected_epoch: int | None = None,
    detail: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
    notify: Mapping[str, NotifyConfig] | None = None,
) -> Applied:
    """Apply `event` to a job in `expected_state` (and `expected_epoch`), inside the caller's transaction.

    What the event changes comes from the event table (ledger.event_table): the state it leads to, the epoch and
    attempt it bumps, the lease it takes (the actor's, until `fields['lease_until']`) or clears, the handle and
    held reason it sets or clears (a held reason's `held_at` is `now`), the columns it clears; `fields` carry
    the columns the table says its writer gives, and no others.

    `expected_state=None` creates the job (the `reserve` event), and a job that already exists is refused as
    'state'. Returns Applied(ok=True) with the updated job and event id, or Applied(ok=False) with nothing
    changed but a fenced write recorded when the epoch moved on. Notifications for `notify` channels are
    queued in the same transaction, only when the change was allowed. Raises ValueError for a step the table
    does not allow (an unknown event, one recorded beside the job, one not allowed from `expected_state`), a
    worker event written without an epoch, a required column missing or a column the event does not set.
    """
    spec = event_table.kind(event)
    to_state = TRANSITIONS.get((expected_state, event))
    if spec is None or to_state is None:
        raise ValueError(f"transition not allowed: {expected_state} --{event}-->")
    if spec.by_worker and expected_epoch is None:
        raise ValueError(f"worker event {event!r} must name the epoch it holds")
    given = dict(fields or {})
    bad = set(given) - spec.settable
    if bad:
        raise ValueError(f"{event} cannot set job columns {sorted(bad)}")
    missing = sorted(c for c in spec.required if given.get(c) is None)
    if missing:
        raise ValueError(f"{event} needs job columns {missing}")
    changes = _effects(spec, given, actor=actor, now=now)
    if expected_state is None:
        return _insert(conn, key, event, to_state, actor=actor, now=now, detail=detail, fields=changes, notify=notify)
    job = jobs_store.update(
        conn, key, state=to_state, now=now, changes={c: _encode(c, v) for c, v in changes.items()},
        bump_epoch=spec.bumps_epoch, bump_attempt=spec.bumps_attempt, expected_state=expected_state,
        expected_epoch=expected_epoch,
    )
    if job is None:
        current = jobs_store.state_and_epoch(conn, key)
        if current is not None and expected_epoch is not None and current[1] != expected_epoch:
            record_fenced(
                conn, key, at=now, actor=actor, event=event, epoch=expected_epoch, detail={**(detail or {}), **{
                    k: v for k, v in changes.items() if k in ("handle", "last_error", "held_reason")
                }}
            )
            return Applied(ok=False, job=None, refusal="fenced")
        return Applied(ok=False, job=None, refusal="state")
    return _record(conn, key, job, event, expected_state, actor=actor, now=now, detail=detail, notify=notify)


def _effects(spec: event_table.EventKind, given: dict[str, Any], *, actor: str, now: float) -> dict[str, Any]:
    """The columns `spec` sets besides state, epoch and attempt: the writer's, then the table's effects."""
    changes = dict.fromkeys(sorted(spec.clears))
    changes.update(given)
    if spec.lease == "take":
        changes["lease_owner"] = actor
    elif spec.lease == "clear":
        changes.update(lease_owner=None, lease_until=None)
    if spec.handle == "clear":
        changes["handle"] = None
    if spec.held_reason == "set":
        changes["held_at"] = now
    elif spec.held_reason == "clear":
        changes["held_reason"] = None
    return changes


def _insert(
    conn: Connection, key: JobKey, event: str, to_state: str, *, actor: str, now: float,
    detail: dict[str, Any] | None, fields: dict[str, Any], notify: Mapping[str, NotifyConfig] | None,
) -> Applied:
    columns = {"created_at": now, **fields, "job_id": key.job_id, "operation": key.operation, "state": to_state,
               "updated_at": now}
    for column in _JSON_COLUMNS.intersection(columns):  # only the JSON columns need encoding
        columns[column] = _encode(column, columns[column])
    if not jobs_store.insert(conn, columns):
        return Applied(ok=False, job=None, refusal="state")
    # The new row is what was written over the columns' defaults (no trigger changes a job as it goes in);
    # built here rather than read back. JSON columns come back decoded from what was stored, as from_row does.
    row = _NEW_JOB.copy()
    row.update(columns)
    job = Job.from_columns(row)
    return _record(conn, key, job, event, None, actor=actor, now=now, detail=detail, notify=notify)


_NEW_JOB: dict[str, Any] = {**dict.fromkeys(Job.__dataclass_fields__), "attempt": 1, "epoch": 0, "tries": 0}
"""A new job's columns before the INSERT's own values: the jobs table's defaults (NULL, attempt 1, epoch 0, tries 0)."""


def _record(
    conn: Connection, key: JobKey, job: Job, event: str, from_state: str | None, *, actor: str,
    now: float, detail: dict[str, Any] | None, notify: Mapping[str, NotifyConfig] | None,
) -> Applied:
    # The channels notified are named in the event (and so sealed in the chain): `verify` finds a deleted row.
    channels = channels_for(notify, job, event) if notify else []
    if channels:
        detail = {**(detail or {}), "notified": channels}
    event_id = events_store.append(
        conn,
        key,
        at=now,
        actor=actor,
        kind=event,
        from_state=from_state,
        to_state=job.state,
        epoch=job.epoch,
        detail=detail,
        job=job,
    )
    if channels and notify:
        enqueue_for_transition(conn, notify, job, event, event_id, now, channels)
    return Applied(ok=True, job=job, event_id=event_id)
