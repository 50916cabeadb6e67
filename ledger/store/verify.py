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


def chain(conn: Connection) -> Iterator[ChainLink]:
    """Every event, by id, as stored (its detail as the stored text), read as it goes."""
    for row in store.stream(conn, conn.sql("verify.chain")):
        yield ChainLink(*row)


def newest_link(conn: Connection) -> ChainLink | None:
    """The newest event as stored (None on an empty ledger): one row, by the primary key's last page."""
    row = conn.run("verify.newest_link").fetchone()
    return ChainLink(*row) if row is not None else None


def job_count(conn: Connection) -> int:
    """How many jobs the jobs table holds (0 when none)."""
    return int(conn.run("verify.job_count").fetchone()[0])


def sealed_columns(conn: Connection) -> Iterator[tuple[Any, ...]]:
    """Every job as (job_id, operation, *the columns of `seal.ROW_COLUMNS` as stored: payload and result as their
    text), by key, read as it goes."""
    cols = ", ".join(seal.ROW_COLUMNS)
    for found in store.stream(conn, f"SELECT job_id, operation, {cols} FROM jobs ORDER BY job_id, operation"):
        yield tuple(found)


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


def outbox_ids(conn: Connection) -> set[str]:
    """The id of every notification in the outbox (`evt-EVENT-CHANNEL`), whatever its state."""
    return {str(row[0]) for row in conn.run("verify.outbox_ids")}


def deliveries_since(conn: Connection, since: float) -> Iterator[evidence_store.Delivery]:
    """Every webhook delivery received at or after `since` (epoch seconds), by time, read as it goes."""
    for row in conn.run("verify.deliveries_since", (since,)):
        yield evidence_store.Delivery.from_row(row)
