"""The audit chain, and `verify`: is this ledger what its own history says it is?

Every event carries the hash of the event before it and its own: sha256 over the previous hash, the
event's canonical form and its seal (ledger.seal), written in the same transaction as the event. Triggers
refuse UPDATE, DELETE and REPLACE on events and any event that does not chain to the last one; `verify`
checks what triggers cannot (someone who dropped them, or edited the file): it recomputes the chain; checks
every event's signature against the policy in force when it was written, with public keys only (ledger.authors;
every failing event is listed), and with an older ledger's audit key every MAC; rebuilds every job's state, epoch and attempt from the events through
the event table (ledger.event_table), naming an event whose step the table does not allow, and compares them and
the sealed columns (payload, handle, idem key, result, owner, due, held reason, last error, next try,
tries, ...) with the `jobs` table; replays the quota; checks the state counts, the evidence and fenced-write
chains, the webhook deliveries and the triggers; and runs SQLite's integrity check. The head (the number of events and the
newest one's hash) is shown by `status` and sent with notifications; `verify --expect-head` compares it,
so a copy outside the ledger catches a deleted tail or a re-hashed chain.

The events are read as two streams, nothing kept per job or per event: by id (the chain, MACs, signatures, quota,
the rows beside the events, looked up in batches) and by job, merged with the jobs table by its key (`by_job`:
steps, state, epoch, attempt, sealed columns); the failing events listed stop at FAILING_LIMIT, the rest counted.
`verify(since=(count, hash))` checks only what was appended after a head an earlier verify printed (see
`verify`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ledger import authors, event_table, replay, seal, store
from ledger import policy as policy_rules
from ledger.chain import event_hash
from ledger.clock import day_of
from ledger.config import Config
from ledger.errors import LedgerError
from ledger.model import JobKey
from ledger.outbox import outbox_id
from ledger.seal import mac_ok
from ledger.signing import Proof
from ledger.store import Connection
from ledger.store import evidence as evidence_store
from ledger.store import verify as verify_store

HANDLED_TEXT = f'"{evidence_store.HANDLED_KEY}"'

UNKEYED_KINDS = frozenset({"finding", "assign", "remote_query", "candidate_dismissed"})
"""Events a triage account writes: without the audit key (it holds none) they carry no MAC, and are
authenticated only by the next keyed event chained on top of them."""


FAILING_LIMIT = 1000
"""How many failing events (and unsigned deliveries) a verdict lists one by one; the rest are counted (`unlisted`),
so a ledger broken everywhere is still checked in bounded memory."""
_REFERENCE_BATCH = 500
"""How many rows beside the events (notifications, handled evidence) are looked up at once."""


@dataclass
class Verdict:
    """What `verify` found: ok, or the first break of each kind, and the counts it read."""

    events: int = 0
    jobs: int = 0
    head_hash: str | None = None
    chain_break: str | None = None
    job_mismatch: str | None = None
    integrity: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Every other break, one line each: the first of each kind for the tables (sealed job rows, quota, counts, side
    tables, triggers, the head), and every event that fails (a later chain break, a step the event table does not
    allow, a signature, a notification or handled evidence gone) and every unsigned webhook delivery: the first
    FAILING_LIMIT of those, the rest counted in `unlisted`."""
    unlisted: int = 0
    """Failing events (and unsigned deliveries) found beyond the FAILING_LIMIT that `problems` lists."""
    mac_checked: bool = False
    unauthenticated: int = 0
    """Triage events written without the key (allowed; see UNKEYED_KINDS)."""
    since: str | None = None
    """The head (COUNT:HASH) the check started after (`verify --since`); None: the whole ledger was checked."""
    jobs_checked: int = 0
    """With `since`: the jobs the events after it touched, whose rows were checked (else every job)."""
    pages_checked: bool = True
    """False with `since`: the database's whole-file integrity check was skipped."""

    @property
    def ok(self) -> bool:
        """True when the chain holds, the jobs equal their replay, and nothing else is broken."""
        return self.chain_break is None and self.job_mismatch is None and not self.integrity and not self.problems

    @property
    def head(self) -> str:
        """The head read, as COUNT:HASH (what `--since` and `--expect-head` take next time; "0:-" when empty)."""
        return f"{self.events}:{self.head_hash or '-'}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"ok": self.ok, "head": self.head, **self.__dict__}


