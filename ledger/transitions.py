"""The state machine: the one function that applies an event, as the event table (ledger.event_table) says.

Every state change in the ledger goes through `apply()`: it checks the step against the table and the expected
state (and epoch, for a worker's write), updates the job as the table says the event does, appends the event
with the next per-job sequence number, and queues any notification, all inside the caller's BEGIN IMMEDIATE
transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger import event_table, seal, store
from ledger.chain import event_hash
from ledger.config import NotifyConfig
from ledger.model import Job, JobKey, canonical_json, detail_json
from ledger.outbox import enqueue_for_transition
from ledger.store import Connection

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


NEXT_SEQ_AND_HEAD = (
    "SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = ? AND operation = ?), "
    "(SELECT hash FROM events ORDER BY id DESC LIMIT 1), "
    "(SELECT hash FROM evidence ORDER BY id DESC LIMIT 1), "
    "(SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1)"
)
"""The job's next event sequence number, the audit chain's head hash (NULL on an empty ledger), and the heads
of the evidence and fenced-write chains the event's seal names."""

INSERT_EVENT = (
    "INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
    "prev_hash, hash, seal, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""One event's row; its id comes back as the cursor's `lastrowid` on SQLite, by `RETURNING id` on PostgreSQL."""


def append_event(
    conn: Connection,
    key: JobKey,
    *,
    at: float,
    actor: str,
    kind: str,
    from_state: str | None,
    to_state: str | None,
    epoch: int | None,
    detail: dict[str, Any] | None = None,
    job: Job | None = None,
) -> int:
    """Append one event with the job's next sequence number, chained to the last event; return its id.

    The event is sealed with `job`'s row as the event leaves it (None: the event changes no row) and the
    side chains' heads, and authenticated with this process's audit key when it holds one (ledger.seal).
    """
    pg = store.is_pg(conn)
    if pg:
        store.lock_chain(conn)  # SQLite: BEGIN IMMEDIATE already gave it
    # One statement (one round trip on PostgreSQL, inside the chain's lock): the next seq and the chains' heads.
    seq, prev, evidence_head, fenced_head = conn.execute(NEXT_SEQ_AND_HEAD, (key.job_id, key.operation)).fetchone()
    text = detail_json(detail or {})
    row = None if job is None else seal.row_digest(job.__dict__)
    sealed = seal.seal_text(row, evidence_head, fenced_head)
    digest = event_hash(
        prev, at, key.job_id, key.operation, seq, actor, kind, from_state, to_state, epoch, text, sealed)
    audit_key = seal.current_key()
    mac = seal.mac(audit_key, digest) if audit_key is not None else None
    params = (at, key.job_id, key.operation, seq, actor, kind, from_state, to_state, epoch, text, prev, digest,
              sealed, mac)
    if pg:
        return int(conn.execute(INSERT_EVENT + " RETURNING id", params).fetchone()[0])
    event_id = conn.execute(INSERT_EVENT, params).lastrowid  # SQLite: the new row's id, no result row to fetch
    assert event_id is not None  # an INSERT into a rowid table always sets it
    return event_id


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
    store.lock_chain(conn)  # PostgreSQL: one chain of fenced writes, extended by one transaction at a time
    prev = conn.execute("SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1").fetchone()
    values = [at, key.job_id, key.operation, actor, event, epoch, detail_json(detail)]
    digest = seal.side_hash(prev[0] if prev else None, values)
    fenced_id = conn.execute(
        "INSERT INTO fenced_writes (at, job_id, operation, actor, event, epoch, detail, prev_hash, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (*values, prev[0] if prev else None, digest),
    ).fetchone()[0]
    handle = detail.get("handle")
    if event in ("accepted", "orphan_found") and isinstance(handle, str) and handle:
        from ledger.store import evidence as evidence_store

        row = conn.execute(
            "SELECT idem_key FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
        ).fetchone()
        if row is not None:
            attempt = detail.get("attempt")
            evidence_store.record(
                conn, at=at, source="fenced_outcome", idem_key=row[0],
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
    sets = ["state = ?", "updated_at = ?"]
    params: list[Any] = [to_state, now]
    for column, value in changes.items():
        sets.append(f"{column} = ?")
        params.append(_encode(column, value))
    if spec.bumps_epoch:
        sets.append("epoch = epoch + 1")
    if spec.bumps_attempt:
        sets.append("attempt = attempt + 1")
    where = "job_id = ? AND operation = ? AND state = ?"
    params += [key.job_id, key.operation, expected_state]
    if expected_epoch is not None:
        where += " AND epoch = ?"
        params.append(expected_epoch)
    row = conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE {where} RETURNING *", params).fetchone()
    if row is None:
        current = conn.execute(
            "SELECT state, epoch FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
        ).fetchone()
        if current is not None and expected_epoch is not None and current["epoch"] != expected_epoch:
            record_fenced(
                conn, key, at=now, actor=actor, event=event, epoch=expected_epoch, detail={**(detail or {}), **{
                    k: v for k, v in changes.items() if k in ("handle", "last_error", "held_reason")
                }}
            )
            return Applied(ok=False, job=None, refusal="fenced")
        return Applied(ok=False, job=None, refusal="state")
    job = Job.from_row(row)
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
    values = list(columns.values())
    for i, column in enumerate(columns):  # only the JSON columns need encoding
        if column in _JSON_COLUMNS:
            values[i] = _encode(column, values[i])
    inserted = conn.execute(_insert_sql(tuple(columns)), values).rowcount
    if inserted != 1:
        return Applied(ok=False, job=None, refusal="state")
    # The new row is what was written over the columns' defaults (no trigger changes a job as it goes in);
    # built here rather than read back. JSON columns come back decoded from what was stored, as from_row does.
    row = _NEW_JOB.copy()
    row.update(zip(columns, values, strict=True))
    job = Job.from_columns(row)
    return _record(conn, key, job, event, None, actor=actor, now=now, detail=detail, notify=notify)


_NEW_JOB: dict[str, Any] = {**dict.fromkeys(Job.__dataclass_fields__), "attempt": 1, "epoch": 0, "tries": 0}
"""A new job's columns before the INSERT's own values: the jobs table's defaults (NULL, attempt 1, epoch 0, tries 0)."""


@functools.lru_cache(maxsize=64)
def _insert_sql(columns: tuple[str, ...]) -> str:
    """The INSERT of a new job setting `columns`, doing nothing when the job exists."""
    return (
        f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
        "ON CONFLICT (job_id, operation) DO NOTHING"
    )


def _record(
    conn: Connection, key: JobKey, job: Job, event: str, from_state: str | None, *, actor: str,
    now: float, detail: dict[str, Any] | None, notify: Mapping[str, NotifyConfig] | None,
) -> Applied:
    event_id = append_event(
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
    if notify:
        enqueue_for_transition(conn, notify, job, event, event_id, now)
    return Applied(ok=True, job=job, event_id=event_id)
