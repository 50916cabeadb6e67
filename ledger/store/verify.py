"""The SQL of the reads `reclaim verify` makes (ledger.audit): the events chain as stored, the jobs' sealed columns,
the counters beside a recount of what they count, the passes recorded, the evidence and fenced-write chains, the webhooks that brought evidence
without a delivery row. The checks themselves stay in ledger.audit; these only read rows, as they are stored.

The statements are each backend's own (`ledger/store/sql/BACKEND/verify.sql`, run by name); the reads of the jobs'
sealed columns and of a side chain name their columns from `seal.ROW_COLUMNS` and `SIDE_CHAINS`, composed here (no
parameter: the same text on both backends). Every read but the counts and the webhook probe walks a whole table in
one order (`store.stream`: a server-side cursor on PostgreSQL), so run them inside one `snapshot`. Each raises the
ledger's own errors only (LedgerUnavailable, LedgerLocked, LedgerCorrupt) for a file or server that cannot be read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from ledger import seal, store
from ledger.errors import LedgerError
from ledger.store import Connection
from ledger.store import evidence as evidence_store


@contextlib.contextmanager
def snapshot(conn: Connection) -> Iterator[None]:
    """Run the block in one read transaction (every read sees the same snapshot; nothing is written), ended with
    COMMIT; on a damaged file where COMMIT itself fails, rolled back, and no error of the end is raised. An error
    starting it is raised (the ledger's own)."""
    conn.begin_read()
    try:
        yield
    finally:
        try:
            conn.execute("COMMIT")
        except LedgerError:
            if conn.in_transaction:
                with contextlib.suppress(LedgerError):
                    conn.execute("ROLLBACK")


class ChainLink(NamedTuple):
    """One event as the audit chain stores it: every column its hash covers, its links, its seal and MAC."""

    id: int
    at: float
    job_id: str
    operation: str
    seq: int
    actor: str
    kind: str
    from_state: str | None
    to_state: str | None
    epoch: int | None
    detail: str
    prev_hash: str | None
    hash: str | None
    seal: str | None
    mac: str | None


def chain(conn: Connection, after: int | None = None) -> Iterator[ChainLink]:
    """Every event, by id, as stored (its detail as the stored text), read as it goes; with `after`, only the
    events whose id is greater. The rows are plain tuples in ChainLink's column order (a tuple per event is what
    a walk of millions of them can afford)."""
    if after is None:
        return store.stream(conn, conn.sql("verify.chain"))
    return store.stream(conn, conn.sql("verify.chain_after"), (after,))


def nth_event(conn: Connection, count: int) -> tuple[int, str | None, float, str | None] | None:
    """(id, hash, time, seal) of event number `count` in id order (1: the oldest); None when the ledger holds
    fewer. Raises ValueError for a count below 1."""
    if count < 1:
        raise ValueError("an event number starts at 1")
    row = conn.run("verify.nth_event", (count - 1,)).fetchone()
    return (int(row[0]), row[1], float(row[2]), row[3]) if row is not None else None


def policy_through(conn: Connection, last_id: int) -> list[tuple[int, float, str, str | None, str | None]]:
    """Every policy_set event whose id is at most `last_id`, by id, as (id, at, detail text, hash, proof)."""
    return [(int(r[0]), float(r[1]), str(r[2]), r[3], r[4]) for r in conn.run("verify.policy_through", (last_id,))]


JobStep = tuple[int, str, str, int, str, str | None, str | None, int | None, str | None]
"""One event as the per-job pass reads it: (id, job_id, operation, seq, kind, from_state, to_state, epoch, seal)."""


def job_events(conn: Connection) -> Iterator[JobStep]:
    """Every event as a JobStep, by (job_id, operation) with text ordered by its UTF-8 bytes (the connection's
    TEXT_ORDER: Python's own order of str), then seq; read as it goes. The events' unique (job_id, operation,
    seq) index serves the order on SQLite (and on a PostgreSQL database whose collation is C)."""
    c = conn.TEXT_ORDER
    return store.stream(conn, "SELECT id, job_id, operation, seq, kind, from_state, to_state, epoch, seal FROM events "
                              f"ORDER BY job_id{c}, operation{c}, seq")


def job_events_of(conn: Connection, job_id: str, operation: str) -> list[JobStep]:
    """One job's events as JobSteps, by seq; [] when it has none."""
    return [tuple(r) for r in conn.run("verify.job_steps_sealed", (job_id, operation))]


def jobs_checked(conn: Connection) -> Iterator[tuple[Any, ...]]:
    """Every job as (job_id, operation, state, epoch, attempt, *the columns of `seal.ROW_COLUMNS` as stored: payload
    and result as their text), by key in `job_events`' order, read as it goes."""
    cols = ", ".join(seal.ROW_COLUMNS)
    c = conn.TEXT_ORDER
    return store.stream(conn, f"SELECT job_id, operation, state, epoch, attempt, {cols} FROM jobs "
                              f"ORDER BY job_id{c}, operation{c}")


def job_checked(conn: Connection, job_id: str, operation: str) -> tuple[Any, ...] | None:
    """One job as `jobs_checked` reads it; None when the jobs table has no such row."""
    cols = ", ".join(seal.ROW_COLUMNS)
    p = conn.PARAM
    row = conn.execute(f"SELECT job_id, operation, state, epoch, attempt, {cols} FROM jobs "
                       f"WHERE job_id = {p} AND operation = {p}", (job_id, operation)).fetchone()
    return tuple(row) if row is not None else None


def quota_events_from(conn: Connection, at: float) -> Iterator[tuple[Any, ...]]:
    """Every reserve and release recorded at or after `at` (epoch seconds), by id, as (id, at, operation, kind,
    to_state, detail text, seal); read as it goes."""
    return store.stream(conn, conn.sql("verify.quota_events_from"), (at,))


def event_count(conn: Connection) -> int:
    """How many events the ledger holds (0 when none)."""
    return int(conn.run("verify.event_count").fetchone()[0])


def newest_link(conn: Connection) -> ChainLink | None:
    """The newest event as stored (None on an empty ledger): one row, by the primary key's last page."""
    row = conn.run("verify.newest_link").fetchone()
    return ChainLink(*row) if row is not None else None


def job_count(conn: Connection) -> int:
    """How many jobs the jobs table holds (0 when none)."""
    return int(conn.run("verify.job_count").fetchone()[0])


def quota_table(conn: Connection) -> dict[tuple[str, str], int]:
    """The quota counters as stored, by (operation, day), zeros included; {} when none."""
    return {(str(op), str(day)): int(n) for op, day, n in conn.run("verify.quota_table")}


def job_counters(conn: Connection) -> dict[tuple[str, str], int]:
    """The jobs per (operation, state) the events' trigger keeps, as stored (zeros included); {} when none."""
    return {(str(op), str(st)): int(n) for op, st, n in conn.run("verify.job_counters")}


def jobs_counted(conn: Connection) -> dict[tuple[str, str], int]:
    """The jobs per (operation, state), counted in the jobs table itself (only pairs with a job; a full scan)."""
    return {(str(op), str(st)): int(n) for op, st, n in conn.run("verify.jobs_counted")}


Tally = tuple[str, str, str, str, int]
"""An event tally's key: operation, kind, from state and to state ('' for none), 1 when the system actor wrote it."""


def event_tallies_kept(conn: Connection) -> dict[Tally, tuple[int, int, int]]:
    """The tallies the events' trigger keeps, as stored: key -> (events, journaled, cancelled)."""
    return {(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])): (int(r[5]), int(r[6]), int(r[7]))
            for r in conn.run("verify.event_tallies_kept")}