class HeadNotInLedger(ValueError):
    """`verify --since COUNT:HASH` given a COUNT this ledger does not reach (or below 1): nothing was checked."""


@dataclass
class _Replay:
    """What the events say, gathered while the chain is walked: nothing per job (the jobs are checked in their own
    pass), so its size does not grow with the ledger."""

    quota: dict[tuple[str, str], int] = field(default_factory=dict)
    quota_checked: set[tuple[str, str]] = field(default_factory=set)
    evidence_head: str | None = None
    fenced_head: str | None = None
    problems: dict[str, str] = field(default_factory=dict)  # first problem per category
    failing: list[str] = field(default_factory=list)
    """Every event that fails, one line each: the first FAILING_LIMIT (see `fail`)."""
    unlisted: int = 0
    expected: list[tuple[str, str, str | int]] = field(default_factory=list)
    """(event name, "notification" or "handled", its id) of each row beside the events an event says it wrote, not
    looked up yet (at most _REFERENCE_BATCH: see `_flush_references`)."""
    policies: policy_rules.PolicyChain = field(default_factory=policy_rules.PolicyChain)
    policy: Config = field(default_factory=Config)
    """The policy in force at the event being read (the newest valid policy event before it)."""
    signed: bool = False
    """authors.required(policy): whether events' signatures count under it."""
    signed_since: float | None = None
    """When the first policy that requires signatures (ledger.authors) was recorded; None: none has."""
    touched: set[tuple[str, str]] | None = None
    """With --since: the jobs the events after the head touched (None: every job is checked)."""
    quota_from: float | None = None
    """With --since: the time of the earliest reservation or release after the head (None: none)."""

    def note(self, category: str, text: str) -> None:
        self.problems.setdefault(category, text)

    def fail(self, text: str) -> None:
        """List one failing event (counted only, past FAILING_LIMIT)."""
        if len(self.failing) < FAILING_LIMIT:
            self.failing.append(text)
        else:
            self.unlisted += 1


@dataclass(frozen=True)
class _Start:
    """The head `--since` starts after: event number `count`, its id, its stored hash, time and seal."""

    count: int
    id: int
    hash: str | None
    at: float
    seal: str | None


def parse_head(text: str) -> tuple[int, str]:
    """`COUNT:HASH` (what `status` shows and notifications carry) as (count, hash); ValueError when malformed."""
    count, sep, digest = text.partition(":")
    if not sep or not count.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{text[:80]!r} is not COUNT:HASH (a number of events, a colon, a 64-hex head hash)")
    return int(count), digest


