"""The SQL behind what the remote says (ledger.evidence, ledger.foreign, ledger.receiver): the tables `evidence`,
`evidence_handled`, `webhook_deliveries`, `webhook_refusals` and `foreign_interactions`.

Each backend's SQL is its own (`ledger/store/sql/BACKEND/evidence.sql`, run by name). The decisions (does the
evidence say the job ran, whose interaction a record is, is it foreign) stay in the rule modules; these operations
only read and write rows. A write runs inside the caller's transaction (`ledger.db.write_tx`) and never commits.
Every operation raises the ledger's own errors only: LedgerUnavailable (the server cannot be reached), LedgerLocked
(the write lock was held too long), LedgerCorrupt (damaged pages), LedgerConflict (a constraint or an append-only
trigger refused a write), SerializationFailure (PostgreSQL rolled the transaction back: run it again).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ledger import seal, signing, store
from ledger.model import Evidence, Job, JobKey, detail_json
from ledger.store import Connection

HANDLED_KEY = "handled_evidence"
"""The detail key of an event a worker pass wrote while acting on a piece of evidence: its id, whose
`evidence_handled` row `verify` then expects (a deleted one would have the evidence acted on again)."""

UNOWNED_OUTCOMES = ("orphan: the interaction's record names no idem key", "orphan: the remote no longer knows")
"""How a pass words an orphan whose owner nobody can read (ledgers older than the `record` column kept only these)."""


# -- evidence -----------------------------------------------------------------------------------------------------
def record(
    conn: Connection, *, at: float, source: str, idem_key: str, attempt: int | None, handle: str | None,
    remote_state: str, job: JobKey | None, ref: str | None = None, detail: dict[str, Any] | None = None,
) -> int:
    """Append one piece of evidence, chained to the one before (inside the caller's write transaction); its id.

    On PostgreSQL it first waits for the chain lock, so the evidence chain is extended by one transaction at a
    time. Raises LedgerConflict when the evidence chain's rules refuse the row."""
    store.lock_chain(conn)
    prev = conn.run("evidence.last_hash").fetchone()
    values = [at, source, idem_key, attempt, handle, remote_state, job.job_id if job else None,
              job.operation if job else None, ref, detail_json(detail or {})]
    row = conn.run(
        "evidence.insert",
        (*values, prev[0] if prev else None, seal.side_hash(prev[0] if prev else None, values)),
    ).fetchone()
    return int(row[0])


def for_job(conn: Connection, job: Job, *, attempt: int | None = None) -> list[Evidence]:
    """Every piece of evidence for the job's idem key (of one attempt when given), oldest first; [] when none."""
    if attempt is None:
        rows = conn.run("evidence.for_idem_key", (job.idem_key,))
    else:
        rows = conn.run("evidence.for_idem_key_attempt", (job.idem_key, attempt))
    return [Evidence.from_row(r) for r in rows]


def for_handle(conn: Connection, handle: str, *, source: str | None = None) -> list[Evidence]:
    """Every piece of evidence naming the remote handle `handle` (of one source when given), oldest first."""
    if source is None:
        rows = conn.run("evidence.for_handle", (handle,))
    else:
        rows = conn.run("evidence.for_handle_source", (handle, source))
    return [Evidence.from_row(r) for r in rows]


def get(conn: Connection, evidence_id: int) -> Evidence | None:
    """One piece of evidence by id, or None when there is none with that id."""
    row = conn.run("evidence.get", (evidence_id,)).fetchone()
    return Evidence.from_row(row) if row is not None else None


def latest_id(conn: Connection) -> int:
    """The id of the newest evidence record (0: none yet)."""
    return int(conn.run("evidence.latest_id").fetchone()[0])


# -- what the worker passes did with it (evidence_handled) -----------------------------------------------------------
def mark_handled(conn: Connection, evidence_id: int, outcome: str, now: float,
                 record: dict[str, Any] | None = None) -> None:
    """Record that a pass acted on a piece of evidence (inside the caller's write transaction); the first outcome
    recorded for it stays (a second is ignored). `record`: what the pass read of an orphan's interaction that may
    tell whose it could be (`created`, `model`; `{}` when it could not be read), kept so a held job can list it as
    a candidate (`orphans_since`)."""
    conn.run(
        "evidence.mark_handled",
        (evidence_id, now, outcome, detail_json(record) if record is not None else None),
    )


def unhandled(conn: Connection, limit: int = 200) -> Iterator[Evidence]:
    """Webhook evidence for a known job that no pass has acted on yet, the oldest `limit`, oldest first (read at
    once: the iterator holds no cursor)."""
    rows = conn.run("evidence.unhandled", (limit,)).fetchall()
    return (Evidence.from_row(r) for r in rows)


def unattributed(conn: Connection, limit: int = 200, *, newest: bool = False) -> list[Evidence]:
    """Webhook evidence that names no job and that no pass has looked at yet: the oldest `limit`, oldest first (with
    `newest`: the newest `limit`, newest first)."""
    if newest:
        rows = conn.run("evidence.unattributed_newest", (limit,)).fetchall()
    else:
        rows = conn.run("evidence.unattributed_oldest", (limit,)).fetchall()
    return [Evidence.from_row(r) for r in rows]


def orphans(conn: Connection, limit: int = 200) -> list[Evidence]:
    """Evidence that names no job of this ledger, the newest `limit`, newest first: awaiting attribution (`outcome`
    None) or left orphan by a pass (`outcome` says why). Evidence a pass attributed to a job, or found another
    application's (foreign), is not listed."""
    rows = conn.run("evidence.orphans", (limit,)).fetchall()
    return [Evidence.from_row(r, r["handled_outcome"]) for r in rows]


@dataclass(frozen=True)
class Unowned:
    """Orphan evidence whose owner could not be read, and what was read of its interaction."""

    evidence: Evidence
    created: float | None
    """When the remote says it created the interaction (epoch seconds), when it was read."""
    model: str | None
    """The interaction's model, when it was read."""


def orphans_since(conn: Connection, since: float, limit: int = 500) -> list[Unowned]:
    """Orphan webhook evidence that arrived at or after `since` and whose owner nobody could read, the oldest
    `limit`, oldest first: not attributed yet (no pass has read its interaction, or the GET keeps failing), its
    interaction's record names no idem key, or the remote no longer knows it. Not listed: evidence attributed to a
    job, or whose record names an idem key (another application's or a job's gone), or signed for a remote no
    operation uses. `created` and `model` are what the pass kept of the record (None when not read or not a
    usable value)."""
    rows = conn.run(
        "evidence.orphans_since",
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


# -- webhook deliveries and refusals ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Delivery:
    """A recorded webhook delivery, and its receiver's proof (ledger.signing) over `digest`."""

    webhook_id: str
    received_at: float
    signature: str
    type: str | None
    evidence_id: int | None
    proof: str | None

    @classmethod
    def from_row(cls, row: Any) -> Delivery:
        """From a row of (webhook_id, received_at, signature, type, evidence_id, proof)."""
        return cls(str(row[0]), float(row[1]), str(row[2]), row[3], int(row[4]) if row[4] is not None else None,
                   row[5])

    @property
    def digest(self) -> str:
        """What the receiver signed: the hash of the row's content."""
        return delivery_digest(self.webhook_id, self.received_at, self.signature, self.type, self.evidence_id)


def delivery_digest(webhook_id: str, received_at: float, signature: str, kind: str | None,
                    evidence_id: int | None) -> str:
    """The hash a delivery's proof signs: its table's name and its content."""
    return seal.side_hash(None, ["webhook_deliveries", webhook_id, float(received_at), signature, kind, evidence_id])


def handled_ids(conn: Connection) -> set[int]:
    """The id of every piece of evidence a pass has recorded acting on."""
    return {int(row[0]) for row in conn.run("evidence.handled_ids")}


def delivery(conn: Connection, webhook_id: str) -> Delivery | None:
    """The delivery `webhook_id` as first recorded; None when it was never received."""
    row = conn.run("evidence.delivery", (webhook_id,)).fetchone()
    return Delivery.from_row(row) if row is not None else None


def record_delivery(conn: Connection, *, webhook_id: str, received_at: float, signature: str, kind: str,
                    evidence_id: int | None) -> None:
    """Record a verified delivery once (inside the caller's write transaction), with the evidence it became (None:
    none, an event reclaim does not act on), signed by this process's key when it holds one (ledger.signing).
    Raises LedgerConflict when `webhook_id` was already recorded."""
    signer = signing.current_signer()
    proof = (signer.sign(delivery_digest(webhook_id, received_at, signature, kind, evidence_id))
             if signer is not None else None)
    conn.run(
        "evidence.record_delivery", (webhook_id, received_at, signature, kind, evidence_id, proof),
    )


def count_refusal(conn: Connection, reason: str, n: int = 1) -> None:
    """Add `n` refused (or redelivered) webhook deliveries to the counter for `reason` (inside the caller's write
    transaction; nothing else changes)."""
    conn.run("evidence.count_refusal", (reason, n))


def refusal_counts(conn: Connection) -> dict[str, int]:
    """Refused webhook deliveries by reason, in the order of the reasons ({} when none was refused)."""
    return {str(r[0]): int(r[1]) for r in conn.run("evidence.refusal_counts")}


# -- the register of foreign interactions ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ForeignTally:
    """What the register holds: foreign interactions and the deliveries counted for them."""

    interactions: int
    deliveries: int
    last_seen: float | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


def register_foreign(conn: Connection, *, interaction_id: str, remote: str, labels: str, evidence_id: int | None,
                     seen_at: float) -> None:
    """Register a foreign interaction with its first delivery and `labels` (JSON text, as kept) inside the caller's
    write transaction; an interaction already registered only has this delivery counted and its `last_seen` set."""
    conn.run(
        "evidence.register_foreign",
        (interaction_id, remote, seen_at, seen_at, labels, evidence_id),
    )


def count_foreign_delivery(conn: Connection, interaction_id: str, seen_at: float) -> bool:
    """Count one more delivery for `interaction_id` if it is registered foreign (inside the caller's write
    transaction); False when it is not (nothing is written)."""
    row = conn.run("evidence.count_foreign_delivery", (seen_at, interaction_id)).fetchone()
    return row is not None


def prune_foreign(conn: Connection, before: float) -> int:
    """Forget foreign interactions last seen before `before` (inside the caller's write transaction); how many."""
    cur = conn.run("evidence.prune_foreign", (before,))
    return max(0, cur.rowcount or 0)


def foreign_oldest_seen(conn: Connection) -> float | None:
    """When the longest-unseen foreign interaction was last seen (None: the register is empty)."""
    row = conn.run("evidence.foreign_oldest_seen").fetchone()
    return float(row[0]) if row is not None and row[0] is not None else None


def foreign_tally(conn: Connection) -> ForeignTally:
    """How many foreign interactions the register holds, the deliveries counted for them, the latest seen."""
    row = conn.run("evidence.foreign_tally").fetchone()
    return ForeignTally(int(row[0]), int(row[1]), float(row[2]) if row[2] is not None else None)
