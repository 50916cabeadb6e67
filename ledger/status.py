"""The status document: the ledger's health at a glance, read in one place for `reclaim status` (its text and
its `--json`) and anything else that reports it.

Its live part, `LiveFigures` (jobs per state, today's quota, paused remotes, the workers' board, fenced writes,
duplicate sends, webhook refusals, foreign deliveries), is read by `read_live_figures` alone too: `reclaim metrics`
and the console's live header show the same figures from the same reads.

Jobs per state and per operation, today's quota, the audit head, when `verify` last passed,
whether workers are passing, paused remotes, fenced writes, duplicate sends, webhook refusals, foreign
deliveries, the outcome journal, whether the ledger holds its policy, and who is asking. Only reads; nothing
is written and no remote is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import authors, heartbeat, journal, opening, policy, queries, store
from ledger.clock import iso
from ledger.config import Config
from ledger.heartbeat import Liveness, WorkerBoard
from ledger.identity import Identity
from ledger.model import GROUPS
from ledger.queries import QuotaDay
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.store import remote_pauses as pauses_store
from ledger.store import verify as verify_store
from ledger.store.evidence import ForeignTally
from ledger.store.remote_pauses import RemotePause
from ledger.store.verify import VerifyPass

NO_POLICY_WARNING = (
    "this ledger holds no policy: identity, roles and four-eyes come from the config each caller passes, which any "
    "caller can write. The ledger's owner must run 'reclaim policy set --from-config' (or 'reclaim init') with the "
    "shared config"
)

UNSIGNED_WARNING = (
    "decisions on this ledger are not signed: its policy registers no [public_keys] (or takes declared names), so "
    "the worker sends what any account that can write the ledger records. Each operator runs 'reclaim keys new'; "
    "the owner registers the keys and runs 'reclaim policy set --from-config' (docs/audit.md)"
)


@dataclass(frozen=True)
class JournalRecord:
    """A send outcome waiting in the outcome journal, and why it waits."""

    job_id: str
    operation: str
    epoch: int
    kind: str
    handle: str | None
    at: float
    waits_because: str


@dataclass(frozen=True)
class JournalReport:
    """The outcome journal on this host: where, its size, whether its space is allocated, what waits in it."""

    path: Path
    size: int | None
    """Its size in bytes; None when the file is missing."""
    preallocated: bool
    records: tuple[JournalRecord, ...]


@dataclass(frozen=True)
class LiveFigures:
    """The ledger's live figures at one read (every one an index lookup or a small table): what `reclaim status`,
    `reclaim metrics` and the console's header all show."""

    now: float
    states: dict[str, int]
    """Jobs per state (every state, zero when none)."""
    quota_today: tuple[QuotaDay, ...]
    """Today's use of each declared operation's quota (the config's time zone)."""
    paused_remotes: dict[str, RemotePause]
    board: WorkerBoard
    fenced_writes: int
    duplicate_sends: int
    webhook_counters: dict[str, int]
    """Refused webhook deliveries by reason."""
    foreign: ForeignTally

    def groups(self) -> dict[str, int]:
        """Jobs per console group (`ledger.model.GROUPS`)."""
        return {g: sum(self.states.get(s, 0) for s in states) for g, states in GROUPS.items()}


def read_live_figures(conn: Connection, config: Config, now: float) -> LiveFigures:
    """The live figures at `now`. Only reads; raises the ledger's own errors when it cannot read. Read inside one
    snapshot (`store.read_snapshot`) when the figures must agree with each other."""
    return LiveFigures(
        now=now, states=jobs_store.state_counts(conn), quota_today=tuple(queries.quota_today(conn, config, now)),
        paused_remotes=pauses_store.paused_remotes(conn), board=heartbeat.read_board(conn),
        fenced_writes=jobs_store.fenced_write_count(conn), duplicate_sends=events_store.duplicate_count(conn),
        webhook_counters=evidence_store.refusal_counts(conn), foreign=evidence_store.foreign_tally(conn),
    )