def verify(
    conn: Connection, *, key: bytes | None = None, expect_head: tuple[int, str] | None = None,
    timezone: str = "UTC", since: tuple[int, str] | None = None,
) -> Verdict:
    """Check the chain (and, with `key`, every event's MAC), every event's step against the event table, the jobs
    against the replay of their events (state, epoch, attempt, and the sealed columns), the quota and state
    counts, the evidence, fenced-write and webhook tables, the triggers, the head against `expect_head` (count,
    hash), and the database's integrity; one snapshot. The events are walked twice, by id and then by job, each
    as a stream: memory does not grow with the ledger (the failing events listed stop at FAILING_LIMIT).

    With `since` (count, hash: a head an earlier verify printed), check that event number `count` still has that
    hash (else the chain was rewritten: `chain_break`), then only what was appended after it: the chain, MACs,
    signatures (under the policy in force, the policy events before it folded too), steps and seals of the events
    after it and the rows of the jobs they touched, the quota of the days they counted on, the side tables and
    the triggers; not the file's pages (`pages_checked` False) nor the kept counters (recounts of whole tables).

    `timezone` is the quota's, for releases recorded before they named their quota day. Raises HeadNotInLedger
    when `since` names an event number below 1 or beyond the ledger (nothing checked). Never raises for a
    damaged file: what cannot be read is reported in `integrity`, and the checks that can still run do.
    """
    v = Verdict(mac_checked=key is not None)
    r = _Replay()
    with contextlib.nullcontext() if conn.in_transaction else verify_store.snapshot(conn):
        start = _since_start(conn, since) if since is not None else None
        pages: Callable[[], list[str]] = list
        if start is None:
            # in the caller's transaction, the check sees what it sees (edits not committed); otherwise it runs
            # beside the walk, on a connection of its own
            pages = _pages_now(conn) if conn.in_transaction else _pages_beside(conn)
        else:
            assert since is not None
            v.since, v.pages_checked, r.touched = f"{since[0]}:{since[1]}", False, set()
            if start.hash != since[1]:
                v.chain_break = (f"event {start.id}: is event number {start.count}, but its hash differs from the head "
                                 f"--since names: the chain was rewritten (re-hashed) up to there; run a full verify")
        unread: list[str] = []
        try:
            try:
                _check_chain(conn, v, r, key, expect_head, timezone, start)
            except (LedgerError, ValueError, TypeError) as e:
                unread.append(f"the events cannot be read: {e}")
            try:
                v.jobs = verify_store.job_count(conn)
                if r.touched is None:
                    _check_jobs(v, r, verify_store.job_events(conn), verify_store.jobs_checked(conn))
                else:
                    _check_touched(conn, v, r)
                if start is not None:
                    _recount_quota(conn, r, timezone)
                _check_tables(conn, r)
            except (LedgerError, ValueError, TypeError) as e:
                unread.append(f"the jobs cannot be read: {e}")
        finally:
            v.integrity = pages() + unread
        try:
            missing = store.missing_triggers(conn)
        except LedgerError as e:
            missing = [f"(cannot be listed: {e})"]
        if missing:
            r.note("triggers", f"triggers missing or disabled: {', '.join(missing)} (someone with write access to "
                               "the database dropped them; what they guard may have been edited)")
        v.problems = list(r.problems.values()) + r.failing
        v.unlisted = r.unlisted
    return v


def record_pass(conn: Connection, verdict: Verdict, *, scope: str, actor: str, at: float) -> None:
    """Record a verify of `scope` that found nothing wrong (`verify_passes`), in its own write transaction. Raises
    ValueError for a verdict that is not ok, and the ledger's own errors when it cannot be written."""
    if not verdict.ok:
        raise ValueError("only a verify that found nothing wrong is recorded as a pass")
    from ledger.db import write_tx

    with write_tx(conn, rows_only=True):
        verify_store.record_pass(conn, verify_store.VerifyPass(scope, at, verdict.events, verdict.head_hash, actor))


def _pages_now(conn: Connection) -> Callable[[], list[str]]:
    """The database's integrity check, run now on `conn`: the function giving its problems."""
    try:
        found = store.integrity_problems(conn)
    except LedgerError as e:
        found = [f"SQLite's integrity check could not run: {e}"]
    return lambda: found


def _pages_beside(conn: Connection) -> Callable[[], list[str]]:
    """The database's integrity check, started beside the walk: the function waiting for its problems."""
    try:
        wait = store.integrity_problems_beside(conn)
    except LedgerError as e:
        failed = [f"SQLite's integrity check could not run: {e}"]
        return lambda: failed

    def problems() -> list[str]:
        try:
            return wait()
        except LedgerError as e:
            return [f"SQLite's integrity check could not run: {e}"]

    return problems


def _since_start(conn: Connection, since: tuple[int, str]) -> _Start:
    """Event number since[0] as stored; HeadNotInLedger when there is none."""
    count = since[0]
    found = verify_store.nth_event(conn, count) if count >= 1 else None
    if found is None:
        held = verify_store.event_count(conn)
        raise HeadNotInLedger(f"{count}:{since[1][:12]}... names event number {count}, but this ledger holds {held}"
                              + (" (an event number starts at 1)" if count < 1 else
                                 ": is it the ledger that head was kept from? If it is, events were deleted from its "
                                 "end: run a full 'reclaim verify --expect-head' with that head"))
    return _Start(count, *found)


def _name(row: Any) -> str:
    """How a problem line names an event of the chain."""
    return f"event {row[0]} ({row[2]} / {row[3]} seq {row[4]}, {row[6]} by {row[5]})"