def event_tallies_counted(conn: Connection) -> dict[Tally, tuple[int, int, int]]:
    """The same tallies counted from the events themselves (a full scan)."""
    return {(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4])): (int(r[5]), int(r[6] or 0), int(r[7] or 0))
            for r in conn.run("verify.event_tallies_counted")}


@dataclass(frozen=True)
class VerifyPass:
    """A `verify` that found nothing wrong: when, over what (`full`: every event and page; `since`: what was
    appended after an earlier head), through which head (events, hash), run by whom."""

    scope: str
    at: float
    events: int
    head: str | None
    actor: str


def record_pass(conn: Connection, p: VerifyPass) -> None:
    """Record a passing verify, inside the caller's write transaction."""
    conn.run("verify.record_pass", (p.at, p.scope, p.events, p.head, p.actor))


def last_passes(conn: Connection) -> dict[str, VerifyPass]:
    """The newest passing verify of each scope ({} when none passed yet)."""
    return {str(r[0]): VerifyPass(str(r[0]), float(r[1]), int(r[2]), r[3], str(r[4]))
            for r in conn.run("verify.last_passes")}


SIDE_CHAINS = {
    "evidence": "id, at, source, idem_key, attempt, handle, remote_state, job_id, operation, ref, detail",
    "fenced_writes": "id, at, job_id, operation, actor, event, epoch, detail",
}
"""The tables chained beside the events, and the columns each row's hash covers (its id first)."""


def side_chain(conn: Connection, table: str) -> Iterator[tuple[Any, ...]]:
    """Every row of the side chain `table` (one of SIDE_CHAINS), by id, as (*its columns, prev_hash, hash); read as it
    goes. Raises KeyError for a table that is not one."""
    for found in store.stream(conn, f"SELECT {SIDE_CHAINS[table]}, prev_hash, hash FROM {table} ORDER BY id"):
        yield tuple(found)


def webhook_without_delivery(conn: Connection) -> tuple[int, str] | None:
    """(evidence id, webhook id) of the first evidence a webhook brought whose delivery row is gone; None when every
    one has its row."""
    row = conn.run("verify.webhook_without_delivery").fetchone()
    return (int(row[0]), str(row[1])) if row is not None else None


def outbox_present(conn: Connection, ids: list[str]) -> set[str]:
    """Which of `ids` (notification ids, `evt-EVENT-CHANNEL`) the outbox holds, whatever their state; pass a few
    hundred at a time (each is one parameter)."""
    if not ids:
        return set()
    marks = ", ".join([conn.PARAM] * len(ids))
    return {str(row[0]) for row in conn.execute(f"SELECT event_id FROM outbox WHERE event_id IN ({marks})", ids)}


def handled_present(conn: Connection, ids: list[int]) -> set[int]:
    """Which of `ids` (evidence ids) have their evidence_handled row; pass a few hundred at a time."""
    if not ids:
        return set()
    marks = ", ".join([conn.PARAM] * len(ids))
    return {int(row[0]) for row in conn.execute(
        f"SELECT evidence_id FROM evidence_handled WHERE evidence_id IN ({marks})", ids)}


def deliveries_since(conn: Connection, since: float) -> Iterator[evidence_store.Delivery]:
    """Every webhook delivery received at or after `since` (epoch seconds), by time, read as it goes."""
    for row in conn.run("verify.deliveries_since", (since,)):
        yield evidence_store.Delivery.from_row(row)
