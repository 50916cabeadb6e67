"""The SQL behind paused remotes (ledger.remote_health): the table `remote_pauses`, one row per paused remote.

The statements are each backend's own (`ledger/store/sql/BACKEND/remote_pauses.sql`, run by name).
`ledger.remote_health` decides when a remote is paused, when it is probed and who may lift the pause; these
operations only read and write rows. A write runs inside the caller's transaction (`ledger.db.write_tx`). Every
operation raises the ledger's own errors only: LedgerUnavailable, LedgerLocked, LedgerCorrupt, LedgerConflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.model import JobKey
from ledger.store import Connection, Row


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

    @classmethod
    def from_row(cls, r: Row) -> RemotePause:
        """Build from a remote_pauses row."""
        return cls(remote=r["remote"], paused_at=r["paused_at"], reason=r["reason"], error=r["error"],
                   job=JobKey(r["job_id"], r["operation"]), probe_at=r["probe_at"], refusals=r["refusals"])


def paused_remotes(conn: Connection) -> dict[str, RemotePause]:
    """Every paused remote by name, in the order they were paused ({} when none is)."""
    rows = conn.run("remote_pauses.paused_remotes").fetchall()
    return {r["remote"]: RemotePause.from_row(r) for r in rows}


def pause(conn: Connection, remote: str, key: JobKey, *, reason: str, error: str | None, now: float,
          probe_at: float) -> int:
    """Pause `remote` since `now` for `reason`, met by job `key`, to be probed at `probe_at`; when it is paused
    already, only its next probe, its last error and its count of refusals move (inside the caller's write
    transaction). Returns the refusals counted for this pause: 1 when this refusal paused it."""
    row = conn.run(
        "remote_pauses.pause", (remote, now, reason, error, key.job_id, key.operation, probe_at)
    ).fetchone()
    return int(row[0])


def unpause(conn: Connection, remote: str) -> RemotePause | None:
    """Delete `remote`'s pause (inside the caller's write transaction) and return it as it was; None when the remote
    was not paused (nothing is written)."""
    row = conn.run("remote_pauses.unpause", (remote,)).fetchone()
    return RemotePause.from_row(row) if row is not None else None


def is_paused(conn: Connection, remote: str) -> bool:
    """Whether the remote `remote` is paused."""
    return conn.run("remote_pauses.is_paused", (remote,)).fetchone() is not None