def _check_chain(
    conn: Connection, v: Verdict, r: _Replay, key: bytes | None, expect_head: tuple[int, str] | None,
    timezone: str, start: _Start | None = None,
) -> None:
    """Recompute the hash chain in id order (from `start` on: the events after it), and the MACs with `key`; record
    the first break, the head hash, and what the events say about the policy, quota and the rows beside them, in
    `v` and `r` (with `start`, also the jobs the events touched). Keeps nothing per event or per job."""
    prev: str | None = None
    sealed_from = False  # an event with a seal was read: every later one must have one
    after: int | None = None
    if start is not None:
        v.events, prev, after = start.count, start.hash, start.id
        if start.seal is not None:
            sealed_from = True
            _read_seal(r, start.seal, f"event {start.id}")
        _fold_policies(conn, r, start.id)
        if expect_head is not None and expect_head[0] <= start.count:
            _compare_kept_head(conn, r, expect_head)
    prev = _walk(conn, v, r, key, expect_head, timezone, prev, sealed_from, after)
    _flush_references(conn, r)
    v.head_hash = prev
    if expect_head is not None and v.events < expect_head[0]:
        r.note("head", f"the ledger holds {v.events} events but the head you kept says {expect_head[0]}: "
                       "events were deleted from the end of the chain (or this is another ledger)")


def _walk(conn: Connection, v: Verdict, r: _Replay, key: bytes | None, expect_head: tuple[int, str] | None,
          timezone: str, prev: str | None, sealed_from: bool, after: int | None) -> str | None:
    """`_check_chain`'s walk of the events after `after` (all: None), the first chaining to `prev`: the hash of
    the last one read. Counts them in `v.events` as it goes (so far, when reading fails)."""
    expect_count, expect_hash = expect_head if expect_head is not None else (-1, "")
    touched = r.touched
    quota_kinds = ("reserve", "release")
    n = v.events
    try:
        for row in verify_store.chain(conn, after):
            n += 1
            event_id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, text, linked, digest, \
                sealed, _ = row
            if n == expect_count and digest != expect_hash:
                r.note("head", f"{_name(row)}: is event number {expect_count}, but its hash differs from the head you "
                               "kept: the chain was rewritten (re-hashed) up to there")
            if linked != prev:
                _broken(v, r, row, "its previous hash does not match the event before it (an event was removed or "
                                   "inserted)")
            elif digest != event_hash(prev, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, text,
                                      sealed):
                _broken(v, r, row, "its content does not match its hash (the event was rewritten)")
            prev = digest
            if sealed is None:
                if sealed_from:
                    r.note("seal", f"{_name(row)}: has no seal, though events before it do (written by something "
                                   "other than reclaim)")
            else:
                sealed_from = True
                _read_seal(r, sealed, row)
            counts = kind in quota_kinds and to_state == "reserving"
            if r.signed or counts or '"notified"' in text or HANDLED_TEXT in text or kind == "policy_set":
                detail = _detail(text)
                _check_author(r, row, detail)
                _read_references(r, event_id, row, detail)
                if len(r.expected) >= _REFERENCE_BATCH:
                    _flush_references(conn, r)
                if counts:
                    _count_quota(r, operation, at, sealed, timezone, detail)
                    if r.quota_from is None:
                        r.quota_from = float(at)
            if key is not None:
                _check_mac(v, r, key, row)
            if touched is not None:
                touched.add((job_id, operation))
    finally:
        v.events = n
    return prev


def _broken(v: Verdict, r: _Replay, row: Any, why: str) -> None:
    """A break of the chain at this event: the first is the verdict's, every later one is listed with the others."""
    if v.chain_break is None:
        v.chain_break = f"{_name(row)}: {why}"
    else:
        r.fail(f"{_name(row)}: {why}")


def _check_mac(v: Verdict, r: _Replay, key: bytes, row: Any) -> None:
    """The event's MAC under the audit key (a sealed event without one: only a triage account's kinds)."""
    hmac = Proof.parse(row[14]).hmac
    if hmac is not None:
        if not isinstance(row[12], str) or not mac_ok(key, row[12], hmac):
            r.note("mac", f"{_name(row)}: its MAC does not match (written or rewritten without the audit key, or this "
                          "key is not the ledger's)")
    elif row[13] is not None and row[6] not in UNKEYED_KINDS:
        r.note("mac", f"{_name(row)}: not authenticated (no MAC: written without the audit key, which every sending "
                      "and approving process holds)")
    elif row[13] is not None:
        v.unauthenticated += 1


