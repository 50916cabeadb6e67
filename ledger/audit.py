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
so a copy outside the ledger catches a deleted tail or a re-hashed chain."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from ledger import authors, replay, seal, store
from ledger import policy as policy_rules
from ledger.chain import event_hash
from ledger.clock import day_of
from ledger.config import Config
from ledger.errors import LedgerError
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
    allow, a signature, a notification or handled evidence gone) and every unsigned webhook delivery."""
    mac_checked: bool = False
    unauthenticated: int = 0
    """Triage events written without the key (allowed; see UNKEYED_KINDS)."""

    @property
    def ok(self) -> bool:
        """True when the chain holds, the jobs equal their replay, and nothing else is broken."""
        return self.chain_break is None and self.job_mismatch is None and not self.integrity and not self.problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"ok": self.ok, **self.__dict__}


@dataclass
class _Replay:
    """What the events say, gathered while the chain is walked."""

    rows: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    quota: dict[tuple[str, str], int] = field(default_factory=dict)
    quota_checked: set[tuple[str, str]] = field(default_factory=set)
    evidence_head: str | None = None
    fenced_head: str | None = None
    problems: dict[str, str] = field(default_factory=dict)  # first problem per category
    failing: list[str] = field(default_factory=list)
    """Every event whose signature does not hold, and every ignored policy event: one line each, all of them."""
    expected: list[tuple[str, str, str | int]] = field(default_factory=list)
    """(event name, "notification" or "handled", its id) of each row beside the events an event says it wrote."""
    policies: policy_rules.PolicyChain = field(default_factory=policy_rules.PolicyChain)
    policy: Config = field(default_factory=Config)
    """The policy in force at the event being read (the newest valid policy event before it)."""
    signed_since: float | None = None
    """When the first policy that requires signatures (ledger.authors) was recorded; None: none has."""

    def note(self, category: str, text: str) -> None:
        self.problems.setdefault(category, text)


def parse_head(text: str) -> tuple[int, str]:
    """`COUNT:HASH` (what `status` shows and notifications carry) as (count, hash); ValueError when malformed."""
    count, sep, digest = text.partition(":")
    if not sep or not count.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{text[:80]!r} is not COUNT:HASH (a number of events, a colon, a 64-hex head hash)")
    return int(count), digest


def verify(
    conn: Connection, *, key: bytes | None = None, expect_head: tuple[int, str] | None = None,
    timezone: str = "UTC",
) -> Verdict:
    """Check the chain (and, with `key`, every event's MAC), every event's step against the event table, the jobs
    against the replay of their events (state, epoch, attempt, and the sealed columns), the quota and state
    counts, the evidence, fenced-write and webhook tables, the triggers, the head against `expect_head` (count,
    hash), and the database's integrity; one snapshot.

    `timezone` is the quota's, for releases recorded before they named their quota day. Never raises for a
    damaged file: what cannot be read is reported in `integrity`, and the checks that can still run do.
    """
    v = Verdict(mac_checked=key is not None)
    r = _Replay()
    with contextlib.nullcontext() if conn.in_transaction else verify_store.snapshot(conn):
        try:
            v.integrity = store.integrity_problems(conn)
        except LedgerError as e:
            v.integrity = [f"SQLite's integrity check could not run: {e}"]
        try:
            _check_chain(conn, v, r, key, expect_head, timezone)
        except (LedgerError, ValueError, TypeError) as e:
            v.integrity.append(f"the events cannot be read: {e}")
        try:
            v.jobs = verify_store.job_count(conn)
            steps: list[replay.BadStep] = []
            bad = replay.mismatches(conn, steps)
            r.failing.extend(step.text() for step in steps)
            _check_rows(conn, r)
            _check_tables(conn, r)
        except (LedgerError, ValueError, TypeError) as e:
            v.integrity.append(f"the jobs cannot be read: {e}")
            bad = []
        if bad:
            m = bad[0]
            v.job_mismatch = (f"job {m.key.job_id} / {m.key.operation}: the table says {m.from_table} but its events "
                              f"say {m.from_events} (a write bypassed the state machine)")
        try:
            missing = store.missing_triggers(conn)
        except LedgerError as e:
            missing = [f"(cannot be listed: {e})"]
        if missing:
            r.note("triggers", f"triggers missing or disabled: {', '.join(missing)} (someone with write access to "
                               "the database dropped them; what they guard may have been edited)")
        v.problems = list(r.problems.values()) + r.failing
    return v


def record_pass(conn: Connection, verdict: Verdict, *, scope: str, actor: str, at: float) -> None:
    """Record a verify of `scope` that found nothing wrong (`verify_passes`), in its own write transaction. Raises
    ValueError for a verdict that is not ok, and the ledger's own errors when it cannot be written."""
    if not verdict.ok:
        raise ValueError("only a verify that found nothing wrong is recorded as a pass")
    from ledger.db import write_tx

    with write_tx(conn, rows_only=True):
        verify_store.record_pass(conn, verify_store.VerifyPass(scope, at, verdict.events, verdict.head_hash, actor))


def _check_chain(
    conn: Connection, v: Verdict, r: _Replay, key: bytes | None, expect_head: tuple[int, str] | None,
    timezone: str,
) -> None:
    """Recompute the hash chain in id order, and the MACs with `key`; record the first break, the head hash,
    and what the events say about rows and quota, in `v` and `r`."""
    prev: str | None = None
    sealed_from: int | None = None  # the first event with a seal: every later one must have one
    for row in verify_store.chain(conn):
        v.events += 1
        event_id, job_id, operation, kind, actor, sealed, mac = row[0], row[2], row[3], row[6], row[5], row[13], row[14]
        name = f"event {event_id} ({job_id} / {operation} seq {row[4]}, {kind} by {actor})"
        if expect_head is not None and v.events == expect_head[0] and row[12] != expect_head[1]:
            r.note("head", f"{name}: is event number {expect_head[0]}, but its hash differs from the head you kept: "
                           "the chain was rewritten (re-hashed) up to there")
        broken = None
        if row[11] != prev:
            broken = f"{name}: its previous hash does not match the event before it (an event was removed or inserted)"
        elif row[12] != event_hash(prev, row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
                                   row[10], sealed):
            broken = f"{name}: its content does not match its hash (the event was rewritten)"
        if broken is not None:  # the first break is the verdict's; every later one is listed with the others
            if v.chain_break is None:
                v.chain_break = broken
            else:
                r.failing.append(broken)
        prev = row[12]
        if sealed is None:
            if sealed_from is not None:
                r.note("seal", f"{name}: has no seal, though events before it do (written by something other than reclaim)")
        else:
            if sealed_from is None:
                sealed_from = event_id
            _read_seal(r, (job_id, operation), sealed, name)
        detail = _detail(row) if _needs_detail(r, row) else {}
        _check_author(r, row, name, detail)
        _read_references(r, event_id, name, detail)
        hmac = Proof.parse(mac).hmac
        if key is not None:
            if hmac is not None:
                if not isinstance(row[12], str) or not mac_ok(key, row[12], hmac):
                    r.note("mac", f"{name}: its MAC does not match (written or rewritten without the audit key, "
                                  "or this key is not the ledger's)")
            elif sealed is not None and kind not in UNKEYED_KINDS:
                r.note("mac", f"{name}: not authenticated (no MAC: written without the audit key, which every "
                              "sending and approving process holds)")
            elif sealed is not None:
                v.unauthenticated += 1
        _count_quota(r, row, timezone, detail)
    v.head_hash = prev
    if expect_head is not None and v.events < expect_head[0]:
        r.note("head", f"the ledger holds {v.events} events but the head you kept says {expect_head[0]}: "
                       "events were deleted from the end of the chain (or this is another ledger)")


def _counts_quota(row: Any) -> bool:
    return row[6] in ("reserve", "release") and row[8] == "reserving"


def _needs_detail(r: _Replay, row: Any) -> bool:
    """Whether a check reads this event's detail: its signature's (a person's event names how they were identified),
    the quota's, or the rows it names beside the events (read only when its text names them)."""
    text = row[10]
    return (authors.required(r.policy) or _counts_quota(row) or '"notified"' in text
            or HANDLED_TEXT in text)


def _detail(row: Any) -> dict[str, Any]:
    """The event's detail as a dict ({} when it is not one)."""
    try:
        detail = json.loads(row[10])
    except ValueError:
        return {}
    return detail if isinstance(detail, dict) else {}


def _check_author(r: _Replay, row: Any, name: str, detail: dict[str, Any]) -> None:
    """A policy event against the owner's key (a valid one becomes the policy in force); any other event, under a
    policy that registers keys, against its writer's registered key and role (ledger.authors)."""
    if row[6] == "policy_set":
        why = r.policies.add(row[0], row[10], row[12], row[14])
        if why is not None:
            r.failing.append(f"{name}: {why}")
            return
        with contextlib.suppress(LedgerError, KeyError, TypeError, ValueError, AttributeError):  # unreadable: kept
            r.policy = policy_rules.apply_to(Config(), r.policies.held())
        if r.signed_since is None and authors.required(r.policy):
            r.signed_since = float(row[1])
        return
    if not authors.required(r.policy):
        return
    why = authors.refusal(r.policy, actor=row[5], kind=row[6], detail=detail, chain_hash=row[12], proof=row[14])
    if why is not None:
        r.failing.append(f"{name}: {why}")


def _read_references(r: _Replay, event_id: int, name: str, detail: dict[str, Any]) -> None:
    """The rows beside the events that the event says it wrote and that must stay: the notifications it queued (its
    `notified` channels), the evidence a worker pass acted on (its `evidence_handled` row)."""
    channels = detail.get("notified")
    if isinstance(channels, list):
        r.expected.extend((name, "notification", outbox_id(event_id, str(c))) for c in channels)
    handled = detail.get(evidence_store.HANDLED_KEY)
    if isinstance(handled, int) and not isinstance(handled, bool):
        r.expected.append((name, "handled", handled))


def _read_seal(r: _Replay, job: tuple[str, str], sealed: str, name: str) -> None:
    try:
        doc = json.loads(sealed)
        row, r.evidence_head, r.fenced_head = doc["row"], doc["evidence"], doc["fenced"]
    except (ValueError, KeyError, TypeError):
        r.note("seal", f"{name}: its seal cannot be read")
        return
    if isinstance(row, dict):
        r.rows[job] = row


def _count_quota(r: _Replay, row: Any, timezone: str, detail: dict[str, Any]) -> None:
    """Add what a reserve or a release counted against its operation's daily quota."""
    if not _counts_quota(row):
        return
    day = detail.get("quota_day")
    if not isinstance(day, str):
        day = day_of(float(row[1]), timezone)
    r.quota[(row[3], day)] = r.quota.get((row[3], day), 0) + 1
    if row[13] is not None:
        r.quota_checked.add((row[3], day))


def _check_rows(conn: Connection, r: _Replay) -> None:
    """Each job's columns that matter against what its last sealed event says they were: the columns that seal
    names (one written before a column was sealed does not name it, and that column is not compared)."""
    for row in verify_store.sealed_columns(conn):
        want = r.rows.get((row[0], row[1]))
        if want is None:
            continue
        columns = dict(zip(seal.ROW_COLUMNS, row[2:], strict=True))
        columns["payload"] = json.loads(columns["payload"])
        columns["result"] = json.loads(columns["result"]) if columns["result"] is not None else None
        got = seal.row_digest(columns)
        changed = [c for c in seal.ROW_COLUMNS if c in want and got[c] != want[c]]
        if changed:
            r.note("row", f"job {row[0]} / {row[1]}: its {', '.join(changed)} differ from what its last event "
                          "sealed (the jobs table was edited)")
            return


def _check_tables(conn: Connection, r: _Replay) -> None:
    """The quota and state counts against the replay; the evidence and fenced-write chains against their
    anchors in the last seal; webhook deliveries against the evidence they brought."""
    table = {k: n for k, n in verify_store.quota_table(conn).items() if n}
    # Days a sealed event counted on (older ledgers' quota may predate their events' quota days), and any day
    # the table holds that no event counted on at all.
    diff = sorted(k for k in (r.quota_checked | (table.keys() - r.quota.keys()))
                  if table.get(k, 0) != r.quota.get(k, 0))
    if diff:
        op, day = diff[0]
        r.note("quota", f"quota_usage for {op} on {day} says {table.get((op, day), 0)} but the events counted "
                        f"{r.quota.get((op, day), 0)} (the quota table was edited)")
    _check_counters(r, "job_counts", "jobs", {k: n for k, n in verify_store.job_counters(conn).items() if n},
                    verify_store.jobs_counted(conn))
    _check_counters(r, "event_tallies", "events", verify_store.event_tallies_kept(conn),
                    verify_store.event_tallies_counted(conn))
    _check_side_chain(conn, r, "evidence", r.evidence_head)
    _check_side_chain(conn, r, "fenced_writes", r.fenced_head)
    if r.expected:
        present: dict[str, set[Any]] = {"notification": verify_store.outbox_ids(conn),
                                         "handled": evidence_store.handled_ids(conn)}
        gone = {"notification": "its notification {} is gone from the outbox (deleted: it will never be sent, and "
                                "nobody is told)",
                "handled": "the evidence_handled row of evidence {} it acted on is gone (deleted: the next pass "
                           "would act on that evidence again)"}
        for name, what, ref in r.expected:
            if ref not in present[what]:
                r.failing.append(f"{name}: {gone[what].format(ref)}")
    if r.signed_since is not None:
        for row in verify_store.deliveries_since(conn, r.signed_since):
            why = authors.sender_refusal(r.policy, row.digest, row.proof)
            if why is not None:
                r.failing.append(f"webhook delivery {row.webhook_id!r} (received at {row.received_at}): {why}; a row "
                                 "inserted around reclaim makes a real delivery of that id look like a replay")
    missing = verify_store.webhook_without_delivery(conn)
    if missing is not None:
        r.note("webhook_deliveries", f"webhook_deliveries: no row for webhook {missing[1]!r}, which brought evidence "
                                     f"{missing[0]} (a delivery row was deleted: a replay would be accepted again)")


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