@dataclass(frozen=True)
class Status:
    """What `reclaim status` reports (see the module's docstring); `to_dict()` is its `--json` document."""

    identity: Identity
    roles: tuple[str, ...]
    states: dict[str, int]
    operations: dict[str, dict[str, int]]
    """Jobs per state of each operation."""
    quota_today: tuple[QuotaDay, ...]
    fenced_writes: int
    duplicate_sends: int
    webhook_counters: dict[str, int]
    foreign: ForeignTally
    foreign_retention_days: float
    audit_events: int
    audit_head: str | None
    verified: dict[str, VerifyPass]
    """The newest `verify` that passed, by scope ("full": every event and page; "since": what was appended after an
    earlier head); none when it never passed. Opening checks only the header, schema and newest event."""
    now: float
    board: WorkerBoard
    live: Liveness
    paused_remotes: dict[str, RemotePause]
    policy_held: bool
    policy_event_id: int | None
    warnings: tuple[str, ...]
    journal: JournalReport

    def to_dict(self) -> dict[str, Any]:
        """The `reclaim status --json` document."""
        live, silence = self.live, self.live.silence_seconds
        return {
            "paused_remotes": {
                name: {"since": iso(p.paused_at), "reason": p.reason, "error": p.error, "refusals": p.refusals,
                       "next_probe": iso(p.probe_at), "job_id": p.job.job_id, "operation": p.job.operation}
                for name, p in self.paused_remotes.items()
            },
            "states": self.states,
            "operations": {
                q.operation: {"states": self.operations.get(q.operation, {}),
                              "quota_today": {"used": q.used, "limit": q.limit}}
                for q in self.quota_today
            },
            "fenced_writes": self.fenced_writes,
            "duplicate_sends": self.duplicate_sends,
            "audit": {"events": self.audit_events, "head_hash": self.audit_head},
            "webhook_counters": self.webhook_counters,
            "foreign_deliveries": {**self.foreign.to_dict(),
                                   "last_seen": iso(self.foreign.last_seen) if self.foreign.last_seen is not None
                                   else None,
                                   "retention_days": self.foreign_retention_days},
            "workers": {
                "summary": live.summary(), "silent": live.silent, "running": live.workers,
                "unresponsive": live.unresponsive, "last_pass_at": iso(live.last_pass_at) if live.last_pass_at else None,
                "last_pass_age_seconds": live.age, "silence_seconds": silence,
                "recent": [h.to_dict(self.now, silence) for h in self.board.recent],
            },
            "identity": {"operator": self.identity.name, "source": self.identity.source,
                         "verified": self.identity.verified, "roles": list(self.roles)},
            "verified": {scope: {"at": iso(p.at), "events": p.events, "head": p.head, "by": p.actor}
                         for scope, p in self.verified.items()},
            "policy": {"held_by_ledger": self.policy_held, "event_id": self.policy_event_id},
            "warnings": list(self.warnings),
            "journal": {
                "path": str(self.journal.path), "bytes": self.journal.size, "preallocated": self.journal.preallocated,
                "preallocate_bytes": journal.JOURNAL_BYTES,
                "records": [
                    {"job_id": r.job_id, "operation": r.operation, "epoch": r.epoch, "kind": r.kind,
                     "handle": r.handle, "at": iso(r.at), "waits_because": r.waits_because}
                    for r in self.journal.records
                ],
            },
        }


def read_status(conn: Connection, config: Config, *, ledger: str | Path, identity: Identity, now: float) -> Status:
    """Read the status of the ledger `ledger` open on `conn`, as `identity` sees it at `now`.

    Runs the checks of opening first (`ledger.opening`: header, schema, the newest event; the full check is
    `verify`, whose last pass is reported). Raises LedgerCorrupt when damage is found, and the ledger's other
    errors when it cannot be read. Only reads.
    """
    opening.check(conn)
    held_policy = policy.read(conn)
    warnings = store.loose_permissions(ledger)
    if held_policy.settings is None:
        warnings.insert(0, NO_POLICY_WARNING)
    elif not authors.required(config):
        warnings.insert(0, UNSIGNED_WARNING)
    for event_id, why in held_policy.ignored:
        warnings.insert(0, f"policy event {event_id} is ignored: {why}; run 'reclaim verify', and the ledger's "
                           "owner 'reclaim policy set --from-config'")
    events, head = events_store.head(conn)
    f = read_live_figures(conn, config, now)
    return Status(
        identity=identity, roles=tuple(sorted(config.roles_of(identity.name))),
        states=f.states, operations=jobs_store.operation_counts(conn), quota_today=f.quota_today,
        fenced_writes=f.fenced_writes, duplicate_sends=f.duplicate_sends, webhook_counters=f.webhook_counters,
        foreign=f.foreign, foreign_retention_days=config.policy.foreign_retention_days,
        audit_events=events, audit_head=head, verified=verify_store.last_passes(conn), now=now,
        board=f.board, live=f.board.liveness(now, config.policy.worker_silence_seconds),
        paused_remotes=f.paused_remotes,
        policy_held=held_policy.settings is not None, policy_event_id=held_policy.event_id,
        warnings=tuple(warnings), journal=_journal(conn, config),
    )


def _journal(conn: Connection, config: Config) -> JournalReport:
    """The outcome journal's state, with why each waiting record waits (the next pass records it, or it cannot be
    yet)."""
    st = journal.state(journal.of(conn))
    return JournalReport(
        path=st.path, size=st.size, preallocated=st.ready,
        records=tuple(
            JournalRecord(r.job_id, r.operation, r.epoch, r.kind, r.handle, r.at,
                          journal.kept_reason(conn, config, r) or "the next worker pass records it")
            for r in st.records
        ),
    )
