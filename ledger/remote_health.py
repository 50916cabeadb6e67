"""Remote health: a remote that refuses every job is paused, so nothing more is sent to it.

Some answers say the remote is unusable for every job, not just this one: a bad API key, a permission
or billing problem, an unsupported region, an unknown model. Nothing was accepted, so the job stays
`reserving`; the remote is paused. While paused, workers send nothing to it except one probe (one due
job) every `policy.remote_probe_seconds`; a probe the remote does not refuse lifts the pause, and so
does an operator's `reclaim resume REMOTE`. The pause is recorded on the job that met it, notified
once, and shown by `status` and the console header.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.config import Config
from ledger.errors import BadInput, Refused
from ledger.model import JobKey
from ledger.store import Connection
from ledger.transitions import apply


@dataclass(frozen=True)
class RemotePause:
    """One paused remote: since when, why, the job that met it, and when it is probed next."""

    remote: str
    paused_at: float
    reason: str
    error: str | None
    job: JobKey
    probe_at: float
    refusals: int


def paused_remotes(conn: Connection) -> dict[str, RemotePause]:
    """Every paused remote by name."""
    rows = conn.execute("SELECT * FROM remote_pauses ORDER BY paused_at, remote").fetchall()
    return {
        r["remote"]: RemotePause(
            remote=r["remote"], paused_at=r["paused_at"], reason=r["reason"], error=r["error"],
            job=JobKey(r["job_id"], r["operation"]), probe_at=r["probe_at"], refusals=r["refusals"],
        )
        for r in rows
    }


def record_refusal(
    conn: Connection, config: Config, remote: str, key: JobKey, *, reason: str, error: str | None, now: float
) -> bool:
    """Pause `remote` (or extend its pause to the next probe), inside the caller's transaction.

    Returns True when this refusal paused a remote that was running: the caller records the
    `remote_paused` event, which is the one notified; later refusals only move the next probe.
    """
    probe_at = now + config.policy.remote_probe_seconds
    row = conn.execute(
        "INSERT INTO remote_pauses (remote, paused_at, reason, error, job_id, operation, probe_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (remote) DO UPDATE SET probe_at = excluded.probe_at, "
        "refusals = remote_pauses.refusals + 1, error = excluded.error RETURNING refusals",
        (remote, now, reason, error, key.job_id, key.operation, probe_at),
    ).fetchone()
    return bool(row[0] == 1)


def lift(conn: Connection, config: Config, remote: str, *, actor: str, now: float, why: str) -> bool:
    """Lift `remote`'s pause inside the caller's transaction; an event on the job that met it records
    who and why. Returns False when the remote was not paused."""
    row = conn.execute("DELETE FROM remote_pauses WHERE remote = ? RETURNING *", (remote,)).fetchone()
    if row is None:
        return False
    key = JobKey(row["job_id"], row["operation"])
    state = conn.execute(
        "SELECT state FROM jobs WHERE job_id = ? AND operation = ?", (key.job_id, key.operation)
    ).fetchone()
    if state is not None:
        apply(
            conn, key, "remote_resumed", actor=actor, now=now, expected_state=state[0],
            detail={"remote": remote, "why": why, "paused_at": row["paused_at"], "reason": row["reason"],
                    "refusals": row["refusals"]},
        )
    return True


def resume(conn: Connection, config: Config, remote: str, *, actor: str, reason: str, now: float) -> None:
    """An operator's `reclaim resume REMOTE`: lift the pause (approver role, a reason required).

    Raises BadInput for an unknown remote or an empty reason, Refused for a missing role or a remote
    that is not paused; nothing is written then.
    """
    from ledger.db import write_tx

    if remote not in config.remotes:
        known = ", ".join(sorted(config.remotes)) or "none"
        raise BadInput(f"remote {remote!r}: not declared in the config (declared: {known})")
    if not reason.strip():
        raise BadInput("reason: required; say why the remote can be used again (e.g. 'key rotated')")
    if "approver" not in config.roles_of(actor):
        raise Refused(f"resume {remote}: {actor} lacks the approver role")
    with write_tx(conn):
        if not lift(conn, config, remote, actor=actor, now=now, why=f"resumed by {actor}: {reason}"):
            raise Refused(f"resume {remote}: the remote is not paused")
