"""What a CLI command did, as one human line: the facts its `--json` document holds, in words.

Nothing here reads the ledger or prints; the CLI passes the facts in and prints the line. No Python repr
(`None`, `[...]`, `{...}`) ever reaches a person: a missing value is said in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.times import when

TICK_WORDS: tuple[tuple[str, str], ...] = (
    ("sent", "sent"), ("accepted", "accepted"), ("not_delivered", "not delivered"), ("invalid", "invalid"),
    ("held", "held"), ("polled", "polled"), ("completed", "completed"), ("failed", "failed"),
    ("delivered", "delivered"), ("orphans_found", "orphans found"), ("orphans_held", "orphans held"),
    ("fenced", "fenced"), ("abandoned", "given up"), ("remote_refused", "refused by a paused remote"),
    ("journal_replayed", "replayed from the outcome journal"), ("evidence_polled", "evidence polled"),
    ("evidence_attributed", "evidence attributed"), ("foreign", "foreign deliveries"),
    ("duplicates_cancelled", "duplicates cancelled"),
    ("reconciled_by_evidence", "reconciled by evidence"), ("duplicates", "DUPLICATE SENDS"),
)
"""A worker pass's counters, in the order a person reads them, with their words."""


def tick_line(report: Mapping[str, Any]) -> str:
    """One worker pass: 'tick: sent 2, accepted 2, held 1; notifications: 3 sent', or 'tick: nothing to do'."""
    parts = [f"{words} {report[key]}" for key, words in TICK_WORDS if report.get(key)]
    notes = report.get("notifications") or {}
    said = ", ".join(f"{n} {state}" for state, n in sorted(notes.items()) if n)
    if not parts and not said:
        return "tick: nothing to do"
    return "tick: " + ", ".join(parts) + (("; " if parts else "") + f"notifications: {said}" if said else "")


def _job(doc: Mapping[str, Any]) -> str:
    return f"{doc['job_id']} / {doc['operation']}"


def _quoted(text: object) -> str:
    return '"' + str(text).replace("\n", " ") + '"'


def query_line(doc: Mapping[str, Any]) -> str:
    """A query's answer: what the remote said (or why it was not asked), the handle, what this remote can answer,
    and that the reply was recorded."""
    state, handle, error = doc["remote_state"], doc.get("handle"), doc.get("error")
    if not doc.get("asked", True):
        said = f"the remote was not asked: {error}" if error else "the remote was not asked"
    elif state == "error":
        said = f"the remote could not answer ({error})" if error else "the remote could not answer"
    else:
        said = f"the remote says {state}" + (f" ({error})" if error else "")
    held = f"handle {handle}" if handle else "no handle known"
    can = "; ".join(doc.get("can_answer") or [])
    return (f"queried {_job(doc)} as {doc['actor']}: {said}; {held}; reply recorded, the job is still "
            f"{doc['state']}" + (f"; this remote {can}" if can else ""))


def action_line(name: str, doc: Mapping[str, Any], *, now: float, tz: str) -> str:
    """The line a triage command prints after writing: what was recorded, by whom, and where the job is now."""
    job, who, state = _job(doc), doc["actor"], doc["state"]
    if name == "query":
        return query_line(doc)
    if name == "finding":
        return (f"recorded finding {doc['category']} on {job} as {who} (event {doc['event_id']}): "
                f"{_quoted(doc['note'])}; the job is still {state}, attempt {doc['attempt']}; nothing was sent")
    if name == "dismiss-candidate":
        left = doc.get("candidates_left") or []
        after = (f"{len(left)} candidate{'s' if len(left) != 1 else ''} left to decide "
                 f"(evidence {', '.join(str(i) for i in left)})" if left else "no candidate left to decide")
        return (f"dismissed evidence {doc['evidence_id']} as a candidate of {job} as {who} (event {doc['event_id']}): "
                f"{_quoted(doc['reason'])}; {after}; the job is still {state}; nothing was sent")
    if name == "assign":
        return (f"assigned {job} to {doc['owner']}, due {when(doc['due_at'], now, tz)}, as {who} "
                f"(event {doc['event_id']}): {_quoted(doc['reason'])}; nothing was sent")
    if name == "release":
        return (f"released {job} as {who} (event {doc['event_id']}): attempt {doc['attempt']} is {state}, sent by "
                f"the next worker pass with the same idem key")
    if name == "reconcile":
        how = "verified with the remote" if doc["verified"] else "UNVERIFIED (the remote was not asked)"
        return (f"reconciled {job} as {who} (event {doc['event_id']}): handle {doc['handle']} attached, {how}; "
                f"the job is {state}; nothing was sent")
    if name == "reject":
        return (f"rejected {job} as {who} (event {doc['event_id']}): {_quoted(doc['reason'])}; the job is {state}; "
                "nothing was sent")
    if name == "remediate":
        return (f"marked {job} remediated as {who} (event {doc['event_id']}): {_quoted(doc['note'])}; the job is "
                f"{state}; nothing was sent")
    return f"{name} {job} as {who}: the job is {state}"
