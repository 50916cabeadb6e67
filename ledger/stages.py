"""Who a held (or failed) job is waiting for: its stage, in words, for the job list and the `stage:` filter.

needs a finding: nobody has recorded what they found in the current attempt. awaiting approval: a finding is
recorded and an approver decides. assigned to X, due ...: someone owns it and no finding is recorded yet.
"awaiting my approval" is awaiting approval for an approver, leaving out (under four-eyes) the jobs they queried or
wrote a finding for, which another approver must release.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.config import Config
from ledger.model import STAGES as STAGES  # the values `stage:` takes, kept with the stages they name
from ledger.model import Job
from ledger.store import Connection
from ledger.store import stages as q

TRIAGED_STATES = ("held", "failed")


@dataclass(frozen=True)
class Stage:
    """One job's stage: its key (a `stage:` value) and the words the job list shows."""

    key: str
    words: str


def job_stage(conn: Connection, job: Job, due_words: str = "") -> Stage | None:
    """The stage of a held or failed job (None for any other state). `due_words` is the due time as the caller
    shows it (absolute), appended to 'assigned to X'."""
    if job.state not in TRIAGED_STATES:
        return None
    looks = q.attempt_looks(conn, job.key)
    findings = [actor for kind, actor, _ in looks if kind == "finding"]
    if findings:
        return Stage("awaiting-approval", f"awaiting approval (finding by {findings[-1]})")
    if job.owner:
        return Stage("assigned", f"assigned to {job.owner}" + (f", due {due_words}" if due_words else ""))
    return Stage("needs-finding", "needs a finding")


def awaiting_count(conn: Connection, config: Config, me: str) -> int | None:
    """How many held jobs await `me`'s approval (None when `me` is not an approver)."""
    if "approver" not in config.roles_of(me):
        return None
    return q.count_awaiting(conn, me if config.policy.four_eyes else None)
