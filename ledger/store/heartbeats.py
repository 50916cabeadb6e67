"""The SQL behind the workers' heartbeats (ledger.heartbeat): the table `worker_heartbeats`, one row per worker.

Each backend's SQL is its own (`ledger/store/sql/BACKEND/heartbeats.sql`, run by name). `ledger.heartbeat` decides
when a worker writes its row and what a board of rows says (live, silent, the last pass); these operations only read
and write rows. A write runs inside the caller's transaction (`ledger.db.write_tx`). Every operation raises the
ledger's own errors only: LedgerUnavailable, LedgerLocked, LedgerCorrupt, LedgerConflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledger.clock import iso
from ledger.store import Connection, Row

COLUMNS = ("worker_id", "host", "pid", "version", "kind", "interval_s", "started_at", "pass_started_at",
           "pass_ended_at", "last_pass_at", "passes", "report", "error", "running", "stopped_at", "updated_at")
"""The columns of a heartbeat row, in the order they are written and read (the order of the statements in
`heartbeats.sql`)."""
RUNNING_LISTED = 100
"""At most this many workers marked running are read (`running`)."""


@dataclass(frozen=True)
class Heartbeat:
    """One worker's row as last written."""

    worker_id: str
    host: str
    pid: int
    version: str
    kind: str
    interval: float | None
    started_at: float
    pass_started_at: float | None
    pass_ended_at: float | None
    last_pass_at: float | None
    passes: int
    report: dict[str, Any]
    error: str | None
    running: bool
    stopped_at: float | None
    updated_at: float

    @classmethod
    def from_row(cls, r: Row) -> Heartbeat:
        """Build from a worker_heartbeats row."""
        return cls(
            worker_id=r["worker_id"], host=r["host"], pid=int(r["pid"]), version=r["version"], kind=r["kind"],
            interval=r["interval_s"], started_at=r["started_at"], pass_started_at=r["pass_started_at"],
            pass_ended_at=r["pass_ended_at"], last_pass_at=r["last_pass_at"], passes=int(r["passes"]),
            report=json.loads(r["report"]), error=r["error"], running=bool(r["running"]), stopped_at=r["stopped_at"],
            updated_at=r["updated_at"],
        )

    def state(self, now: float, silence_seconds: float) -> str:
        """'running', 'stopped', or 'silent' (marked running, not heard from within the threshold)."""
        if not self.running:
            return "stopped"
        return "running" if now - self.updated_at <= silence_seconds else "silent"

    def to_dict(self, now: float, silence_seconds: float) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO-8601 UTC), with the state at `now`."""
        return {
            "worker_id": self.worker_id, "host": self.host, "pid": self.pid, "version": self.version,
            "kind": self.kind, "interval_seconds": self.interval, "state": self.state(now, silence_seconds),
            "started_at": iso(self.started_at), "pass_started_at": _iso(self.pass_started_at),
            "pass_ended_at": _iso(self.pass_ended_at), "passes": self.passes, "last_report": self.report,
            "error": self.error, "stopped_at": _iso(self.stopped_at), "updated_at": iso(self.updated_at),
        }


def _iso(ts: float | None) -> str | None:
    return iso(ts) if ts is not None else None


def write(conn: Connection, beat: Heartbeat) -> None:
    """Write the worker's row as `beat` says (inserted, or every column but its id replaced), inside the caller's
    write transaction."""
    conn.run("heartbeats.upsert", (
        beat.worker_id, beat.host, beat.pid, beat.version, beat.kind, beat.interval, beat.started_at,
        beat.pass_started_at, beat.pass_ended_at, beat.last_pass_at, beat.passes,
        json.dumps(beat.report, sort_keys=True), beat.error, int(beat.running), beat.stopped_at, beat.updated_at,
    ))


def prune(conn: Connection, *, stopped_before: float, silent_before: float) -> int:
    """Delete the rows of workers written last before `stopped_before` and stopped, or written last before
    `silent_before` whatever they say (a killed process), inside the caller's write transaction; how many."""
    cur = conn.run("heartbeats.prune", (stopped_before, silent_before))
    return max(0, cur.rowcount or 0)


def running(conn: Connection) -> list[Heartbeat]:
    """The rows of workers marked running, the RUNNING_LISTED newest (by their last write, then worker id)."""
    rows = conn.run("heartbeats.running", (RUNNING_LISTED,)).fetchall()
    return [Heartbeat.from_row(r) for r in rows]


def newest(conn: Connection, limit: int) -> list[Heartbeat]:
    """The `limit` newest rows (by their last write, then worker id), running or not."""
    rows = conn.run("heartbeats.newest", (limit,)).fetchall()
    return [Heartbeat.from_row(r) for r in rows]


def last_pass_at(conn: Connection) -> float | None:
    """When any worker's pass last started or ended (None: none recorded)."""
    last = conn.run("heartbeats.last_pass_at").fetchone()[0]
    return float(last) if last is not None else None