def _fold_policies(conn: Connection, r: _Replay, through: int) -> None:
    """Fold the policy events up to event `through` (those --since does not walk), as the walk would have, so the
    events after it are checked under the policy in force."""
    for event_id, at, text, digest, mac in verify_store.policy_through(conn, through):
        if r.policies.add(event_id, text, digest or "", mac) is not None:
            continue  # an ignored one: a full verify listed it
        _apply_policy(r, at)


def _apply_policy(r: _Replay, at: float) -> None:
    """The policy folded so far is the one in force from the event at `at` on."""
    with contextlib.suppress(LedgerError, KeyError, TypeError, ValueError, AttributeError):  # unreadable: kept
        r.policy = policy_rules.apply_to(Config(), r.policies.held())
    r.signed = authors.required(r.policy)
    if r.signed_since is None and r.signed:
        r.signed_since = float(at)


def _compare_kept_head(conn: Connection, r: _Replay, expect_head: tuple[int, str]) -> None:
    """--expect-head naming an event at or before the one --since starts after: compared there."""
    found = verify_store.nth_event(conn, expect_head[0]) if expect_head[0] >= 1 else None
    if found is not None and found[1] != expect_head[1]:
        r.note("head", f"event {found[0]}: is event number {expect_head[0]}, but its hash differs from the head you "
                       "kept: the chain was rewritten (re-hashed) up to there")


def _detail(text: str) -> dict[str, Any]:
    """The event's detail as a dict ({} when it is not one)."""
    try:
        detail = json.loads(text)
    except ValueError:
        return {}
    return detail if isinstance(detail, dict) else {}


def _check_author(r: _Replay, row: Any, detail: dict[str, Any]) -> None:
    """A policy event against the owner's key (a valid one becomes the policy in force); any other event, under a
    policy that registers keys, against its writer's registered key and role (ledger.authors)."""
    if row[6] == "policy_set":
        why = r.policies.add(row[0], row[10], row[12], row[14])
        if why is not None:
            r.fail(f"{_name(row)}: {why}")
            return
        _apply_policy(r, row[1])
        return
    if not r.signed:
        return
    why = authors.refusal(r.policy, actor=row[5], kind=row[6], detail=detail, chain_hash=row[12], proof=row[14])
    if why is not None:
        r.fail(f"{_name(row)}: {why}")


def _read_references(r: _Replay, event_id: int, row: Any, detail: dict[str, Any]) -> None:
    """The rows beside the events that the event says it wrote and that must stay: the notifications it queued (its
    `notified` channels), the evidence a worker pass acted on (its `evidence_handled` row)."""
    channels = detail.get("notified")
    if isinstance(channels, list):
        r.expected.extend((_name(row), "notification", outbox_id(event_id, str(c))) for c in channels)
    handled = detail.get(evidence_store.HANDLED_KEY)
    if isinstance(handled, int) and not isinstance(handled, bool):
        r.expected.append((_name(row), "handled", handled))


_GONE = {"notification": "its notification {} is gone from the outbox (deleted: it will never be sent, and nobody is "
                         "told)",
         "handled": "the evidence_handled row of evidence {} it acted on is gone (deleted: the next pass would act on "
                    "that evidence again)"}


def _flush_references(conn: Connection, r: _Replay) -> None:
    """Look up the rows beside the events gathered so far, and list each event whose row is gone."""
    if not r.expected:
        return
    present: dict[str, set[Any]] = {
        "notification": verify_store.outbox_present(conn, [str(ref) for _, what, ref in r.expected
                                                           if what == "notification"]),
        "handled": verify_store.handled_present(conn, [int(ref) for _, what, ref in r.expected if what == "handled"]),
    }
    for name, what, ref in r.expected:
        if ref not in present[what]:
            r.fail(f"{name}: {_GONE[what].format(ref)}")
    r.expected.clear()


