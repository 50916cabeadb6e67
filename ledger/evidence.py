"""Evidence: what the remote itself says about a job, kept append-only with its source and time.

"The remote's records decide." A query's reply, a signed webhook delivery, and an accepted outcome
that was fenced (its handle is real even though the write came too late) are all evidence. It is
never forgotten: a release is refused while any evidence for the current attempt says the remote
completed, is running or waits on the job, until newer evidence positively says it is not there (a
failed query adds nothing).

A webhook delivery names only an interaction id. The receiver records it against the job whose handle
it is, or against no job; every worker pass then attributes the rest from the interaction's own record
(`owner_of_record`: its `labels`) and acts on the
evidence nobody handled yet (`ledger.worker`): a submitted job is polled at once; a held job with no
handle is reconciled (or gets a finding by `reclaim`); a second interaction for the same idem key is
recorded as a duplicate and cancelled while it runs; an interaction whose owner cannot be read, or
whose idem key the ledger does not know, stays orphan evidence that an operator can reconcile from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger import seal, store
from ledger.model import Job, JobKey, detail_json
from ledger.store import Connection, Row

# What a piece of evidence says the remote did. "absent": positively not there (a 404 for our
# handle, a search that found nothing); "gone": it was there once and the remote no longer keeps it.
SAYS_RAN = frozenset({"completed", "running", "needs_person"})
SAYS_NOT_RUNNING = frozenset({"absent", "failed"})


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence as stored."""

    id: int
    at: float
    source: str
    idem_key: str
    attempt: int | None
    handle: str | None
    remote_state: str
    job: JobKey | None
    ref: str | None
    detail: dict[str, Any]
    outcome: str | None = None
    """What a worker pass did with it (orphan evidence only; None: not looked at yet)."""

    @classmethod
    def from_row(cls, row: Row, outcome: str | None = None) -> Evidence:
        """Build from an `evidence` row."""
        return cls(
            id=row["id"], at=row["at"], source=row["source"], idem_key=row["idem_key"], attempt=row["attempt"],
            handle=row["handle"], remote_state=row["remote_state"],
            job=JobKey(row["job_id"], row["operation"]) if row["job_id"] is not None else None,
            ref=row["ref"], detail=json.loads(row["detail"]), outcome=outcome,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d = dict(self.__dict__)
        d["job"] = {"job_id": self.job.job_id, "operation": self.job.operation} if self.job else None
        return d


def record(
    conn: Connection, *, at: float, source: str, idem_key: str, attempt: int | None, handle: str | None,
    remote_state: str, job: JobKey | None, ref: str | None = None, detail: dict[str, Any] | None = None,
) -> int:
    """Append one piece of evidence (inside the caller's transaction); return its id."""
    store.lock_chain(conn)  # PostgreSQL: the evidence chain is extended by one transaction at a time
    prev = conn.execute("SELECT hash FROM evidence ORDER BY id DESC LIMIT 1").fetchone()
    values = [at, source, idem_key, attempt, handle, remote_state, job.job_id if job else None,
              job.operation if job else None, ref, detail_json(detail or {})]
    row = conn.execute(
        "INSERT INTO evidence (at, source, idem_key, attempt, handle, remote_state, job_id, operation, ref, detail, "
        "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (*values, prev[0] if prev else None, seal.side_hash(prev[0] if prev else None, values)),
    ).fetchone()
    return int(row[0])


def for_job(conn: Connection, job: Job, *, attempt: int | None = None) -> list[Evidence]:
    """Every piece of evidence for the job's idem key (one attempt when given), oldest first."""
    if attempt is None:
        rows = conn.execute("SELECT * FROM evidence WHERE idem_key = ? ORDER BY id", (job.idem_key,))
    else:
        rows = conn.execute(
            "SELECT * FROM evidence WHERE idem_key = ? AND attempt = ? ORDER BY id", (job.idem_key, attempt)
        )
    return [Evidence.from_row(r) for r in rows]


def says_it_ran(conn: Connection, job: Job) -> Evidence | None:
    """The evidence that the remote completed or is running the current attempt, unless newer evidence
    positively says it is not there; None when nothing says it ran. A failed query adds nothing."""
    standing: Evidence | None = None
    for ev in for_job(conn, job, attempt=job.attempt):
        if ev.remote_state in SAYS_RAN:
            standing = ev
        elif ev.remote_state in SAYS_NOT_RUNNING and (standing is None or ev.handle in (None, standing.handle)):
            standing = None
    return standing


def known_handle(conn: Connection, job: Job) -> Evidence | None:
    """The newest evidence for the current attempt that names a handle (a webhook, a fenced accepted
    outcome, a query): what `query` asks about when the job itself has none."""
    for ev in reversed(for_job(conn, job, attempt=job.attempt)):
        if ev.handle:
            return ev
    return None


def handle_owner(conn: Connection, handle: str) -> JobKey | None:
    """The job a handle is attached to, if any."""
    row = conn.execute("SELECT job_id, operation FROM jobs WHERE handle = ? LIMIT 1", (handle,)).fetchone()
    return JobKey(row[0], row[1]) if row else None


def unhandled(conn: Connection, limit: int = 200) -> Iterator[Evidence]:
    """Webhook evidence for a known job that no pass has acted on yet, oldest first."""
    rows = conn.execute(
        "SELECT e.* FROM evidence e LEFT JOIN evidence_handled h ON h.evidence_id = e.id "
        "WHERE h.evidence_id IS NULL AND e.source = 'webhook' AND e.job_id IS NOT NULL ORDER BY e.id LIMIT ?",
        (limit,),
    ).fetchall()
    return (Evidence.from_row(r) for r in rows)


def mark_handled(conn: Connection, evidence_id: int, outcome: str, now: float,
                 record: dict[str, Any] | None = None) -> None:
    """Record that a pass acted on a piece of evidence (inside the caller's transaction). `record`: what the pass
    read of an orphan's interaction that may tell whose it could be (`created`, `model`; `{}` when it could not be
    read), kept so a held job can list it as a candidate (`orphans_since`)."""
    conn.execute(
        "INSERT INTO evidence_handled (evidence_id, at, outcome, record) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (evidence_id) DO NOTHING",
        (evidence_id, now, outcome, detail_json(record) if record is not None else None),
    )


def unattributed(conn: Connection, limit: int = 200, *, newest: bool = False) -> list[Evidence]:
    """Webhook evidence that names no job and that no pass has looked at yet: the oldest `limit` (the newest with
    `newest`, newest first)."""
    order = "DESC" if newest else ""
    rows = conn.execute(
        "SELECT e.* FROM evidence e LEFT JOIN evidence_handled h ON h.evidence_id = e.id "
        f"WHERE h.evidence_id IS NULL AND e.source = 'webhook' AND e.job_id IS NULL ORDER BY e.id {order} LIMIT ?",
        (limit,),
    ).fetchall()
    return [Evidence.from_row(r) for r in rows]


def orphans(conn: Connection, limit: int = 200) -> list[Evidence]:
    """Evidence that names no job of this ledger, newest first: awaiting attribution (`outcome` None) or
    left orphan by a pass (`outcome` says why). Evidence a pass attributed to a job, or found another
    application's (foreign: ledger.foreign), is not listed."""
    rows = conn.execute(
        "SELECT e.*, h.outcome AS handled_outcome FROM evidence e "
        "LEFT JOIN evidence_handled h ON h.evidence_id = e.id "
        "WHERE e.job_id IS NULL AND (h.outcome IS NULL OR (h.outcome NOT LIKE 'attributed%' "
        "AND h.outcome NOT LIKE 'foreign%')) "
        "ORDER BY e.id DESC LIMIT ?", (limit,),
    ).fetchall()
    return [Evidence.from_row(r, r["handled_outcome"]) for r in rows]


UNOWNED_OUTCOMES = ("orphan: the interaction's record names no idem key", "orphan: the remote no longer knows")
"""How a pass words an orphan whose owner nobody can read (ledgers older than the `record` column kept only these)."""


@dataclass(frozen=True)
class Unowned:
    """Orphan evidence whose owner could not be read, and what was read of its interaction."""

    evidence: Evidence
    created: float | None
    """When the remote says it created the interaction (epoch seconds), when it was read."""
    model: str | None
    """The interaction's model, when it was read."""


def orphans_since(conn: Connection, since: float, limit: int = 500) -> list[Unowned]:
    """Orphan webhook evidence that arrived at or after `since` and whose owner nobody could read, oldest first:
    not attributed yet (no pass has read its interaction, or the GET keeps failing), its interaction's record names
    no idem key, or the remote no longer knows it. Not listed: evidence attributed to a job, or whose record names an
    idem key (another application's or a job's gone), or signed for a remote no operation uses."""
    rows = conn.execute(
        "SELECT e.*, h.outcome AS handled_outcome, h.record AS handled_record FROM evidence e "
        "LEFT JOIN evidence_handled h ON h.evidence_id = e.id "
        "WHERE e.job_id IS NULL AND e.source = 'webhook' AND e.at >= ? "
        "AND (h.evidence_id IS NULL OR h.record IS NOT NULL OR h.outcome LIKE ? OR h.outcome LIKE ?) "
        "ORDER BY e.id LIMIT ?",
        (since, UNOWNED_OUTCOMES[0] + "%", UNOWNED_OUTCOMES[1] + "%", limit),
    ).fetchall()
    out: list[Unowned] = []
    for r in rows:
        read = json.loads(r["handled_record"]) if r["handled_record"] else {}
        created = read.get("created")
        model = read.get("model")
        out.append(Unowned(
            Evidence.from_row(r, r["handled_outcome"]),
            float(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else None,
            model if isinstance(model, str) and model else None,
        ))
    return out


def for_handle(conn: Connection, handle: str, *, source: str | None = None) -> list[Evidence]:
    """Every piece of evidence naming the remote handle `handle` (of one source when given), oldest first."""
    if source is None:
        rows = conn.execute("SELECT * FROM evidence WHERE handle = ? ORDER BY id", (handle,))
    else:
        rows = conn.execute("SELECT * FROM evidence WHERE handle = ? AND source = ? ORDER BY id", (handle, source))
    return [Evidence.from_row(r) for r in rows]


def latest_id(conn: Connection) -> int:
    """The id of the newest evidence record (0: none)."""
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM evidence").fetchone()[0])


def get(conn: Connection, evidence_id: int) -> Evidence | None:
    """One piece of evidence by id, or None."""
    row = conn.execute("SELECT * FROM evidence WHERE id = ?", (evidence_id,)).fetchone()
    return Evidence.from_row(row) if row is not None else None


MAX_ATTEMPT = 1_000_000
"""A label's attempt above this is not a number reclaim wrote: it is ignored."""


def owner_of_record(snapshot: Any) -> tuple[str | None, int | None, str | None]:
    """Whose interaction a remote record is: (idem key, attempt, where it was read) from its own fields.

    Reads `labels` (`idem`, `attempt`): a documented request and resource field, though no documented example
    reply shows it, so a GET may not echo it. (None, None, None) when no label names an idem key. For a remote
    whose records carry the key as `key` (the HTTP clean-up remote), that key.
    """
    if not isinstance(snapshot, dict):
        return None, None, None
    labels = snapshot.get("labels")
    if isinstance(labels, dict) and isinstance(labels.get("idem"), str) and labels["idem"]:
        raw = labels.get("attempt")
        text = str(raw) if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
        attempt = int(text) if text.isdigit() and len(text) <= 7 and int(text) <= MAX_ATTEMPT else None
        return labels["idem"], attempt, "labels"
    if isinstance(snapshot.get("key"), str) and snapshot["key"]:
        return snapshot["key"], None, "key"
    return None, None, None


def what_record_says(snapshot: Any) -> dict[str, Any]:
    """What a remote record tells of whose interaction it could be, when its labels do not: when the remote created
    it (`created`, epoch seconds, or None) and its `model` (or None). Kept with an orphan's outcome (`mark_handled`)."""
    if not isinstance(snapshot, dict):
        return {"created": None, "model": None}
    created: float | None = None
    raw = snapshot.get("created") or snapshot.get("create_time")
    if isinstance(raw, str) and raw.strip():
        try:
            when = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
            created = (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
        except ValueError:
            created = None
    elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
        created = float(raw)
    model = snapshot.get("model")
    return {"created": created, "model": model if isinstance(model, str) and model else None}


def duplicate_count(conn: Connection) -> int:
    """How many second remote interactions for one idem key were detected."""
    return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'duplicate_send'").fetchone()[0])


def count_refusal(conn: Connection, reason: str, n: int = 1) -> None:
    """Add `n` refused (or redelivered) webhook deliveries to the counter for `reason` (inside the caller's
    transaction; nothing else changes)."""
    conn.execute(
        "INSERT INTO webhook_refusals (reason, n) VALUES (?, ?) "
        "ON CONFLICT (reason) DO UPDATE SET n = webhook_refusals.n + excluded.n",
        (reason, n),
    )


def refusal_counts(conn: Connection) -> dict[str, int]:
    """Refused webhook deliveries by reason."""
    return {r[0]: r[1] for r in conn.execute("SELECT reason, n FROM webhook_refusals ORDER BY reason")}
