"""Reading the ledger out for others: the jobs (the projection) or the events (the append-only log with
its audit-chain fields), as plain rows in a stable order, streamed, inside one read snapshot that is
anchored to the chain's head.

`snapshot(conn)` opens one read transaction (SQLite: a deferred BEGIN, which needs no write lock and works
on a read-only file; PostgreSQL: REPEATABLE READ) and yields the `Anchor`: the number of events and the
head hash as that snapshot sees them. `job_rows` and `event_rows` then read the same snapshot, so an
export of every event ends exactly at the head it reports, and a job export is one consistent moment.

Rows are dicts of the stored values, in the column order of `JOB_COLUMNS` / `EVENT_COLUMNS`: JSON columns
(a job's payload and result, an event's detail) are the JSON text as stored, because an event's hash is
computed over that exact text (`ledger.chain.event_hash`). Jobs come by (job_id, operation) and events by
id, text ordered by its UTF-8 bytes on both backends, so the same data gives the same rows, in the same
order, from SQLite and from PostgreSQL. Rows are streamed (a stepped SQLite cursor, a server-side
PostgreSQL cursor): a 300k-job ledger is never held in memory.

Filters (`ExportFilter`) reuse the typed job filter (`ledger.model.JobFilter`, the one `reclaim jobs
--filter` takes) and its SQL (`ledger.store.jobs.filter_clause`). For events, the job-level terms (state, target,
typed filter) select the events of the jobs that match them now. The SQL is the store's (`ledger.store.export`);
this module checks a filter and anchors the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ledger import store
from ledger.errors import BadInput
from ledger.model import GROUPS, STATES
from ledger.redaction import Redactor
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import export as export_store
from ledger.store.export import EVENT_COLUMNS, JOB_COLUMNS, ExportFilter

TABLES = {"jobs": JOB_COLUMNS, "events": EVENT_COLUMNS}
"""What can be exported, and its columns."""


@dataclass(frozen=True)
class Anchor:
    """The audit chain's head as the export's snapshot sees it: the anchor to compare with `reclaim verify`."""

    events: int
    head_hash: str | None


def parse_states(values: Iterable[str]) -> tuple[str, ...]:
    """States from `--state` values: a state or a console group (resolved = rejected + remediated), several
    comma-separated or repeated; sorted, without repeats. BadInput naming an unknown one and the known."""
    out: set[str] = set()
    for value in values:
        for word in (w.strip() for w in value.split(",")):
            if word in STATES:
                out.add(word)
            elif word in GROUPS:
                out.update(GROUPS[word])
            else:
                raise BadInput(f"state {word!r}: unknown (states: {', '.join(STATES)}; or the group resolved)")
    return tuple(sorted(out))


def check_filter(table: str, flt: ExportFilter) -> None:
    """BadInput, one line, for a filter that cannot apply: an unknown table, `after_id` on jobs, a time
    window that ends before it starts."""
    if table not in TABLES:
        raise BadInput(f"export {table!r}: unknown; export jobs or events")
    if flt.after_id is not None and table != "events":
        raise BadInput("--after: an event id, for events only; for jobs use --since")
    if flt.after_id is not None and flt.after_id < 0:
        raise BadInput(f"--after {flt.after_id}: must be an event id, 0 or more")
    if flt.since is not None and flt.until is not None and flt.until <= flt.since:
        raise BadInput("--until: must be later than --since")


@contextmanager
def snapshot(conn: Connection) -> Iterator[Anchor]:
    """Run the block in one read transaction (nothing written, no write lock taken) and yield the audit head
    that transaction sees; `job_rows` / `event_rows` called inside read the same snapshot."""
    with store.read_snapshot(conn):
        count, head_hash = events_store.head(conn)
        yield Anchor(count, head_hash)


def job_rows(conn: Connection, flt: ExportFilter | None = None) -> Iterator[dict[str, Any]]:
    """Every job `flt` selects, by (job_id, operation) in UTF-8 byte order, as {column: stored value}
    (`JOB_COLUMNS`; payload and result as stored JSON text). Streamed; `created_at` is what --since/--until
    bound. Call inside `snapshot` for one consistent moment. BadInput for a filter that cannot apply."""
    f = flt or ExportFilter()
    check_filter("jobs", f)
    yield from export_store.job_rows(conn, f)


def event_rows(conn: Connection, flt: ExportFilter | None = None) -> Iterator[dict[str, Any]]:
    """Every event `flt` selects, by id, as {column: stored value} (`EVENT_COLUMNS`, with prev_hash and hash;
    detail as the stored JSON text, the text its hash covers). Job-level terms (states, target, typed) pick
    the events of the jobs matching them now. Streamed; call inside `snapshot`, whose head the last event of
    an unfiltered export is. BadInput for a filter that cannot apply."""
    f = flt or ExportFilter()
    check_filter("events", f)
    yield from export_store.event_rows(conn, f)


def rows(conn: Connection, table: str, flt: ExportFilter | None = None) -> Iterator[dict[str, Any]]:
    """`job_rows` or `event_rows`, by the table's name ('jobs' or 'events'); BadInput for another name."""
    check_filter(table, flt or ExportFilter())
    return job_rows(conn, flt) if table == "jobs" else event_rows(conn, flt)


def redacted(row: dict[str, Any], redactor: Redactor) -> tuple[dict[str, Any], bool]:
    """`row` with every secret `redactor` knows replaced by `[redacted:NAME]` in its text values, and whether
    anything was replaced (an event so changed no longer hashes to its stored `hash`)."""
    if not redactor:
        return row, False
    out = {k: redactor.redact(v) if isinstance(v, str) else v for k, v in row.items()}
    return out, out != row
