"""Job identity and the records read from the ledger: Job, Event, Evidence."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

from ledger import jsontext
from ledger.errors import BadInput

if TYPE_CHECKING:
    from ledger.store import Row

STATES = ("reserving", "submitted", "done", "consumed", "failed", "held", "rejected", "remediated")
TERMINAL = frozenset({"consumed", "rejected", "remediated"})

# The console's groups: each state belongs to exactly one.
GROUPS: dict[str, tuple[str, ...]] = {
    "held": ("held",),
    "reserving": ("reserving",),
    "submitted": ("submitted",),
    "done": ("done",),
    "consumed": ("consumed",),
    "failed": ("failed",),
    "resolved": ("rejected", "remediated"),
}


SORTS: tuple[str, ...] = ("age", "job", "operation", "state", "target", "owner", "attempt", "reason")
"""What a page of a group may be sorted by: the age (creation), the job id, the operation, the state, the target, the
owner, the attempt, the reason (the held reason, else the last error, else the handle: the list's "last word"). The
stage is not one: it is computed from a job's events, not a column of the jobs table."""


def check_sort(sort: str) -> None:
    """BadInput naming the sort keys when `sort` is not one of them (`SORTS`)."""
    if sort not in SORTS:
        raise BadInput(f"sort {sort!r}: unknown (sort by: {', '.join(SORTS)})")


def check_group(group: str) -> None:
    """BadInput naming the groups when `group` is not one of them."""
    if group not in GROUPS:
        raise BadInput(f"group {group!r}: unknown (groups: {', '.join(GROUPS)})")


_json_text = encode_basestring  # a str as JSON text (ensure_ascii=False), exactly as the encoders write it
# Built once: json.dumps() with any keyword builds a new encoder on every call.
_CANONICAL = jsontext.encoder(sort_keys=True, separators=(",", ":"))
_DETAIL = jsontext.encoder(sort_keys=True, separators=(", ", ": "))


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace, UTF-8 text."""
    return _CANONICAL(value)


def detail_json(value: Any) -> str:
    """The stored form of an event's (or a job result's) JSON: sorted keys, UTF-8 text, json's default spacing."""
    return _DETAIL(value)


def default_job_id(operation: str, payload: Any, target: str | None) -> str:
    """The job id when the caller gives none: sha256 of the canonical job spec, first 32 hex."""
    spec = {"operation": operation, "payload": payload, "target": target}
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()[:32]


def idem_key(job_id: str, operation: str) -> str:
    """The stable idempotency key of (job_id, operation), the same on every attempt and release."""
    # canonical_json([job_id, operation]), written out: two strings need no encoder.
    body = f"[{_json_text(job_id)},{_json_text(operation)}]"
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class JobKey:
    """The primary key of a job."""

    job_id: str
    operation: str


@dataclass(frozen=True)
class Job:
    """One row of the jobs table."""

    job_id: str
    operation: str
    idem_key: str
    target: str | None
    payload: Any
    state: str
    attempt: int
    epoch: int
    lease_owner: str | None
    lease_until: float | None
    handle: str | None
    quota_day: str
    created_at: float
    updated_at: float
    next_try_at: float | None
    send_started_at: float | None
    tries: int
    last_error: str | None
    held_reason: str | None
    held_at: float | None
    owner: str | None
    due_at: float | None
    result: Any
    result_at: float | None

    @property
    def key(self) -> JobKey:
        """This job's (job_id, operation)."""
        return JobKey(self.job_id, self.operation)

    @classmethod
    def from_row(cls, row: Row) -> Job:
        """Build a Job from a `SELECT * FROM jobs` row."""
        return cls.from_columns(dict(zip(row.keys(), row, strict=True)))  # dict(row) looks each name up: 24 scans

    @classmethod
    def from_columns(cls, d: dict[str, Any]) -> Job:
        """Build a Job from every column of a jobs row by name, as stored (JSON columns as text); `d` becomes
        the Job's own and must not be used after."""
        d["payload"] = json.loads(d["payload"])
        d["result"] = json.loads(d["result"]) if d["result"] is not None else None
        if d.keys() != _JOB_FIELDS:
            return cls(**d)  # says which column is missing or unknown
        job = object.__new__(cls)  # the fields as they are (no checks in __init__): a frozen dataclass's
        job.__dict__.update(d)  # __init__ sets them one by one through object.__setattr__, ~2x slower
        return job

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_JOB_FIELDS = Job.__dataclass_fields__.keys()


