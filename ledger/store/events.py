"""The SQL of the append-only `events` table: the one append (ledger.transitions, ledger.reservation, ledger.policy,
ledger.dispatch), and the named reads (ledger.candidates, ledger.evidence, ledger.triage, ledger.replay,
ledger.follow, ledger.export, ledger.audit, the console): a job's history, its latest event of a kind, the events
after a cursor, the newest, the chain's head, every event's step for replay.

Each backend's SQL is its own (`ledger/store/sql/BACKEND/events.sql`, run by name); each job's reads are served by
`events_job_kind (job_id, operation, kind, id)` or the per-job sequence, the cursor reads by the primary key. Each
raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ledger import seal, signing, store
from ledger.chain import event_hash
from ledger.model import Event, Job, JobKey, detail_json
from ledger.store import Connection


def append(
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
    """Append one event with the job's next sequence number, chained to the last event, inside the caller's write
    transaction; return its id.

    The event is sealed with `job`'s row as the event leaves it (None: the event changes no row) and the
    side chains' heads, signed with this process's key when it holds one (ledger.signing) and authenticated
    with the audit key of an older ledger when it holds that (ledger.seal). Two
    statements (one round trip each): the next seq with the chains' heads, then the row. On PostgreSQL the audit
    chain's lock is taken first (SQLite: BEGIN IMMEDIATE already gave it). Raises the ledger's own errors only.
    """
    store.lock_chain(conn)  # SQLite: BEGIN IMMEDIATE already gave it (nothing is done)
    # One statement (one round trip on PostgreSQL, inside the chain's lock): the next seq and the chains' heads.
    heads = conn.run("events.next_seq_and_head", (key.job_id, key.operation)).fetchone()
    seq, prev, evidence_head, fenced_head = heads
    text = detail_json(detail or {})
    row = None if job is None else seal.row_digest(job.__dict__)
    sealed = seal.seal_text(row, evidence_head, fenced_head)
    digest = event_hash(
        prev, at, key.job_id, key.operation, seq, actor, kind, from_state, to_state, epoch, text, sealed)
    audit_key = seal.current_key()
    signer = signing.current_signer()
    mac = signing.join_proof(seal.mac(audit_key, digest) if audit_key is not None else None,
                             signer.sign(digest) if signer is not None else None)
    params = (at, key.job_id, key.operation, seq, actor, kind, from_state, to_state, epoch, text, prev, digest,
              sealed, mac)
    # The new row's id: SQLite's rowid (no result row to fetch), PostgreSQL's RETURNING id.
    event_id = conn.run("events.insert_event", params).lastrowid
    assert event_id is not None  # an INSERT into a rowid table always sets it, as RETURNING id does
    return int(event_id)


def last_send_started(conn: Connection, key: JobKey) -> float | None:
    """When the job's newest `send_started` event was written; None when it never started a send."""
    row = conn.run("events.last_send_started", (key.job_id, key.operation)).fetchone()
    return float(row[0]) if row is not None and row[0] is not None else None


def of_kind(conn: Connection, key: JobKey, kind: str) -> list[tuple[str, float, dict[str, Any]]]:
    """(actor, at, detail) of each of the job's events of `kind`, oldest first; [] when none."""
    rows = conn.run("events.of_kind", (key.job_id, key.operation, kind)).fetchall()
    return [(str(actor), float(at), json.loads(detail)) for actor, at, detail in rows]


def duplicate_count(conn: Connection) -> int:
    """How many second remote interactions for one idem key were detected (`duplicate_send` events), 0 when none."""
    return int(conn.run("events.duplicate_count").fetchone()[0])


def hash_of(conn: Connection, event_id: int) -> str | None:
    """The audit-chain hash of the event `event_id`; None when there is no such event."""
    row = conn.run("events.hash_of", (event_id,)).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else None


def job_events(conn: Connection, key: JobKey) -> list[Event]:
    """A job's whole history, in its order (by its sequence number); [] when it has none."""
    rows = conn.run("events.job_events", (key.job_id, key.operation))
    return [Event.from_row(r) for r in rows]


