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

This module keeps the decisions; the rows are read and written by `ledger.store.evidence`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ledger.model import Evidence, Job
from ledger.store import Connection
from ledger.store import evidence as evidence_store

# What a piece of evidence says the remote did. "absent": positively not there (a 404 for our
# handle, a search that found nothing); "gone": it was there once and the remote no longer keeps it.
SAYS_RAN = frozenset({"completed", "running", "needs_person"})
SAYS_NOT_RUNNING = frozenset({"absent", "failed"})


def says_it_ran(conn: Connection, job: Job) -> Evidence | None:
    """The evidence that the remote completed or is running the current attempt, unless newer evidence
    positively says it is not there; None when nothing says it ran. A failed query adds nothing."""
    standing: Evidence | None = None
    for ev in evidence_store.for_job(conn, job, attempt=job.attempt):
        if ev.remote_state in SAYS_RAN:
            standing = ev
        elif ev.remote_state in SAYS_NOT_RUNNING and (standing is None or ev.handle in (None, standing.handle)):
            standing = None
    return standing


def known_handle(conn: Connection, job: Job) -> Evidence | None:
    """The newest evidence for the current attempt that names a handle (a webhook, a fenced accepted
    outcome, a query): what `query` asks about when the job itself has none."""
    for ev in reversed(evidence_store.for_job(conn, job, attempt=job.attempt)):
        if ev.handle:
            return ev
    return None


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
    it (`created`, epoch seconds, or None) and its `model` (or None). Kept with an orphan's outcome
    (`ledger.store.evidence.mark_handled`)."""
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