@dataclass(frozen=True)
class Event:
    """One row of the append-only events table."""

    id: int
    at: float
    job_id: str
    operation: str
    seq: int
    actor: str
    kind: str
    from_state: str | None
    to_state: str | None
    epoch: int | None
    detail: dict[str, Any]
    hash: str | None = None  # its link in the audit chain

    @classmethod
    def from_row(cls, row: Row) -> Event:
        """Build an Event from a `SELECT * FROM events` row."""
        d = dict(zip(row.keys(), row, strict=True))
        d["detail"] = json.loads(d["detail"])
        for authentication in ("prev_hash", "seal", "mac"):
            d.pop(authentication, None)
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Evidence:
    """One row of the append-only evidence table: what the remote said about a job (ledger.evidence)."""

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


# -- the typed job filter (`reclaim jobs --filter`, the console's `/`): its words, parsed; ledger.store.jobs
# translates it to SQL (`filter_clause`)
STAGES = {
    "needs-finding": "no finding recorded in the current attempt",
    "awaiting-approval": "a finding is recorded: an approver decides",
    "awaiting-my-approval": "awaiting approval, leaving out (under four-eyes) the jobs you queried or wrote a finding for",
    "assigned": "someone owns it",
}
"""The values `stage:` takes in a typed filter, and what each matches (ledger.stages says a job's own stage)."""


def check_stage(value: str) -> str:
    """Return `value` when it is a stage the filter knows; else raise BadInput naming it and the stages."""
    if value not in STAGES:
        raise BadInput(f"filter stage:{value[:40]}: unknown stage; the stages are "
                       f"{', '.join('stage:' + s for s in STAGES)}")
    return value


FILTER_KEYS = {
    "owner": "the owner, exactly (owner:me is you)",
    "op": "the operation (* is a wildcard)",
    "target": "the target (* is a wildcard)",
    "reason": "words in why it is held or its last error",
    "stage": "who it waits for: needs-finding, awaiting-approval, awaiting-my-approval, assigned",
    "since": "held at or after a time or a span back (since:30m, since:2026-12-01T09:00Z)",
    "until": "held before a time or a span back (until:10m)",
    "text": "a word that itself holds a colon (text:a:b)",
}
"""The keys a typed filter knows, and what each matches; words without a key match id, operation, target and
why the job is held (or its last error)."""
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):(.*)", re.DOTALL)


@dataclass(frozen=True)
class JobFilter:
    """A typed filter: free words on job id / operation / target / held reason / last error, plus owner:, op:,
    target:, reason:, stage: terms."""

    text: str = ""
    owner: str | None = None
    operation: str | None = None
    target: str | None = None
    reason: str | None = None
    stage: str | None = None
    held_since: float | None = None
    """Held at or after this time (epoch seconds): `since:`."""
    held_until: float | None = None
    """Held before this time (epoch seconds): `until:`."""
    me: str | None = field(default=None, compare=False)
    """The operator (stage:awaiting-my-approval leaves out the jobs they queried or wrote a finding for)."""
    four_eyes: bool = field(default=True, compare=False)

    @classmethod
    def parse(cls, query: str, me: str | None = None, *, now: float, four_eyes: bool = True) -> JobFilter:
        """Parse "owner:me op:article.* reason:timeout since:1h bucket" into a filter (`*` is a wildcard in op: and
        target:; `me` is the operator; a span in since:/until: counts back from `now`, the caller's clock). A
        key it does not know, a stage it does not know, or a time it cannot read is refused (BadInput naming it)."""
        words: list[str] = []
        terms: dict[str, str] = {}
        for tok in query.split():
            m = _KEY.fullmatch(tok)
            if m is None:
                words.append(tok)
                continue
            key, value = m.group(1), m.group(2)
            if key not in FILTER_KEYS:
                raise BadInput(
                    f"filter key {_clip(key) + ':'!r}: unknown; the keys are "
                    f"{', '.join(k + ':' for k in FILTER_KEYS)} (words without a key match id, operation, target "
                    "and why it is held; text:a:b for a word with a colon)"
                )
            if key == "text":
                words.append(value)
            else:
                terms[key] = value
        owner = terms.get("owner")
        if owner == "me" and me:
            owner = me
        stage = check_stage(terms["stage"]) if "stage" in terms else None
        from ledger.clock import parse_when

        since, until = (parse_when(terms[k], now, name=f"filter {k}:") if k in terms else None
                        for k in ("since", "until"))
        return cls(text=" ".join(w for w in words if w), owner=owner, operation=terms.get("op"),
                   target=terms.get("target"), reason=terms.get("reason"), stage=stage, held_since=since,
                   held_until=until, me=me, four_eyes=four_eyes)


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
