"""The SQL behind the held-job stages (ledger.stages) and the `stage:` term of a typed filter: who has looked at a
job in its current attempt.

Composed here, from what the connection declares (`PARAM`): the conditions are shared with a page's filter
(ledger.store.jobs.filter_clause). Each condition is served by `events_job_kind (job_id, operation, kind, id)`.
Only reads.
"""

from __future__ import annotations

from typing import Any

from ledger.model import JobKey
from ledger.store import Connection


def _since_release(outer: str, alias: str) -> str:
    """Events of `alias` on the `outer` job row, after its last release (its current attempt)."""
    return (f"{alias}.job_id = {outer}.job_id AND {alias}.operation = {outer}.operation AND {alias}.id > COALESCE(("
            f"SELECT MAX(r.id) FROM events r WHERE r.job_id = {outer}.job_id AND r.operation = {outer}.operation "
            "AND r.kind = 'release'), 0)")


def has_finding(outer: str) -> str:
    """SQL: the `outer` job row has a finding in its current attempt."""
    return f"EXISTS (SELECT 1 FROM events f WHERE {_since_release(outer, 'f')} AND f.kind = 'finding')"


def authored_by(outer: str, param: str) -> str:
    """SQL (one parameter, the actor, written `param`): the actor queried the remote or wrote a finding in the
    current attempt."""
    return (f"EXISTS (SELECT 1 FROM events a WHERE {_since_release(outer, 'a')} "
            f"AND a.kind IN ('finding', 'remote_query') AND a.actor = {param})")


def stage_clause(
    conn: Connection, stage: str, outer: str, me: str | None, four_eyes: bool
) -> tuple[list[str], list[Any]]:
    """SQL conditions (ANDed, in `conn`'s backend's SQL) and their parameters selecting the `outer` job rows in `stage` (one of
    `ledger.model.STAGES`): awaiting-my-approval leaves out, under `four_eyes`, the jobs `me` queried or wrote a
    finding for."""
    finding = has_finding(outer)
    if stage == "needs-finding":
        return [f"{outer}.state IN ('held', 'failed')", f"NOT {finding}"], []
    if stage == "assigned":
        return [f"{outer}.owner IS NOT NULL", f"{outer}.owner <> ''"], []
    where = [f"{outer}.state IN ('held', 'failed')", finding]
    if stage == "awaiting-my-approval" and four_eyes and me:
        return [*where, f"NOT {authored_by(outer, conn.PARAM)}"], [me]
    return where, []


def attempt_looks(conn: Connection, key: JobKey) -> list[tuple[str, str, float]]:
    """(kind, actor, at) of the findings and queries in the job's current attempt, oldest first."""
    p = conn.PARAM
    rows = conn.execute(
        f"SELECT e.kind, e.actor, e.at FROM events e, jobs j WHERE j.job_id = {p} AND j.operation = {p} AND "
        f"{_since_release('j', 'e')} AND e.kind IN ('finding', 'remote_query') ORDER BY e.id",
        (key.job_id, key.operation),
    ).fetchall()
    return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]


def count_awaiting(conn: Connection, actor: str | None) -> int:
    """Held jobs with a finding in their current attempt; with `actor`, leaving out those the actor queried or wrote
    a finding for in that attempt."""
    sql = f"SELECT COUNT(*) FROM jobs WHERE state = 'held' AND {has_finding('jobs')}"
    params: list[Any] = []
    if actor is not None:
        sql += f" AND NOT {authored_by('jobs', conn.PARAM)}"
        params.append(actor)
    return int(conn.execute(sql, params).fetchone()[0])
