"""The SQL of the append-only `events` table: the one append (ledger.transitions, ledger.reservation, ledger.policy,
ledger.dispatch), and the named reads (ledger.candidates, ledger.evidence, ledger.triage, ledger.replay,
ledger.follow, ledger.export, ledger.audit, the console): a job's history, its latest event of a kind, the events
after a cursor, the newest, the chain's head, every event's step for replay.

The same SQL on both backends; each job's reads are served by `events_job_kind (job_id, operation, kind, id)` or
the per-job sequence, the cursor reads by the primary key. Each raises the ledger's own errors only
(LedgerUnavailable, LedgerLocked, LedgerCorrupt).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ledger import seal, store
from ledger.chain import event_hash
from ledger.model import Event, Job, JobKey, detail_json
from ledger.store import Connection

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
    side chains' heads, and authenticated with this process's audit key when it holds one (ledger.seal). Two
    statements (one round trip each): the next seq with the chains' heads, then the row. On PostgreSQL the audit
    chain's lock is taken first (SQLite: BEGIN IMMEDIATE already gave it). Raises the ledger's own errors only.
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


def last_send_started(conn: Connection, key: JobKey) -> float | None:
    """When the job's newest `send_started` event was written; None when it never started a send."""
    row = conn.execute(
        "SELECT MAX(at) FROM events WHERE job_id = ? AND operation = ? AND kind = 'send_started'",
        (key.job_id, key.operation),
    ).fetchone()
    return float(row[0]) if row is not None and row[0] is not None else None


def of_kind(conn: Connection, key: JobKey, kind: str) -> list[tuple[str, float, dict[str, Any]]]:
    """(actor, at, detail) of each of the job's events of `kind`, oldest first; [] when none."""
    rows = conn.execute(
        "SELECT actor, at, detail FROM events WHERE job_id = ? AND operation = ? AND kind = ? ORDER BY id",
        (key.job_id, key.operation, kind),
    ).fetchall()
    return [(str(actor), float(at), json.loads(detail)) for actor, at, detail in rows]


def duplicate_count(conn: Connection) -> int:
    """How many second remote interactions for one idem key were detected (`duplicate_send` events), 0 when none."""
    return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'duplicate_send'").fetchone()[0])


def hash_of(conn: Connection, event_id: int) -> str | None:
    """The audit-chain hash of the event `event_id`; None when there is no such event."""
    row = conn.execute("SELECT hash FROM events WHERE id = ?", (event_id,)).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else None


def job_events(conn: Connection, key: JobKey) -> list[Event]:
    """A job's whole history, in its order (by its sequence number); [] when it has none."""
    rows = conn.execute(
        "SELECT * FROM events WHERE job_id = ? AND operation = ? ORDER BY seq", (key.job_id, key.operation)
    )
    return [Event.from_row(r) for r in rows]


def events_after(conn: Connection, after_id: int, limit: int = 200) -> list[Event]:
    """At most `limit` events with id > `after_id`, oldest first: the follow cursor."""
    rows = conn.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit))
    return [Event.from_row(r) for r in rows]


def latest_events(conn: Connection, limit: int = 20) -> list[Event]:
    """The `limit` newest events, newest first."""
    rows = conn.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,))
    return [Event.from_row(r) for r in rows]


def last_event_id(conn: Connection) -> int:
    """The id of the newest event, or 0 on an empty ledger."""
    row = conn.execute("SELECT MAX(id) FROM events").fetchone()
    return int(row[0] or 0)


def head(conn: Connection) -> tuple[int, str | None]:
    """(number of events, the newest event's hash; None on an empty ledger): the audit chain's anchor to keep outside
    the ledger. Read both inside one snapshot (`read_snapshot`) for the two to agree while others write."""
    row = conn.execute("SELECT id, hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
    count = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    return int(count), (row[1] if row else None)


def latest_of_kind(conn: Connection, key: JobKey, kind: str, since_id: int = 0) -> Event | None:
    """The job's newest event of `kind` with an id above `since_id`; None when it has none."""
    row = conn.execute(
        "SELECT * FROM events WHERE job_id = ? AND operation = ? AND kind = ? AND id > ? ORDER BY id DESC LIMIT 1",
        (key.job_id, key.operation, kind, since_id),
    ).fetchone()
    return Event.from_row(row) if row else None


def triage_work(conn: Connection, key: JobKey, since_id: int) -> list[tuple[str, str]]:
    """(actor, kind) of each of the job's findings, remote queries and dismissed candidates with an id above
    `since_id`, oldest first; [] when none."""
    rows = conn.execute(
        "SELECT actor, kind FROM events WHERE job_id = ? AND operation = ? AND id > ? "
        "AND kind IN ('finding', 'remote_query', 'candidate_dismissed') ORDER BY id",
        (key.job_id, key.operation, since_id),
    ).fetchall()
    return [(str(actor), str(kind)) for actor, kind in rows]


def hold_detail(conn: Connection, key: JobKey) -> dict[str, Any] | None:
    """The detail of the event that last put the job on hold (from another state, or as it was created); None when
    no event ever did."""
    row = conn.execute(
        "SELECT detail FROM events WHERE job_id = ? AND operation = ? AND to_state = 'held' "
        "AND (from_state IS NULL OR from_state <> 'held') ORDER BY id DESC LIMIT 1",
        (key.job_id, key.operation),
    ).fetchone()
    if row is None:
        return None
    detail = json.loads(row[0])
    return detail if isinstance(detail, dict) else {}


Step = tuple[int, JobKey, int, str, str | None, str | None, int | None]
"""One event as replay folds it: (id, job key, seq, kind, from_state, to_state, epoch)."""


def steps(conn: Connection) -> Iterator[Step]:
    """Every event as a replay step, by job key then sequence number (all of them, read as they go)."""
    rows = conn.execute(
        "SELECT id, job_id, operation, seq, kind, from_state, to_state, epoch FROM events "
        "ORDER BY job_id, operation, seq"
    )
    for event_id, job_id, operation, seq, kind, from_state, to_state, epoch in rows:
        yield event_id, JobKey(job_id, operation), seq, kind, from_state, to_state, epoch


def job_steps(conn: Connection, key: JobKey) -> list[tuple[str, str | None, str | None, int | None]]:
    """(kind, from_state, to_state, epoch) of each of the job's events, by sequence number; [] when none."""
    rows = conn.execute(
        "SELECT kind, from_state, to_state, epoch FROM events WHERE job_id = ? AND operation = ? ORDER BY seq",
        (key.job_id, key.operation),
    )
    return [(kind, from_state, to_state, epoch) for kind, from_state, to_state, epoch in rows]
