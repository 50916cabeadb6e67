"""The SQL of the `picks` table (ledger.picks, ledger.leases): which worker picked which due job until when, so
workers share out the due jobs without changing any job.

The same SQL on both backends but for row locks: on PostgreSQL the due jobs are read `FOR UPDATE OF j SKIP LOCKED`
and a worker's own pick rows are renewed and given back skipping rows another transaction holds, so no two pickers
ever wait on each other; SQLite's BEGIN IMMEDIATE already serialises them. The due jobs are read by the state
indexes, picks by their primary key (job_id, operation). Writes run inside the caller's write transaction. Each
raises the ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt, LedgerConflict).
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger import store
from ledger.model import Job, JobKey
from ledger.store import Connection

Cursor = tuple[float, str, str]
"""Where a pass got to in the due jobs: (created_at, job_id, operation) of the last one picked."""

_DUE = (
    "FROM jobs j WHERE j.state = 'reserving' AND j.send_started_at IS NULL "
    "AND (j.next_try_at IS NULL OR j.next_try_at <= ?) AND (j.created_at, j.job_id, j.operation) > (?, ?, ?) "
    "AND NOT EXISTS (SELECT 1 FROM picks p WHERE p.job_id = j.job_id AND p.operation = j.operation "
    "AND p.worker <> ? AND p.picked_until > ?) "
)


def any_due(conn: Connection, *, owner: str, now: float, after: Cursor) -> bool:
    """True when a `reserving` job after `after` is due at `now`, unsent, and not live-picked by a worker other than
    `owner`. A read (of the latest committed rows outside a transaction)."""
    return conn.execute(f"SELECT 1 {_DUE}LIMIT 1", (now, *after, owner, now)).fetchone() is not None


def due_batch(conn: Connection, *, owner: str, now: float, after: Cursor, limit: int) -> list[Job]:
    """At most `limit` due jobs as `any_due` finds them, oldest first (creation, then key), inside the caller's
    write transaction; on PostgreSQL the rows are locked, skipping rows another transaction holds."""
    lock = " FOR UPDATE OF j SKIP LOCKED" if store.is_pg(conn) else ""
    rows = conn.execute(
        f"SELECT j.* {_DUE}ORDER BY j.created_at, j.job_id, j.operation LIMIT ?{lock}",
        (now, *after, owner, now, limit),
    ).fetchall()
    return [Job.from_row(r) for r in rows]


def pick(conn: Connection, keys: Sequence[JobKey], owner: str, *, until: float, now: float) -> set[JobKey]:
    """Write `owner`'s picks of `keys` lasting `until`, inside the caller's write transaction; one statement. A pick
    of another worker still live at `now` is left as it is (the upsert's condition decides, on the latest committed
    row). Returns the keys now picked by `owner` (empty for no keys, nothing written)."""
    if not keys:
        return set()
    values = ", ".join("(?, ?, ?, ?)" for _ in keys)
    params: list[object] = []
    for key in keys:
        params += [key.job_id, key.operation, owner, until]
    rows = conn.execute(
        f"INSERT INTO picks (job_id, operation, worker, picked_until) VALUES {values} "
        "ON CONFLICT (job_id, operation) DO UPDATE SET worker = excluded.worker, picked_until = excluded.picked_until "
        "WHERE picks.worker = excluded.worker OR picks.picked_until <= ? RETURNING job_id, operation",
        (*params, now),
    ).fetchall()
    return {JobKey(r[0], r[1]) for r in rows}


def _own_rows(conn: Connection) -> str:
    """The WHERE clause naming a worker's pick rows (one `?`): on PostgreSQL rows another transaction
    holds are skipped, so giving back or renewing never waits on (or deadlocks with) a picker."""
    if store.is_pg(conn):
        return ("(job_id, operation) IN (SELECT job_id, operation FROM picks WHERE worker = ? "
                "FOR UPDATE SKIP LOCKED)")
    return "worker = ?"


def renew(conn: Connection, owner: str, *, until: float) -> int:
    """Make every pick `owner` holds last until `until`, inside the caller's write transaction; returns how many.
    On PostgreSQL picks another transaction holds are skipped."""
    cur = conn.execute(f"UPDATE picks SET picked_until = ? WHERE {_own_rows(conn)}", (until, owner))
    return int(cur.rowcount or 0)


def release(conn: Connection, owner: str, *, now: float) -> int:
    """Delete every pick `owner` holds, and every pick of any worker lapsed at `now`, inside the caller's write
    transaction; returns how many of `owner`'s were deleted. On PostgreSQL picks another transaction holds are
    skipped."""
    mine = int(conn.execute(f"DELETE FROM picks WHERE {_own_rows(conn)}", (owner,)).rowcount or 0)
    lapsed = "picked_until <= ?"
    if store.is_pg(conn):
        lapsed = f"(job_id, operation) IN (SELECT job_id, operation FROM picks WHERE {lapsed} FOR UPDATE SKIP LOCKED)"
    conn.execute(f"DELETE FROM picks WHERE {lapsed}", (now,))
    return mine


def picked_by_other(conn: Connection, key: JobKey, owner: str, now: float) -> bool:
    """True when a worker other than `owner` holds a pick of the job live at `now` (read in the caller's
    transaction)."""
    row = conn.execute(
        "SELECT 1 FROM picks WHERE job_id = ? AND operation = ? AND worker <> ? AND picked_until > ?",
        (key.job_id, key.operation, owner, now),
    ).fetchone()
    return row is not None


def drop(conn: Connection, key: JobKey) -> None:
    """Delete the job's pick, whoever held it, inside the caller's write transaction (the claim that ends it)."""
    conn.execute("DELETE FROM picks WHERE job_id = ? AND operation = ?", (key.job_id, key.operation))
