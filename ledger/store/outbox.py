"""The SQL behind the notification outbox (ledger.outbox, ledger.dispatch): the table `outbox`, one row per
notification and channel.

Each backend's SQL is its own (`ledger/store/sql/BACKEND/outbox.sql`, run by name; a move, whose columns vary, is
composed here from the connection's `PARAM`); the states are read by `outbox_state (state, created_at)`.
`ledger.outbox` keeps the table of which state an event moves a row to, and which transitions notify;
`ledger.dispatch` when a row is claimed, posted and settled; these operations only read and write rows. A write runs
inside the caller's transaction (`ledger.db.write_tx`). Every operation raises the ledger's own errors only:
LedgerUnavailable, LedgerLocked, LedgerCorrupt, LedgerConflict, SerializationFailure.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.model import JobKey
from ledger.store import Connection, Row

SETTABLE = frozenset({"last_error", "next_try_at"})
"""The columns a move may set besides its state and time."""


@dataclass(frozen=True)
class OutboxRow:
    """One notification as stored (its columns, in the table's order; `body` the JSON text posted)."""

    event_id: str
    channel: str
    job_id: str
    operation: str
    kind: str
    body: str
    state: str
    created_at: float
    updated_at: float
    next_try_at: float | None
    tries: int
    last_error: str | None

    @classmethod
    def from_row(cls, r: Row) -> OutboxRow:
        """Build from an outbox row."""
        return cls(event_id=r["event_id"], channel=r["channel"], job_id=r["job_id"], operation=r["operation"],
                   kind=r["kind"], body=r["body"], state=r["state"], created_at=r["created_at"],
                   updated_at=r["updated_at"], next_try_at=r["next_try_at"], tries=int(r["tries"]),
                   last_error=r["last_error"])

    @property
    def key(self) -> JobKey:
        """The key of the job the notification reports."""
        return JobKey(self.job_id, self.operation)


def insert(conn: Connection, *, event_id: str, channel: str, key: JobKey, kind: str, body: str, now: float) -> None:
    """Queue one notification `pending`, due at once (inside the caller's write transaction). Raises LedgerConflict
    when `event_id` is queued already."""
    conn.run(
        "outbox.insert",
        (event_id, channel, key.job_id, key.operation, kind, body, now, now, now),
    )


def move(
    conn: Connection, event_id: str, *, to_state: str, from_states: Collection[str], now: float,
    fields: Mapping[str, Any] | None = None, count_try: bool = False,
) -> OutboxRow | None:
    """Set the row's state to `to_state` and its `updated_at` to `now` when it is in one of `from_states`, with
    `fields` (last_error, next_try_at) set and, with `count_try`, one more try counted (inside the caller's write
    transaction). Returns the row as updated; None when it is in none of `from_states` or missing (nothing is
    written). Raises ValueError for a column that cannot be set, or no `from_states`."""
    fields = dict(fields or {})
    bad = set(fields) - SETTABLE
    if bad:
        raise ValueError(f"cannot set outbox columns {sorted(bad)}")
    if not from_states:
        raise ValueError("an outbox move needs the states it may start from")
    p = conn.PARAM
    sets = [f"state = {p}", f"updated_at = {p}", *(f"{c} = {p}" for c in fields)]
    if count_try:
        sets.append("tries = tries + 1")
    marks = ", ".join(p for _ in from_states)
    row = conn.execute(
        f"UPDATE outbox SET {', '.join(sets)} WHERE event_id = {p} AND state IN ({marks}) RETURNING *",
        [to_state, now, *fields.values(), event_id, *from_states],
    ).fetchone()
    return OutboxRow.from_row(row) if row is not None else None


def sending(conn: Connection) -> list[tuple[str, str, float]]:
    """(event_id, channel, claimed at) of every row claimed and not settled (`sending`), in no set order."""
    rows = conn.run("outbox.sending").fetchall()
    return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]


def due(conn: Connection, now: float, limit: int) -> list[tuple[str, str, str]]:
    """(event_id, channel, body) of the `pending` rows due at `now`, the oldest `limit` (by creation, then id)."""
    rows = conn.run("outbox.due", (now, limit)).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def listed(conn: Connection, limit: int) -> list[OutboxRow]:
    """At most `limit` rows: uncertain ones first, then sending, then pending, then the rest; newest first within
    each (by creation, then id)."""
    rows = conn.run("outbox.listed", (limit,)).fetchall()
    return [OutboxRow.from_row(r) for r in rows]


def get(conn: Connection, event_id: str) -> OutboxRow | None:
    """The row of `event_id`; None when the outbox has none."""
    row = conn.run("outbox.get", (event_id,)).fetchone()
    return OutboxRow.from_row(row) if row is not None else None
