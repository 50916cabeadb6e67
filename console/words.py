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


BATCH_VERBS = {"finding": ("record the finding on", "recorded the finding on"), "release": ("release", "released"),
               "reject": ("reject", "rejected"), "remediate": ("mark remediated", "marked remediated")}
"""What a batch action does to its jobs, as a verb: (would, did)."""


def quota_words(cost: Mapping[str, Any]) -> str:
    """'gemini.generate quota today 12/200 -> 30/200': what a batch of releases costs one operation."""
    return f"{cost['operation']} quota today {cost['used']}/{cost['limit']} -> {cost['after']}/{cost['limit']}"


def batch_plan_lines(doc: Mapping[str, Any]) -> list[str]:
    """A batch plan, for a person: one line per selected job (allowed, or refused and why), the quota each
    operation pays, and the sum ('would release 18 of 20 held jobs; 2 refused'). `doc` is the plan's JSON document."""
    lines = [f"  {'allowed' if j['allowed'] else 'refused'}  {_job(j)}"
             + ("" if j["allowed"] else f": {j['refusal']}") for j in doc["jobs"]]
    lines += [f"  {quota_words(q)}" for q in doc["quota"]]
    n, allowed = len(doc["jobs"]), sum(1 for j in doc["jobs"] if j["allowed"])
    verb = BATCH_VERBS[doc["action"]][0]
    sum_line = f"would {verb} {allowed} of {n} job{'s' if n != 1 else ''}, each its own event"
    if allowed < n:
        sum_line += f"; {n - allowed} refused (listed above)"
    return [*lines, sum_line]


def batch_done_line(doc: Mapping[str, Any]) -> str:
    """After a batch: 'released 18 of 20 jobs as alice (events 41-58); 2 refused (listed above)'."""
    done, n = doc["done"], len(doc["jobs"])
    verb = BATCH_VERBS[doc["action"]][1]
    ids = [d["event_id"] for d in done]
    events = "" if not ids else (f" (event {ids[0]})" if len(ids) == 1 else f" (events {min(ids)}-{max(ids)})")
    refused = n - len(done)
    tail = f"; {refused} refused (listed above)" if refused else ""
    sent = "; nothing was sent" if doc["action"] != "release" else "; the next worker pass sends each new attempt"
    return f"{verb} {len(done)} of {n} job{'s' if n != 1 else ''} as {doc['actor']}{events}{tail}{sent}"


def batch_doc(action: str, actor: str, plan: Any, result: Any = None) -> dict[str, Any]:
    """A batch's JSON document (what `reclaim batch --json` prints and the words above read): every selected job
    with its verdict, the quota cost, and (after `--yes`) what was done and what was refused at its turn.
    `plan` is a `ledger.BatchPlan`, `result` a `ledger.BatchResult` or None for a dry run."""
    late = {(k.job_id, k.operation): why for k, why in (result.refused if result is not None else [])}
    jobs = []
    for item in plan.items:
        key = item.job.key
        refusal = item.refusal or late.get((key.job_id, key.operation))
        jobs.append({"job_id": key.job_id, "operation": key.operation, "state": item.job.state,
                     "allowed": refusal is None, "refusal": refusal})
    doc: dict[str, Any] = {"action": action, "actor": actor, "dry_run": result is None, "jobs": jobs,
                           "quota": [{"operation": q.operation, "used": q.used, "after": q.after, "limit": q.limit}
                                     for q in plan.quota]}
    if result is not None:
        doc["done"] = [{"job_id": k.job_id, "operation": k.operation, "event_id": e} for k, e in result.done]
    return doc
