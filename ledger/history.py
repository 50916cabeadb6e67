"""The ledger's history as a standalone SQLite file to explore (e.g. in Datasette): `reclaim report --to FILE`.

One row per job, per event, per hold (held at, cause, decided at, how, by whom, time to decision), per decision
and per finding, with typed columns, foreign keys (events, holds, decisions and findings to their job; holds and
decisions to their events; a decision to the hold it ended) and full-text search over findings, decision reasons
and held reasons. An event with no job row (the ledger's own, such as its policy under the pseudo-job `(ledger)` /
`(policy)`) is written with `job` NULL, its job_id and operation naming the pseudo-job. Read from either backend in one read snapshot; built with sqlite-utils in a temporary file in
the destination's folder, then given its name: the file is whole or absent. The ledger keeps its own
connections: sqlite-utils only ever opens the new file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import export
from ledger.config import Config
from ledger.errors import BadInput
from ledger.files import place_new
from ledger.redaction import Redactor
from ledger.report import ending, hold_cause, remote_of
from ledger.store import Connection
from ledger.store import report as q
from ledger.store.metrics import SYSTEM_ACTOR

JOBS: dict[str, type] = {
    "id": int, "job_id": str, "operation": str, "remote": str, "idem_key": str, "target": str, "state": str,
    "attempt": int, "epoch": int, "handle": str, "quota_day": str, "created_at": float, "updated_at": float,
    "tries": int, "last_error": str, "held_reason": str, "held_at": float, "owner": str, "due_at": float,
    "payload": str, "result": str, "result_at": float,
}
EVENTS: dict[str, type] = {
    "id": int, "job": int, "at": float, "job_id": str, "operation": str, "seq": int, "actor": str, "kind": str,
    "from_state": str, "to_state": str, "epoch": int, "detail": str, "hash": str,
}
HOLDS: dict[str, type] = {
    "id": int, "job": int, "operation": str, "remote": str, "held_event": int, "held_at": float, "held_kind": str,
    "cause": str, "held_reason": str, "decided_event": int, "decided_at": float, "how": str, "decided_by": str,
    "decision_reason": str, "time_to_decision_seconds": float,
}
DECISIONS: dict[str, type] = {
    "id": int, "event": int, "job": int, "hold": int, "at": float, "decision": str, "from_state": str,
    "decided_by": str, "by_evidence": int, "reason": str, "verified": int,
}
FINDINGS: dict[str, type] = {
    "id": int, "event": int, "job": int, "at": float, "actor": str, "category": str, "note": str,
}
TABLES = {"jobs": JOBS, "events": EVENTS, "holds": HOLDS, "decisions": DECISIONS, "findings": FINDINGS}
NOT_NULL = {
    "jobs": ("job_id", "operation", "idem_key", "state", "attempt", "epoch", "created_at", "updated_at", "payload"),
    "events": ("at", "job_id", "operation", "seq", "actor", "kind", "detail"),
    "holds": ("job", "operation", "held_event", "held_at", "held_kind", "cause", "how"),
    "decisions": ("event", "job", "at", "decision", "decided_by", "by_evidence"),
    "findings": ("event", "job", "at", "actor"),
}
FOREIGN_KEYS = (
    ("events", "job", "jobs"), ("holds", "job", "jobs"), ("holds", "held_event", "events"),
    ("holds", "decided_event", "events"), ("decisions", "event", "events"), ("decisions", "job", "jobs"),
    ("decisions", "hold", "holds"), ("findings", "event", "events"), ("findings", "job", "jobs"),
)
FULL_TEXT = {"findings": ("category", "note"), "decisions": ("reason",), "holds": ("cause", "held_reason",
                                                                                 "decision_reason")}
BATCH = 2000


@dataclass(frozen=True)
class Written:
    """What went into the history file: rows per table, and the audit head the snapshot saw."""

    path: Path
    rows: dict[str, int]
    events_in_ledger: int
    head_hash: str | None


def check_destination(to: str, *, force: bool, ledger: str | Path) -> Path:
    """The file to write, refused (BadInput, one line, nothing written) when it is empty, a folder, in a folder
    that does not exist, the ledger's own file, or exists without `force`."""
    if not to.strip() or to == "-":
        raise BadInput("--to: give a file name for the history file (e.g. history.db)")
    path = Path(to)
    if path.is_dir():
        raise BadInput(f"--to {to}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise BadInput(f"--to {to}: folder {path.parent} does not exist; create it first")
    if isinstance(ledger, Path) and path.exists() and ledger.exists():
        for own in (ledger, Path(f"{ledger}-wal"), Path(f"{ledger}-shm"), Path(f"{ledger}-journal")):
            if own.exists() and path.resolve() == own.resolve():
                raise BadInput(f"--to {to}: is the ledger's own file; give another name")
    if (path.exists() or path.is_symlink()) and not force:
        raise BadInput(f"--to {to}: already exists; pass --force to replace it, or give another name")
    return path


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def write(conn: Connection, config: Config, dest: Path, *, since: float | None = None,
          until: float | None = None, redactor: Redactor | None = None, replace: bool = False) -> Written:
    """Write the history (the events in `since` <= at < `until`, all without a window, the jobs they touch and
    the holds begun in it) from `conn` to the new SQLite file `dest`; an event with no job row has `job` NULL.
    Every secret `redactor` knows is replaced in the text. Raises BadInput when `dest` exists (and not `replace`)
    or cannot be written; the ledger is only read."""
    import sqlite_utils

    redactor = redactor or Redactor()
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(name)
    rows: dict[str, int] = {}
    try:
        db = sqlite_utils.Database(tmp, execute_plugins=False)
        with export.snapshot(conn) as anchor:
            job_ids: dict[tuple[str, str], int] = {}

            def jobs() -> Iterator[dict[str, Any]]:
                for n, row in enumerate(q.job_rows(conn, since, until), start=1):
                    job_ids[(row["job_id"], row["operation"])] = n
                    yield {"id": n, **row, "remote": remote_of(config, row["operation"])}

            rows["jobs"] = _load(db, "jobs", jobs(), redactor)
            hold_rows = q.holds(conn, since if since is not None else -math.inf, until if until is not None else math.inf)
            end = until if until is not None else math.inf
            hold_of_decision = {h.decided_event_id: h.held_event_id for h in hold_rows
                                if h.decided_event_id is not None and ending(h, end) != "open"}
            decisions: list[dict[str, Any]] = []
            findings: list[dict[str, Any]] = []

            def events() -> Iterator[dict[str, Any]]:
                for row in q.event_rows(conn, since, until):
                    job = job_ids.get((row["job_id"], row["operation"]))
                    if job is not None and (row["kind"] in q.DECISION_KINDS or row["kind"] == q.FINDING_KIND):
                        detail = json.loads(row["detail"])
                        if row["kind"] == q.FINDING_KIND:
                            findings.append({"id": row["id"], "event": row["id"], "job": job, "at": row["at"],
                                             "actor": row["actor"], "category": _text(detail.get("category")),
                                             "note": _text(detail.get("note"))})
                        else:
                            verified = detail.get("verified")
                            decisions.append({
                                "id": row["id"], "event": row["id"], "job": job, "hold": hold_of_decision.get(row["id"]),
                                "at": row["at"], "decision": row["kind"], "from_state": row["from_state"],
                                "decided_by": row["actor"],
                                "by_evidence": int(row["kind"] == "reconcile" and row["actor"] == SYSTEM_ACTOR),
                                "reason": _text(detail.get("reason") or detail.get("note")),
                                "verified": None if verified is None else int(bool(verified)),
                            })
                    yield {**row, "job": job}

            rows["events"] = _load(db, "events", events(), redactor)
            rows["holds"] = _load(db, "holds", (_hold(h, job_ids, config, end) for h in hold_rows), redactor)
            rows["decisions"] = _load(db, "decisions", decisions, redactor)
            rows["findings"] = _load(db, "findings", findings, redactor)
        for table, column, other in FOREIGN_KEYS:
            db[table].add_foreign_key(column, other, "id")  # type: ignore[union-attr]  # tables, not views
        for table, columns in FULL_TEXT.items():
            db[table].enable_fts(list(columns), create_triggers=False)  # type: ignore[union-attr]
        db.index_foreign_keys()
        db.close()
        if replace:
            os.replace(tmp, dest)
        elif not place_new(tmp, dest):
            raise BadInput(f"--to {dest}: appeared while the history was written; give another name")
    except OSError as e:
        raise BadInput(f"--to {dest}: cannot write ({e.strerror or e}); nothing was written under that name") from None
    finally:
        tmp.unlink(missing_ok=True)
    return Written(dest, rows, anchor.events, anchor.head_hash)


def _hold(h: q.HoldRow, job_ids: dict[tuple[str, str], int], config: Config, until: float) -> dict[str, Any]:
    how = ending(h, until)
    decided = how != "open"
    return {
        "id": h.held_event_id, "job": job_ids[(h.job_id, h.operation)], "operation": h.operation,
        "remote": remote_of(config, h.operation), "held_event": h.held_event_id, "held_at": h.held_at,
        "held_kind": h.held_kind, "cause": hold_cause(h.held_kind, h.cause), "held_reason": h.held_reason,
        "decided_event": h.decided_event_id if decided else None, "decided_at": h.decided_at if decided else None,
        "how": how, "decided_by": h.decided_by if decided else None,
        "decision_reason": h.decision_reason if decided else None,
        "time_to_decision_seconds": max(h.decided_at - h.held_at, 0.0) if decided and h.decided_at is not None else None,
    }


def _load(db: Any, table: str, rows: Iterable[dict[str, Any]], redactor: Redactor) -> int:
    """Create `table` with its typed columns, insert `rows` (secrets replaced), then make the columns that always
    hold a value NOT NULL (a transform: SQLite cannot add the constraint in place). Returns the rows written."""
    n = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal n
        for row in rows:
            n += 1
            yield {k: redactor.redact(v) if isinstance(v, str) and redactor else v for k, v in row.items()}

    t = db[table]
    t.create(TABLES[table], pk="id")
    t.insert_all(counted(), batch_size=BATCH)
    t.transform(not_null=set(NOT_NULL[table]))
    return n
