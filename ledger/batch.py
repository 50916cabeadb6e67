"""Decisions on many held jobs at once: one selection, one input, one reviewed plan, then each job its own action.

A storm of one cause (a remote's 503s, one operation, one time window) becomes many holds; deciding them one by one
costs a person minutes each. Here a selection (the held jobs a typed filter matches, or the keys a person marked)
gets one finding, or one release, reject or remediate:

- `plan` says, for every selected job, whether this operator may take the action now and, if not, why: the same
  `triage.refusal` one job gets (role, state, policy, evidence, four-eyes, a request that could still arrive). A
  release also counts what the batch costs each operation's quota today, in the order the jobs are listed: a release
  beyond what is left is refused in the plan. Writes nothing.
- `apply` takes the action on exactly the jobs the plan allowed, each in its own transaction through `triage.take`
  (so each gets its own event, by this operator, with the one reason). A job that changed since the plan meets the
  same checks and is refused, and said; the others go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger import triage
from ledger.clock import Clock, day_of
from ledger.config import Config
from ledger.errors import BadInput, JobNotFound, Refused
from ledger.model import Job, JobFilter, JobKey
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.store import quota as quota_store
from ledger.transitions import Applied

BATCH_ACTIONS = ("finding", "release", "reject", "remediate")
"""What a batch can do: record one finding for all, or decide them. A query asks each remote (one by one, in triage);
a reconcile needs each job's own handle; an assign has its own bulk command (`bulk-assign`)."""
MAX_BATCH = 1000
"""The most jobs one batch takes: a selection larger than this is refused, asking for a narrower filter."""


@dataclass(frozen=True)
class BatchItem:
    """One selected job, and why the action may not be taken on it now (None: it may)."""

    job: Job
    refusal: str | None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True)
class QuotaCost:
    """What a batch of releases costs one operation's quota today: used now, after the allowed releases, the limit."""

    operation: str
    used: int
    after: int
    limit: int


@dataclass(frozen=True)
class BatchPlan:
    """What a batch would do: every selected job with its verdict, and (a release) the quota each operation pays."""

    action: str
    items: list[BatchItem]
    quota: list[QuotaCost] = field(default_factory=list)

    @property
    def allowed(self) -> list[BatchItem]:
        return [i for i in self.items if i.allowed]

    @property
    def refused(self) -> list[BatchItem]:
        return [i for i in self.items if not i.allowed]


@dataclass(frozen=True)
class BatchResult:
    """What `apply` did: the jobs acted on (with the event each got) and those refused when their turn came."""

    action: str
    done: list[tuple[JobKey, int]]
    refused: list[tuple[JobKey, str]]


def check_action(action: str) -> str:
    """Return `action` when a batch can take it; else raise BadInput naming the batch actions."""
    if action not in BATCH_ACTIONS:
        raise BadInput(f"batch action {action!r}: not one a batch takes; the batch actions are "
                       f"{', '.join(BATCH_ACTIONS)} (a reconcile needs each job's own handle: one job at a time)")
    return action


def select(conn: Connection, flt: JobFilter | None, keys: Sequence[JobKey] = ()) -> list[Job]:
    """The jobs a batch acts on: the keys given (a person's marks, in their order; a key the ledger lacks is refused,
    JobNotFound), else every held job `flt` matches, oldest first. More than MAX_BATCH is refused (BadInput)."""
    if keys:
        jobs = [triage.get_job(conn, k) for k in dict.fromkeys(keys)]
    else:
        jobs = jobs_store.list_jobs(conn, "held", limit=MAX_BATCH + 1, flt=flt)
    if len(jobs) > MAX_BATCH:
        raise BadInput(f"the selection holds more than {MAX_BATCH} jobs; narrow the filter (e.g. op:, reason:, "
                       "since:) and take it in parts")
    return jobs


def plan(
    conn: Connection, config: Config, action: str, jobs: Sequence[Job], given: Mapping[str, Any], *, actor: str,
    clock: Clock,
) -> BatchPlan:
    """Each job's verdict for `action` with input `given` by `actor` now, and a release's quota cost per operation.

    The input is checked first (BadInput naming the field, as one job's action would). Writes nothing."""
    check_action(action)
    triage.check_input(action, given)
    now = clock.now()
    day = day_of(now, config.timezone)
    spent: dict[str, int] = {}
    used: dict[str, int] = {}
    items: list[BatchItem] = []
    for job in jobs:
        why = triage.refusal(conn, config, job, action, actor, now)
        op = config.operations.get(job.operation)
        if why is None and action == "release" and op is not None:
            if job.operation not in used:
                used[job.operation] = quota_store.used(conn, job.operation, day)
            taken = used[job.operation] + spent.get(job.operation, 0)
            if taken >= op.daily_quota:
                why = (f"{job.operation} quota today would be used up by the releases listed before it "
                       f"({taken}/{op.daily_quota}); release it tomorrow or raise daily_quota")
            else:
                spent[job.operation] = spent.get(job.operation, 0) + 1
        items.append(BatchItem(job, why))
    quota = [QuotaCost(name, n, n + spent.get(name, 0), config.operations[name].daily_quota)
             for name, n in sorted(used.items())]
    return BatchPlan(action, items, quota)


def apply(
    conn: Connection, config: Config, action: str, planned: BatchPlan, given: Mapping[str, Any], *, actor: str,
    clock: Clock,
) -> BatchResult:
    """Take `action` on the jobs `planned` allowed, each in its own transaction (`triage.take`: its own event, the
    same checks); a job refused now (it changed since the plan) is listed with the reason, and the rest go on.

    Raises BadInput when the plan is another action's, or the input is refused."""
    if planned.action != check_action(action):
        raise BadInput(f"batch: the plan is for {planned.action}, not {action}; plan again")
    triage.check_input(action, given)
    done: list[tuple[JobKey, int]] = []
    refused: list[tuple[JobKey, str]] = []
    for item in planned.allowed:
        key = item.job.key
        try:
            applied = triage.take(conn, config, key, action, given, actor=actor, clock=clock)
        except (Refused, JobNotFound) as e:
            refused.append((key, _own_words(str(e), key)))
            continue
        assert isinstance(applied, Applied)  # a batch never queries
        done.append((key, int(applied.event_id or 0)))
    return BatchResult(action, done, refused)


def _own_words(message: str, key: JobKey) -> str:
    """A refusal without its 'ACTION refused for JOB / OP: ' lead (the batch lists the job beside it)."""
    lead = f" refused for {key.job_id} / {key.operation}: "
    at = message.find(lead)
    return message[at + len(lead):] if at >= 0 else message
