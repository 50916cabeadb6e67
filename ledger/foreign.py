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

This module keeps the decisions (is a record foreign, which labels are kept); the register's rows are read and
written by `ledger.store.evidence`.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.store import Connection
from ledger.store import evidence as evidence_store

LABELS_KEPT = 8
"""How many of a foreign interaction's labels are kept (for an operator wondering whose it is)."""


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
    """Register a foreign interaction with its first delivery, keeping the first LABELS_KEPT of its labels (inside
    the caller's transaction); an interaction already registered only has this delivery counted. Raises the
    ledger's own errors (ledger.store.evidence.register_foreign)."""
    evidence_store.register_foreign(conn, interaction_id=interaction_id, remote=remote, labels=_labels_text(labels),
                                    evidence_id=evidence_id, seen_at=seen_at)