def _read_seal(r: _Replay, sealed: str, row: Any) -> None:
    """The side chains' heads an event's seal names (the newest seal's are what the side tables must still hold);
    `row` is the event's as the chain reads it (or a name for it)."""
    try:
        doc = json.loads(sealed)
        r.evidence_head, r.fenced_head = doc["evidence"], doc["fenced"]
    except (ValueError, KeyError, TypeError):
        r.note("seal", f"{row if isinstance(row, str) else _name(row)}: its seal cannot be read")


def _count_quota(r: _Replay, operation: str, at: float, sealed: str | None, timezone: str,
                 detail: dict[str, Any], into: dict[tuple[str, str], int] | None = None) -> None:
    """Add what a reserve or a release (one that counts: it leads to reserving) counted against its operation's
    daily quota, to `into` (default: r.quota); a sealed one marks its day as checked."""
    day = detail.get("quota_day")
    if not isinstance(day, str):
        day = day_of(float(at), timezone)
    counted = r.quota if into is None else into
    counted[(operation, day)] = counted.get((operation, day), 0) + 1
    if sealed is not None and into is None:
        r.quota_checked.add((operation, day))


_QUOTA_MARGIN = 3 * 86400.0
"""How long before the earliest reservation after the head --since recounts from when a day it counted on is not a
date: a quota day is the day of the event's own time in some time zone, so every event counted on a day lies within
about two days of any other."""
_ZONE_AHEAD = 15 * 3600.0
"""How far before a day's midnight UTC an event counted on that day may be: the furthest a time zone is ahead of
UTC (+14:00), and an hour more."""


