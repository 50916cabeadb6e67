"""The SQL of the `picks` table (ledger.picks, ledger.leases): which worker picked which due job until when, so
workers share out the due jobs without changing any job.

The statements are each backend's own (`ledger/store/sql/BACKEND/picks.sql`, run by name); a pick of several jobs
(one row each) is composed here from what the connection declares (`PARAM`). They differ in row locks: on PostgreSQL
the due jobs are read `FOR UPDATE OF j SKIP LOCKED` and a worker's own pick rows are renewed and given back skipping
rows another transaction holds, so no two pickers ever wait on each other; SQLite's BEGIN IMMEDIATE already
serialises them. The due jobs are read by the state indexes, picks by their primary key (job_id, operation). Writes
run inside the caller's write transaction. Each raises the ledger's own errors only (LedgerUnavailable, LedgerLocked,
LedgerCorrupt, LedgerConflict).
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.model import Job, JobKey
from ledger.store import Connection

Cursor = tuple[float, str, str]
"""Where a pass got to in the due jobs: (created_at, job_id, operation) of the last one picked."""


def any_due(conn: Connection, *, owner: str, now: float, after: Cursor) -> bool:
    """True when a `reserving` job after `after` is due at `now`, unsent, and not live-picked by a worker other than
    `owner`. A read (of the latest committed rows outside a transaction)."""
    return conn.run("picks.any_due", (now, *after, owner, now)).fetchone() is not None


def due_batch(conn: Connection, *, owner: str, now: float, after: Cursor, limit: int) -> list[Job]:
    """At most `limit` due jobs as `any_due` finds them, oldest first (creation, then key), inside the caller's
    write transaction; on PostgreSQL the rows are locked, skipping rows another transaction holds."""
    rows = conn.run("picks.due_batch", (now, *after, owner, now, limit)).fetchall()
    return [Job.from_row(r) for r in rows]


def pick(conn: Connection, keys: Sequence[JobKey], owner: str, *, until: float, now: float) -> set[JobKey]:
    """Write `owner`'s picks of `keys` lasting `until`, inside the caller's write transaction; one statement. A pick
    of another worker still live at `now` is left as it is (the upsert's condition decides, on the latest committed
    row). Returns the keys now picked by `owner` (empty for no keys, nothing written)."""
    if not keys:
        return set()
    p = conn.PARAM
    values = ", ".join(f"({p}, {p}, {p}, {p})" for _ in keys)
    params: list[object] = []
    for key in keys:
        params += [key.job_id, key.operation, owner, until]
    rows = conn.execute(
        f"INSERT INTO picks (job_id, operation, worker, picked_until) VALUES {values} "
        "ON CONFLICT (job_id, operation) DO UPDATE SET worker = excluded.worker, picked_until = excluded.picked_until "
        f"WHERE picks.worker = excluded.worker OR picks.picked_until <= {p} RETURNING job_id, operation",
        (*params, now),
    ).fetchall()
    return {JobKey(r[0], r[1]) for r in rows}


def renew(conn: Connection, owner: str, *, until: float) -> int:
    """Make every pick `owner` holds last until `until`, inside the caller's write transaction; returns how many.
    On PostgreSQL picks another transaction holds are skipped."""
    cur = conn.run("picks.renew", (until, owner))
    return int(cur.rowcount or 0)


def release(conn: Connection, owner: str, *, now: float) -> int:
    """Delete every pick `owner` holds, and every pick of any worker lapsed at `now`, inside the caller's write
    transaction; returns how many of `owner`'s were deleted. On PostgreSQL picks another transaction holds are
    skipped."""
    mine = int(conn.run("picks.release_own", (owner,)).rowcount or 0)
    conn.run("picks.release_lapsed", (now,))
    return mine


def picked_by_other(conn: Connection, key: JobKey, owner: str, now: float) -> bool:
    """True when a worker other than `owner` holds a pick of the job live at `now` (read in the caller's
    transaction)."""
    row = conn.run("picks.picked_by_other", (key.job_id, key.operation, owner, now)).fetchone()
    return row is not None


def drop(conn: Connection, key: JobKey) -> None:
    """Delete the job's pick, whoever held it, inside the caller's write transaction (the claim that ends it)."""
    conn.run("picks.drop", (key.job_id, key.operation))
