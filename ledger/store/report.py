"""The named read queries behind `reclaim report` and its history file (ledger.report, ledger.history).

A hold is an event that moved a job into `held` from another state; its decision is the job's next event that
moved it out of `held`. A release's outcome is the job's next event that moved it out of `reserving` (the next
attempt's send). The statements are each backend's own (`ledger/store/sql/BACKEND/report.sql`, run by name: an
event's JSON detail is read the backend's way); the history file's reads, whose window is optional, are composed here
from what the connection declares (`PARAM`, `TEXT_ORDER`). Only reads; none opens or ends a transaction (the caller
reads inside one, for one consistent snapshot).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ledger import store
from ledger.event_table import DECISION_KINDS as DECISION_KINDS  # the events that end a hold
from ledger.event_table import HOLD_KINDS as HOLD_KINDS  # the events that put a job on hold
from ledger.store import Connection

FINDING_KIND = "finding"
QUERY_KIND = "remote_query"


_HOLD_KINDS_JSON = json.dumps(HOLD_KINDS)
"""The hold kinds as the holds' statement takes them: one parameter, a JSON array."""


@dataclass(frozen=True)
class HoldRow:
    """One hold: the event that held the job, and the event that decided it (None: not decided yet)."""

    held_event_id: int
    held_at: float
    job_id: str
    operation: str
    held_kind: str
    held_reason: str | None
    cause: str | None
    decided_event_id: int | None
    decided_at: float | None
    decision: str | None
    decided_by: str | None
    decision_reason: str | None


def holds(conn: Connection, since: float, until: float) -> list[HoldRow]:
    """Every hold that began at `since` <= time < `until`, oldest first, with its decision whenever it came."""
    rows = conn.run("report.holds", (_HOLD_KINDS_JSON, since, until)).fetchall()
    return [HoldRow(int(r[0]), float(r[1]), r[2], r[3], r[4], r[5], r[6], None if r[7] is None else int(r[7]),
                    None if r[8] is None else float(r[8]), r[9], r[10], r[11]) for r in rows]


@dataclass(frozen=True)
class ReleaseRow:
    """One release: when, by whom, from which state, and the job's next send outcome (None: none yet)."""

    event_id: int
    at: float
    job_id: str
    operation: str
    from_state: str
    actor: str
    next_kind: str | None
    next_state: str | None
    next_at: float | None


def releases(conn: Connection, since: float, until: float) -> list[ReleaseRow]:
    """Every release authorised at `since` <= time < `until`, oldest first, with what the next attempt came to."""
    rows = conn.run("report.releases", (since, until)).fetchall()
    return [ReleaseRow(int(r[0]), float(r[1]), r[2], r[3], r[4], r[5], r[6], r[7],
                       None if r[8] is None else float(r[8])) for r in rows]


def queries(conn: Connection, since: float, until: float) -> list[tuple[str, str, bool, int]]:
    """(operation, the remote state the query recorded, whether the remote could be asked at all, queries) for
    the remote queries made at `since` <= time < `until`."""
    rows = conn.run("report.queries", (QUERY_KIND, since, until)).fetchall()
    return [(r[0], r[1], r[2] not in (0, "0", "false", False), int(r[3])) for r in rows]


def quota_days(conn: Connection, first_day: str, last_day: str) -> list[tuple[str, str, int]]:
    """(operation, day, reservations counted) for the days `first_day` .. `last_day` (YYYY-MM-DD) inclusive."""
    rows = conn.run("report.quota_days", (first_day, last_day)).fetchall()
    return [(r[0], r[1], int(r[2])) for r in rows]


# -- the history file: every row, streamed ---------------------------------------------------------------------
def _window(conn: Connection, column: str, since: float | None, until: float | None) -> tuple[str, list[Any]]:
    terms, params = [], []
    if since is not None:
        terms.append(f"{column} >= {conn.PARAM}")
        params.append(since)
    if until is not None:
        terms.append(f"{column} < {conn.PARAM}")
        params.append(until)
    return (" AND ".join(terms) or "1 = 1"), params


JOB_COLUMNS = ("job_id", "operation", "idem_key", "target", "state", "attempt", "epoch", "handle", "quota_day",
               "created_at", "updated_at", "tries", "last_error", "held_reason", "held_at", "owner", "due_at",
               "payload", "result", "result_at")
EVENT_COLUMNS = ("id", "at", "job_id", "operation", "seq", "actor", "kind", "from_state", "to_state", "epoch",
                 "detail", "hash")


def job_rows(conn: Connection, since: float | None, until: float | None) -> Iterator[dict[str, Any]]:
    """Every job (with a window: every job with an event in it), by job id and operation, streamed."""
    where, params = _window(conn, "e.at", since, until)
    order = conn.TEXT_ORDER
    cols = ", ".join(f"j.{c}" for c in JOB_COLUMNS)
    if since is None and until is None:
        sql = f"SELECT {cols} FROM jobs j ORDER BY j.job_id{order}, j.operation{order}"
    else:
        sql = (f"SELECT {cols} FROM jobs j WHERE EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.job_id AND "
               f"e.operation = j.operation AND {where}) ORDER BY j.job_id{order}, j.operation{order}")
    for r in store.stream(conn, sql, params):
        yield dict(zip(JOB_COLUMNS, r, strict=True))


def event_rows(conn: Connection, since: float | None, until: float | None) -> Iterator[dict[str, Any]]:
    """Every event in the window (all without one), by id, streamed."""
    where, params = _window(conn, "at", since, until)
    sql = f"SELECT {', '.join(EVENT_COLUMNS)} FROM events WHERE {where} ORDER BY id"
    for r in store.stream(conn, sql, params):
        yield dict(zip(EVENT_COLUMNS, r, strict=True))