def events_after(conn: Connection, after_id: int, limit: int = 200) -> list[Event]:
    """At most `limit` events with id > `after_id`, oldest first: the follow cursor."""
    rows = conn.run("events.events_after", (after_id, limit))
    return [Event.from_row(r) for r in rows]


def latest_events(conn: Connection, limit: int = 20) -> list[Event]:
    """The `limit` newest events, newest first."""
    rows = conn.run("events.latest_events", (limit,))
    return [Event.from_row(r) for r in rows]


def last_event_id(conn: Connection) -> int:
    """The id of the newest event, or 0 on an empty ledger."""
    row = conn.run("events.last_event_id").fetchone()
    return int(row[0] or 0)


def head(conn: Connection) -> tuple[int, str | None]:
    """(number of events, the newest event's hash; None on an empty ledger): the audit chain's anchor to keep outside
    the ledger. Read both inside one snapshot (`read_snapshot`) for the two to agree while others write."""
    row = conn.run("events.newest_hash").fetchone()
    count = conn.run("events.event_count").fetchone()[0]
    return int(count), (row[1] if row else None)


def latest_of_kind(conn: Connection, key: JobKey, kind: str, since_id: int = 0) -> Event | None:
    """The job's newest event of `kind` with an id above `since_id`; None when it has none."""
    row = conn.run("events.latest_of_kind", (key.job_id, key.operation, kind, since_id)).fetchone()
    return Event.from_row(row) if row else None


def triage_work(conn: Connection, key: JobKey, since_id: int) -> list[tuple[str, str]]:
    """(actor, kind) of each of the job's findings, remote queries and dismissed candidates with an id above
    `since_id`, oldest first; [] when none."""
    rows = conn.run("events.triage_work", (key.job_id, key.operation, since_id)).fetchall()
    return [(str(actor), str(kind)) for actor, kind in rows]


def hold_detail(conn: Connection, key: JobKey) -> dict[str, Any] | None:
    """The detail of the event that last put the job on hold (from another state, or as it was created); None when
    no event ever did."""
    row = conn.run("events.hold_detail", (key.job_id, key.operation)).fetchone()
    if row is None:
        return None
    detail = json.loads(row[0])
    return detail if isinstance(detail, dict) else {}


Step = tuple[int, JobKey, int, str, str | None, str | None, int | None]
"""One event as replay folds it: (id, job key, seq, kind, from_state, to_state, epoch)."""


def steps(conn: Connection) -> Iterator[Step]:
    """Every event as a replay step, by job key then sequence number (all of them, read as they go)."""
    rows = conn.run("events.steps")
    for event_id, job_id, operation, seq, kind, from_state, to_state, epoch in rows:
        yield event_id, JobKey(job_id, operation), seq, kind, from_state, to_state, epoch


def job_steps(conn: Connection, key: JobKey) -> list[tuple[str, str | None, str | None, int | None]]:
    """(kind, from_state, to_state, epoch) of each of the job's events, by sequence number; [] when none."""
    rows = conn.run("events.job_steps", (key.job_id, key.operation))
    return [(kind, from_state, to_state, epoch) for kind, from_state, to_state, epoch in rows]


Proven = tuple[int, str, str, dict[str, Any], str | None, str | None]
"""One event as its signature is checked: (id, actor, kind, detail, chain hash, proof)."""


def _proven(row: Any) -> Proven:
    return int(row[0]), str(row[1]), str(row[2]), json.loads(row[3]), row[4], row[5]


def authorising(conn: Connection, key: JobKey) -> list[Proven]:
    """The job's newest reservation or release (what authorised its current attempt) and the one before it,
    newest first; [] for a job without events."""
    return [_proven(r) for r in conn.run("events.authorising", (key.job_id, key.operation)).fetchall()]


def triage_between(conn: Connection, key: JobKey, after_id: int, before_id: int) -> list[Proven]:
    """The job's findings, remote queries and dismissed candidates with ids strictly between the two, oldest first."""
    rows = conn.run("events.triage_between", (key.job_id, key.operation, after_id, before_id)).fetchall()
    return [_proven(r) for r in rows]
