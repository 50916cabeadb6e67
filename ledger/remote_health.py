"""Remote health: a remote that refuses every job is paused, so nothing more is sent to it.

Some answers say the remote is unusable for every job, not just this one: a bad API key, a permission
or billing problem, an unsupported region, an unknown model. Nothing was accepted, so the job stays
`reserving`; the remote is paused. While paused, workers send nothing to it except one probe (one due
job) every `policy.remote_probe_seconds`; a probe the remote does not refuse lifts the pause, and so
does an operator's `reclaim resume REMOTE`. The pause is recorded on the job that met it, notified
once, and shown by `status` and the console header.

This module keeps the decisions; the pauses are read and written by `ledger.store.remote_pauses`.
"""

from __future__ import annotations

from ledger.config import Config
from ledger.errors import BadInput, Refused
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.store import remote_pauses as pauses_store
from ledger.transitions import apply


def record_refusal(
    conn: Connection, config: Config, remote: str, key: JobKey, *, reason: str, error: str | None, now: float
) -> bool:
    """Pause `remote` (or extend its pause to the next probe), inside the caller's transaction.

    Returns True when this refusal paused a remote that was running: the caller records the
    `remote_paused` event, which is the one notified; later refusals only move the next probe.
    """
    refusals = pauses_store.pause(conn, remote, key, reason=reason, error=error, now=now,
                                  probe_at=now + config.policy.remote_probe_seconds)
    return refusals == 1


def lift(conn: Connection, config: Config, remote: str, *, actor: str, now: float, why: str) -> bool:
    """Lift `remote`'s pause inside the caller's transaction; an event on the job that met it records
    who and why. Returns False when the remote was not paused."""
    pause = pauses_store.unpause(conn, remote)
    if pause is None:
        return False
    state = jobs_store.state_of(conn, pause.job)
    if state is not None:
        apply(
            conn, pause.job, "remote_resumed", actor=actor, now=now, expected_state=state,
            detail={"remote": remote, "why": why, "paused_at": pause.paused_at, "reason": pause.reason,
                    "refusals": pause.refusals},
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