def _recount_from(days: Iterable[tuple[str, str]], quota_from: float) -> float:
    """The earliest time an event counted on any of `days` ((operation, YYYY-MM-DD)) can have been recorded."""
    starts: list[float] = []
    for _, day in days:
        try:
            starts.append(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
        except ValueError:
            return quota_from - _QUOTA_MARGIN
    return min(starts, default=quota_from) - _ZONE_AHEAD


def _recount_quota(conn: Connection, r: _Replay, timezone: str) -> None:
    """--since: the days the events after the head counted on, recounted from every reservation and release of
    those days (before the head too), so `_check_tables` compares whole days; the table's other days are not."""
    if r.quota_from is None:
        r.quota_checked = set()
        return
    days = r.quota.keys()
    counted: dict[tuple[str, str], int] = {}
    for _, at, operation, _kind, to_state, text, sealed in verify_store.quota_events_from(
            conn, _recount_from(days, r.quota_from)):
        if to_state == "reserving":
            _count_quota(r, operation, at, sealed, timezone, _detail(text), into=counted)
    r.quota = {k: counted.get(k, 0) for k in days}
    r.quota_checked &= set(days)


JobRow = tuple[Any, ...]
"""A job as `verify_store.jobs_checked` reads it: (job_id, operation, state, epoch, attempt, *seal.ROW_COLUMNS)."""


def by_job(
    events: Iterable[verify_store.JobStep], jobs: Iterable[JobRow],
) -> Iterator[tuple[tuple[str, str], list[verify_store.JobStep], JobRow | None]]:
    """Merge the events, ordered by (job_id, operation) then seq, with the job rows ordered by (job_id, operation),
    both in Python's order of str (the store reads them so): each job key once, in that order, with its events
    (in their order; [] for a row without events) and its row (None for events without one). Holds one job's
    events at a time."""
    ev, jb = iter(events), iter(jobs)
    e, j = next(ev, None), next(jb, None)
    while e is not None or j is not None:
        if j is None or (e is not None and (e[1], e[2]) < (j[0], j[1])):
            key = (e[1], e[2])  # type: ignore[index]
        else:
            key = (j[0], j[1])
        group: list[verify_store.JobStep] = []
        while e is not None and e[1] == key[0] and e[2] == key[1]:
            group.append(e)
            e = next(ev, None)
        row = None
        if j is not None and j[0] == key[0] and j[1] == key[1]:
            row, j = j, next(jb, None)
        yield key, group, row


def _check_jobs(v: Verdict, r: _Replay, events: Iterable[verify_store.JobStep], jobs: Iterable[JobRow]) -> None:
    """Every job: its events through the event table against its row, and its row against its last seal."""
    n = 0
    for key, group, row in by_job(events, jobs):
        _check_job(v, r, key, group, row)
        n += row is not None
    v.jobs_checked = n


def _check_touched(conn: Connection, v: Verdict, r: _Replay) -> None:
    """--since: the jobs the events after the head touched, each with all its events, in key order."""
    for key in sorted(r.touched or ()):
        row = verify_store.job_checked(conn, *key)
        _check_job(v, r, key, verify_store.job_events_of(conn, *key), row)
        v.jobs_checked += row is not None


def _check_job(v: Verdict, r: _Replay, key: tuple[str, str], events: list[verify_store.JobStep],
               row: JobRow | None) -> None:
    """One job: each event's step through the event table (a step it does not allow is listed), the state, epoch
    and attempt they leave against the row's (the first job that differs is the verdict's `job_mismatch`), and the
    columns of the row its last readable seal names (the first job that differs is noted)."""
    cur: replay.Projection | None = None
    state, at_epoch, attempt = "", 0, 0  # cur's, while the fast path folds (cur is then rebuilt from them)
    for event_id, _, _, seq, kind, from_state, to_state, epoch, _ in events:
        if cur is not None:
            bumps = _plain_step(state, kind, from_state, to_state)
            if bumps is not None and (epoch is None or epoch == at_epoch + bumps[0]):
                # what replay.step gives for a step the table allows, without a Projection per event
                state = to_state if to_state is not None else state
                at_epoch = epoch if epoch is not None else at_epoch
                attempt += bumps[1]
                continue
            cur = replay.Projection(state, at_epoch, attempt)
        folded, why = replay.step(cur, kind, from_state, to_state, epoch)
        if why is not None:
            r.fail(replay.BadStep(event_id, JobKey(*key), seq, kind, cur.state if cur is not None else None,
                                  why).text())
        if folded is not None:
            cur = folded
            state, at_epoch, attempt = cur.state, cur.epoch, cur.attempt
    if cur is not None:
        cur = replay.Projection(state, at_epoch, attempt)
    table = replay.Projection(state=str(row[2]), epoch=int(row[3]), attempt=int(row[4])) if row is not None else None
    if cur != table and v.job_mismatch is None:
        v.job_mismatch = (f"job {key[0]} / {key[1]}: the table says {table} but its events say {cur} (a write "
                          "bypassed the state machine)")
    if row is None or "row" in r.problems:
        return
    want = _last_sealed_row(events)
    if want is None:
        return
    columns = dict(zip(seal.ROW_COLUMNS, row[5:], strict=True))
    columns["payload"] = json.loads(columns["payload"])
    columns["result"] = json.loads(columns["result"]) if columns["result"] is not None else None
    got = seal.row_digest(columns)
    changed = [c for c in seal.ROW_COLUMNS if c in want and got[c] != want[c]]
    if changed:
        r.note("row", f"job {key[0]} / {key[1]}: its {', '.join(changed)} differ from what its last event sealed (the "
                      "jobs table was edited)")


_PLAIN: dict[tuple[str, str, str | None, str | None], tuple[int, int]] = {}


def _plain_step(start: str, kind: str, from_state: str | None, to_state: str | None) -> tuple[int, int] | None:
    """(epoch bump, attempt bump) of an event of `kind` from a job in state `start` when the event table allows it
    as recorded (all but its epoch, which the caller compares); None when it does not (replay.step says why).
    Each allowed step is remembered: the event table allows few."""
    found = (start, kind, from_state, to_state)
    try:
        return _PLAIN[found]
    except KeyError:
        pass
    spec = event_table.kind(kind)
    ok = (spec is not None and start in spec.starts and (from_state is None or from_state == start)
          and to_state == spec.to_state(start))
    if not ok or spec is None:
        return None  # not remembered: a tampered ledger may hold any number of distinct wrong steps
    bumps = _PLAIN[found] = (int(spec.bumps_epoch), int(spec.bumps_attempt))
    return bumps


def _last_sealed_row(events: list[verify_store.JobStep]) -> dict[str, str] | None:
    """The row digest the job's last readable seal names (None: no event sealed its row)."""
    for event in reversed(events):
        if event[8] is None:
            continue
        try:
            row = json.loads(event[8])["row"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(row, dict):
            return row
    return None


def _check_tables(conn: Connection, r: _Replay) -> None:
    """The quota and state counts against the replay; the evidence and fenced-write chains against their
    anchors in the last seal; webhook deliveries against the evidence they brought."""
    table = {k: n for k, n in verify_store.quota_table(conn).items() if n}
    # Days a sealed event counted on (older ledgers' quota may predate their events' quota days), and any day
    # the table holds that no event counted on at all (with --since: only the days the events after it counted on,
    # recounted whole by `_recount_quota`).
    uncounted = table.keys() - r.quota.keys() if r.touched is None else set()
    diff = sorted(k for k in (r.quota_checked | uncounted) if table.get(k, 0) != r.quota.get(k, 0))
    if diff:
        op, day = diff[0]
        r.note("quota", f"quota_usage for {op} on {day} says {table.get((op, day), 0)} but the events counted "
                        f"{r.quota.get((op, day), 0)} (the quota table was edited)")
    if r.touched is None:  # recounts of whole tables: left to the full verify (--since says so)
        _check_counts(conn, r)
    _check_side_chain(conn, r, "evidence", r.evidence_head)
    _check_side_chain(conn, r, "fenced_writes", r.fenced_head)
    if r.signed_since is not None:
        for row in verify_store.deliveries_since(conn, r.signed_since):
            why = authors.sender_refusal(r.policy, row.digest, row.proof)
            if why is not None:
                r.fail(f"webhook delivery {row.webhook_id!r} (received at {row.received_at}): {why}; a row "
                       "inserted around reclaim makes a real delivery of that id look like a replay")
    missing = verify_store.webhook_without_delivery(conn)
    if missing is not None:
        r.note("webhook_deliveries", f"webhook_deliveries: no row for webhook {missing[1]!r}, which brought evidence "
                                     f"{missing[0]} (a delivery row was deleted: a replay would be accepted again)")


def _check_counts(conn: Connection, r: _Replay) -> None:
    """The counters the events' trigger keeps against a recount of the jobs and the events (whole-table scans)."""
    _check_counters(r, "job_counts", "jobs", {k: n for k, n in verify_store.job_counters(conn).items() if n},
                    verify_store.jobs_counted(conn))
    _check_counters(r, "event_tallies", "events", verify_store.event_tallies_kept(conn),
                    verify_store.event_tallies_counted(conn))


def _check_counters(r: _Replay, table: str, source: str, kept: dict[Any, Any], counted: dict[Any, Any]) -> None:
    """A counter table the events' trigger keeps against a recount of what it counts: the first key that differs."""
    if kept == counted:
        return
    key = sorted((k for k in kept.keys() | counted.keys() if kept.get(k) != counted.get(k)), key=str)[0]
    r.note(table, f"{table} says {kept.get(key, 'nothing')} for {' / '.join(str(k) for k in key)} but the {source} "
                  f"counted {counted.get(key, 'nothing')} (the counters were edited, or the {source} were edited "
                  "around reclaim)")


def _check_side_chain(conn: Connection, r: _Replay, table: str, anchor: str | None) -> None:
    """A side table's rows chain (rows from before the chain existed carry no hash and come first), and the
    head the last seal named is still there."""
    prev: str | None = None
    seen_anchor = anchor is None
    for row in verify_store.side_chain(conn, table):
        digest = row[-1]
        if digest is None:
            if prev is not None:
                r.note(table, f"{table} row {row[0]}: carries no hash after rows that do (added by hand)")
                return
            continue
        if row[-2] != prev:
            r.note(table, f"{table} row {row[0]}: does not chain to the row before it (a row was deleted or inserted)")
            return
        if digest != seal.side_hash(prev, list(row[1:-2])):
            r.note(table, f"{table} row {row[0]}: its content does not match its hash (the row was rewritten)")
            return
        prev = digest
        seen_anchor = seen_anchor or digest == anchor
    if not seen_anchor:
        r.note(table, f"{table}: the newest row the last event sealed is gone (rows were deleted from the end)")
