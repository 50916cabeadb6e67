"""Foreign interactions: another application's interactions that the project's webhook delivered to reclaim.

Gemini's static webhook is the project's: it delivers every interaction created in the project, not only
reclaim's. A delivery names only an interaction id, so the first delivery of an interaction is recorded as
evidence (the receiver cannot tell whose it is without a remote call, which it never makes) and a worker pass
GETs it once. When the record echoes labels that name no idem key of this ledger (none at all, or another
ledger's, or a probe's), the interaction is **foreign**: it is registered here once, its first delivery's
evidence is marked handled as foreign (never an orphan, never a candidate for a held job, never alarming), and
every later delivery for it is only counted by the receiver, with no evidence, no GET and no worker pass.

A record that echoes **no** labels is not foreign: it could be reclaim's own (a remote that does not echo labels),
so it stays orphan evidence in sight of the held jobs it could belong to (ledger.candidates).

The register is not a chain: rows not seen for `foreign_retention_days` are pruned by the worker's pass (the first
delivery's evidence row stays: the evidence chain is append-only). A delivery after the prune starts over: one
more evidence row and one more GET.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledger.db import Connection

LABELS_KEPT = 8
"""How many of a foreign interaction's labels are kept (for an operator wondering whose it is)."""


@dataclass(frozen=True)
class ForeignTally:
    """What the register holds: foreign interactions and the deliveries counted for them."""

    interactions: int
    deliveries: int
    last_seen: float | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


def _labels_text(labels: Any) -> str:
    if not isinstance(labels, dict):
        return "{}"
    kept = {str(k)[:40]: str(v)[:80] for k, v in list(labels.items())[:LABELS_KEPT]}
    return json.dumps(kept, sort_keys=True)


def is_foreign(snapshot: Any, idem: str | None) -> bool:
    """True when an interaction's record echoes labels, none of which names an idem key (`idem` None): reclaim
    writes an `idem` label on every create, so a record with labels and no `idem` is not reclaim's."""
    labels = snapshot.get("labels") if isinstance(snapshot, dict) else None
    return idem is None and isinstance(labels, dict) and bool(labels)


def register(conn: Connection, *, interaction_id: str, remote: str, labels: Any, evidence_id: int | None,
             seen_at: float) -> None:
    """Register a foreign interaction with its first delivery (inside the caller's transaction); an interaction
    already registered only has this delivery counted."""
    conn.execute(
        "INSERT INTO foreign_interactions (interaction_id, remote, first_seen, last_seen, deliveries, labels, "
        "evidence_id) VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (interaction_id) DO UPDATE SET "
        "last_seen = excluded.last_seen, deliveries = foreign_interactions.deliveries + 1",
        (interaction_id, remote, seen_at, seen_at, _labels_text(labels), evidence_id),
    )


def count_delivery(conn: Connection, interaction_id: str, seen_at: float) -> bool:
    """Count one more delivery for `interaction_id` if it is registered foreign (inside the caller's transaction);
    False when it is not (the delivery is then recorded as evidence as usual)."""
    row = conn.execute(
        "UPDATE foreign_interactions SET last_seen = ?, deliveries = deliveries + 1 WHERE interaction_id = ? "
        "RETURNING interaction_id", (seen_at, interaction_id),
    ).fetchone()
    return row is not None


def prune(conn: Connection, before: float) -> int:
    """Forget foreign interactions last seen before `before` (inside the caller's transaction); how many."""
    cur = conn.execute("DELETE FROM foreign_interactions WHERE last_seen < ?", (before,))
    return max(0, cur.rowcount or 0)


def oldest_seen(conn: Connection) -> float | None:
    """When the longest-unseen foreign interaction was last seen (None: the register is empty)."""
    row = conn.execute("SELECT MIN(last_seen) FROM foreign_interactions").fetchone()
    return float(row[0]) if row is not None and row[0] is not None else None


def tally(conn: Connection) -> ForeignTally:
    """How many foreign interactions the register holds, the deliveries counted for them, the latest seen."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(deliveries), 0), MAX(last_seen) FROM foreign_interactions"
    ).fetchone()
    return ForeignTally(int(row[0]), int(row[1]), float(row[2]) if row[2] is not None else None)
