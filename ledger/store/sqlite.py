"""The SQLite backend: opening a ledger file (pragmas, schema versions, forward migrations) and its write
transactions (a stepped BEGIN IMMEDIATE under the busy timeout). `ledger.db` chooses between this and
`ledger.store.postgres` by the ledger's name."""

from __future__ import annotations

import errno
import os
import random
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from ledger.errors import (
    LedgerConflict,
    LedgerCorrupt,
    LedgerError,
    LedgerLocked,
    LedgerUnavailable,
    LedgerUnusable,
)
from ledger.files import place_new, unlink_all
from ledger.store import queries

APPLICATION_ID = 0x52434C4D  # "RCLM": marks a SQLite file as a reclaim ledger
BUSY_TIMEOUT_MS = 5000

_V1 = """
CREATE TABLE jobs (
    job_id          TEXT NOT NULL,
    operation       TEXT NOT NULL,
    idem_key        TEXT NOT NULL UNIQUE,
    target          TEXT,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempt         INTEGER NOT NULL DEFAULT 1,
    epoch           INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT,
    lease_until     REAL,
    handle          TEXT,
    quota_day       TEXT NOT NULL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    next_try_at     REAL,
    send_started_at REAL,
    tries           INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    held_reason     TEXT,
    held_at         REAL,
    owner           TEXT,
    due_at          REAL,
    result          TEXT,
    result_at       REAL,
    PRIMARY KEY (job_id, operation)
);
CREATE INDEX jobs_state_updated ON jobs (state, updated_at);
CREATE INDEX jobs_state_created ON jobs (state, created_at);
CREATE INDEX jobs_target_state ON jobs (target, state);

CREATE TABLE quota_usage (
    operation TEXT NOT NULL,
    day       TEXT NOT NULL,
    used      INTEGER NOT NULL,
    PRIMARY KEY (operation, day)
);

CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         REAL NOT NULL,
    job_id     TEXT NOT NULL,
    operation  TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    from_state TEXT,
    to_state   TEXT,
    epoch      INTEGER,
    detail     TEXT NOT NULL DEFAULT '{}',
    UNIQUE (job_id, operation, seq)
);
CREATE INDEX events_job_kind ON events (job_id, operation, kind, id);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

CREATE TABLE fenced_writes (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        REAL NOT NULL,
    job_id    TEXT NOT NULL,
    operation TEXT NOT NULL,
    actor     TEXT NOT NULL,
    event     TEXT NOT NULL,
    epoch     INTEGER,
    detail    TEXT NOT NULL DEFAULT '{}'
);
"""

_V2 = """
CREATE TABLE outbox (
    event_id    TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    operation   TEXT NOT NULL,
    kind        TEXT NOT NULL,
    body        TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL,
    next_try_at REAL,
    tries       INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT
);
CREATE INDEX outbox_state ON outbox (state, created_at);
"""

_V3 = """
CREATE INDEX jobs_state_held ON jobs (state, held_at, created_at);
"""

# Jobs per state, kept by triggers in the same transaction as the change, so the console's live counts
# cost one small read however large the ledger grows.
_V4 = """
CREATE TABLE state_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
);
INSERT INTO state_counts (state, n) SELECT state, COUNT(*) FROM jobs GROUP BY state;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO state_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_count_update AFTER UPDATE OF state ON jobs WHEN OLD.state IS NOT NEW.state
BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
    INSERT INTO state_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
BEGIN
    UPDATE state_counts SET n = n - 1 WHERE state = OLD.state;
END;
"""

_V5 = """
CREATE TABLE saved_views (
    operator   TEXT NOT NULL,
    name       TEXT NOT NULL,
    grp        TEXT NOT NULL,
    filter     TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (operator, name)
);
"""

# Remotes paused because they refuse every job (bad key, permission, billing, region, unknown model).
_V6 = """
CREATE TABLE remote_pauses (
    remote     TEXT PRIMARY KEY,
    paused_at  REAL NOT NULL,
    reason     TEXT NOT NULL,
    error      TEXT,
    job_id     TEXT NOT NULL,
    operation  TEXT NOT NULL,
    probe_at   REAL NOT NULL,
    refusals   INTEGER NOT NULL DEFAULT 1
);
"""

# Evidence: what the remote said about a job, append-only, from a query, a webhook or a fenced outcome.
_V7 = """
CREATE TABLE evidence (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           REAL NOT NULL,
    source       TEXT NOT NULL,
    idem_key     TEXT NOT NULL,
    attempt      INTEGER,
    handle       TEXT,
    remote_state TEXT NOT NULL,
    job_id       TEXT,
    operation    TEXT,
    ref          TEXT,
    detail       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX evidence_idem ON evidence (idem_key, attempt, id);
CREATE INDEX evidence_handle ON evidence (handle);
CREATE INDEX evidence_orphans ON evidence (job_id, id);
CREATE TRIGGER evidence_no_update BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;
CREATE TRIGGER evidence_no_delete BEFORE DELETE ON evidence
BEGIN SELECT RAISE(ABORT, 'evidence is append-only'); END;

CREATE TABLE evidence_handled (
    evidence_id INTEGER PRIMARY KEY,
    at          REAL NOT NULL,
    outcome     TEXT NOT NULL
);

CREATE TABLE webhook_deliveries (
    webhook_id  TEXT PRIMARY KEY,
    received_at REAL NOT NULL,
    signature   TEXT NOT NULL,
    type        TEXT,
    evidence_id INTEGER
);

CREATE TABLE webhook_refusals (
    reason TEXT PRIMARY KEY,
    n      INTEGER NOT NULL
);
"""

# The audit chain: each event carries the previous event's hash and its own. The columns come here; the
# existing events are chained in Python (`_chain_existing`), then the triggers that guard the chain.
_V8 = """
ALTER TABLE events ADD COLUMN prev_hash TEXT;
ALTER TABLE events ADD COLUMN hash TEXT;
DROP TRIGGER events_no_update;
"""

_V8_TRIGGERS = """
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_replace BEFORE INSERT ON events
WHEN EXISTS (SELECT 1 FROM events WHERE id = NEW.id)
  OR EXISTS (SELECT 1 FROM events WHERE job_id = NEW.job_id AND operation = NEW.operation AND seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'events are append-only: an event with this id or sequence exists'); END;
CREATE TRIGGER events_chain BEFORE INSERT ON events
WHEN NEW.hash IS NULL OR length(NEW.hash) != 64
  OR NEW.prev_hash IS NOT (SELECT hash FROM events ORDER BY id DESC LIMIT 1)
BEGIN SELECT RAISE(ABORT, 'the event does not chain to the last one'); END;
"""

# Worker heartbeats: one row per worker process, upserted as it runs (not events: a row a pass would flood
# the audit chain). `last_pass_at` is the later of the pass's start and end, kept for the index.
_V9 = """
CREATE TABLE worker_heartbeats (
    worker_id       TEXT PRIMARY KEY,
    host            TEXT NOT NULL,
    pid             INTEGER NOT NULL,
    version         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    interval_s      REAL,
    started_at      REAL NOT NULL,
    pass_started_at REAL,
    pass_ended_at   REAL,
    last_pass_at    REAL,
    passes          INTEGER NOT NULL DEFAULT 0,
    report          TEXT NOT NULL DEFAULT '{}',
    error           TEXT,
    running         INTEGER NOT NULL,
    stopped_at      REAL,
    updated_at      REAL NOT NULL
);
CREATE INDEX worker_heartbeats_pass ON worker_heartbeats (last_pass_at);
CREATE INDEX worker_heartbeats_updated ON worker_heartbeats (updated_at);
CREATE INDEX worker_heartbeats_running ON worker_heartbeats (running, updated_at);
"""

# Picks: a worker's short reservation of due jobs among workers (ledger.picks), not a change to a job: no
# event, not in the jobs table, so the jobs stay a projection of their events. One row per picked job.
_V10 = """
CREATE TABLE picks (
    job_id       TEXT NOT NULL,
    operation    TEXT NOT NULL,
    worker       TEXT NOT NULL,
    picked_until REAL NOT NULL,
    PRIMARY KEY (job_id, operation)
);
CREATE INDEX picks_worker ON picks (worker);
"""

# The held job blocking a new reservation on its target (reserve()): found by the target among held jobs only,
# already in the order wanted (first held first), instead of every held job scanned and then sorted.
_V11 = """
CREATE INDEX jobs_held_target ON jobs (target, held_at, job_id, operation) WHERE state = 'held';
"""

# A history that cannot be forged (ledger.seal): each event's seal (its job row's digest and the side chains'
# heads) and MAC; evidence and fenced writes hash-chained; fenced writes and webhook deliveries append-only.
_V12 = """
ALTER TABLE events ADD COLUMN seal TEXT;
ALTER TABLE events ADD COLUMN mac TEXT;
ALTER TABLE evidence ADD COLUMN prev_hash TEXT;
ALTER TABLE evidence ADD COLUMN hash TEXT;
ALTER TABLE fenced_writes ADD COLUMN prev_hash TEXT;
ALTER TABLE fenced_writes ADD COLUMN hash TEXT;
CREATE TRIGGER fenced_writes_no_update BEFORE UPDATE ON fenced_writes
BEGIN SELECT RAISE(ABORT, 'fenced_writes are append-only'); END;
CREATE TRIGGER fenced_writes_no_delete BEFORE DELETE ON fenced_writes
BEGIN SELECT RAISE(ABORT, 'fenced_writes are append-only'); END;
CREATE TRIGGER webhook_deliveries_no_update BEFORE UPDATE ON webhook_deliveries
BEGIN SELECT RAISE(ABORT, 'webhook_deliveries are append-only'); END;
CREATE TRIGGER webhook_deliveries_no_delete BEFORE DELETE ON webhook_deliveries
BEGIN SELECT RAISE(ABORT, 'webhook_deliveries are append-only'); END;
"""

# Events of a few kinds in a time window (`reclaim report`: holds, releases, remote queries) found by kind and time
# instead of by a scan of every event.
_V13 = """
CREATE INDEX events_kind_at ON events (kind, at);
"""

# What a pass read of an orphan delivery's interaction (its `created` and `model`, as JSON), kept beside the
# outcome so a held job can list the orphans that could be its own (ledger.candidates); NULL: nothing read.
_V14 = """
ALTER TABLE evidence_handled ADD COLUMN record TEXT;
"""

# Foreign interactions (ledger.foreign): another application's interactions the project webhook delivered, each
# recorded once and counted; not part of any chain, pruned after the configured retention.
_V15 = """
CREATE TABLE foreign_interactions (
    interaction_id TEXT PRIMARY KEY,
    remote         TEXT NOT NULL,
    first_seen     REAL NOT NULL,
    last_seen      REAL NOT NULL,
    deliveries     INTEGER NOT NULL,
    labels         TEXT NOT NULL DEFAULT '{}',
    evidence_id    INTEGER
);
CREATE INDEX foreign_interactions_last_seen ON foreign_interactions (last_seen);
"""

# Version 16 is PostgreSQL's: events appended through a function the operators' and workers' roles may call, not
# by INSERT (ledger.store.postgres). A SQLite ledger's file permissions decide who writes it: nothing changes here.
_V16 = ""

# Each webhook delivery carries its receiver's signature (ledger.signing) over its own content: a row inserted by
# hand no longer makes a real delivery of that id look like a replay.
_V17 = """
ALTER TABLE webhook_deliveries ADD COLUMN proof TEXT;
"""

# Counts kept, not scanned: jobs per operation and state, and events per operation, kind, step and whether the
# reclaim worker wrote them (with how many were recorded from the outcome journal and how many duplicate sends asked
# for a cancel), each kept by one trigger on the events in the transaction that appends them (a job changes state
# only by an event, ledger.transitions); `status`, `metrics` and the console read these few rows however large the
# ledger, and `verify` recounts them. The state counts kept on the jobs table before are folded into them. Every
# full or incremental `verify` that passed is recorded (`verify_passes`), for `status` and `metrics` to say when.
_V18 = """
CREATE TABLE job_counts (
    operation TEXT NOT NULL,
    state     TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (operation, state)
) WITHOUT ROWID;
INSERT INTO job_counts (operation, state, n) SELECT operation, state, COUNT(*) FROM jobs GROUP BY operation, state;
CREATE TABLE event_tallies (
    operation  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    system     INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    journaled  INTEGER NOT NULL,
    cancelled  INTEGER NOT NULL,
    PRIMARY KEY (operation, kind, from_state, to_state, system)
) WITHOUT ROWID;
INSERT INTO event_tallies (operation, kind, from_state, to_state, system, n, journaled, cancelled)
SELECT operation, kind, COALESCE(from_state, ''), COALESCE(to_state, ''), actor = 'reclaim', COUNT(*),
       SUM(instr(detail, '"journaled": ') > 0),
       SUM(CASE WHEN kind = 'duplicate_send' AND json_valid(detail)
                THEN json_extract(detail, '$.cancel') IS NOT NULL ELSE 0 END)
FROM events GROUP BY 1, 2, 3, 4, 5;
CREATE TRIGGER events_count AFTER INSERT ON events
BEGIN
    INSERT INTO event_tallies (operation, kind, from_state, to_state, system, n, journaled, cancelled)
    VALUES (NEW.operation, NEW.kind, COALESCE(NEW.from_state, ''), COALESCE(NEW.to_state, ''),
            NEW.actor = 'reclaim', 1, instr(NEW.detail, '"journaled": ') > 0,
            CASE WHEN NEW.kind = 'duplicate_send' AND json_valid(NEW.detail)
                 THEN json_extract(NEW.detail, '$.cancel') IS NOT NULL ELSE 0 END)
    ON CONFLICT (operation, kind, from_state, to_state, system) DO UPDATE
    SET n = n + 1, journaled = journaled + excluded.journaled, cancelled = cancelled + excluded.cancelled;
    UPDATE job_counts SET n = n - 1
    WHERE NEW.to_state IS NOT NULL AND NEW.from_state IS NOT NULL AND NEW.from_state <> NEW.to_state
      AND operation = NEW.operation AND state = NEW.from_state;
    INSERT INTO job_counts (operation, state, n)
    SELECT NEW.operation, NEW.to_state, 1
    WHERE NEW.to_state IS NOT NULL AND NEW.from_state IS NOT NEW.to_state
    ON CONFLICT (operation, state) DO UPDATE SET n = n + 1;
END;
DROP TRIGGER jobs_count_insert;
DROP TRIGGER jobs_count_update;
DROP TRIGGER jobs_count_delete;
DROP TABLE state_counts;
CREATE TABLE verify_passes (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     REAL NOT NULL,
    scope  TEXT NOT NULL,
    events INTEGER NOT NULL,
    head   TEXT,
    actor  TEXT NOT NULL
);
"""

MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12, _V13, _V14, _V15, _V16,
                         _V17, _V18]

TRIGGERS = frozenset({
    "events_no_update", "events_no_delete", "events_no_replace", "events_chain", "evidence_no_update",
    "evidence_no_delete", "fenced_writes_no_update", "fenced_writes_no_delete", "webhook_deliveries_no_update",
    "webhook_deliveries_no_delete", "events_count",
})
"""The triggers a current ledger has: `verify` names any that is missing."""


def triggers(conn: sqlite3.Connection) -> set[str]:
    """The names of the triggers the ledger file holds."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
SCHEMA_VERSION = len(MIGRATIONS)


def _pragmas(conn: sqlite3.Connection, synchronous: str) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA synchronous = {synchronous}")


_SQLITE_CORRUPT = 11  # SQLite's primary result code for a damaged page or schema


def is_corruption(e: BaseException) -> bool:
    """True when a sqlite3 error says the file's pages or schema are damaged. SQLite reports a damaged page only
    when a statement reads it, as `sqlite3.DatabaseError` ("database disk image is malformed"), not as the
    OperationalError a lock or a full disk gives."""
    if not isinstance(e, sqlite3.DatabaseError):
        return False
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_CORRUPT:
        return True
    text = str(e)
    return "malformed" in text or "corrupt" in text


def corrupt_error(path: str | Path, what: object) -> LedgerCorrupt:
    """The one-line refusal for a corrupt ledger, carrying SQLite's own words."""
    return LedgerCorrupt(
        f"ledger {path}: the ledger file is corrupt ({what}); restore it from a backup; 'reclaim verify' says more",
        damage=str(what),
    )


def ledger_error(e: sqlite3.Error, path: str | Path) -> LedgerError:
    """The ledger's own error for a sqlite3 error met on `path`: locked (8), a write the ledger's rules refuse
    (LedgerConflict), a closed connection (LedgerUnavailable), or unusable (7) saying why: corrupt, not SQLite,
    read-only (the file, or the folder SQLite must make its -wal and -shm files in), cannot be opened, disk full."""
    msg = str(e)
    if isinstance(e, sqlite3.IntegrityError):
        return LedgerConflict(f"ledger {path}: {msg}")
    if isinstance(e, sqlite3.ProgrammingError) and "closed" in msg:
        return LedgerUnavailable(f"ledger {path}: the connection is closed ({msg})")
    if "locked" in msg or "busy" in msg:
        return LedgerLocked(
            f"ledger {path}: locked by another process for more than {BUSY_TIMEOUT_MS // 1000} s; retry later"
        )
    if is_corruption(e):
        return corrupt_error(path, msg)
    if "not a database" in msg or "file is encrypted" in msg:
        return LedgerUnusable(f"ledger {path}: not a SQLite database; point --ledger at a reclaim ledger")
    if "readonly" in msg or "read-only" in msg:
        return LedgerUnusable(f"ledger {path}: the file is read-only; fix its permissions or open it as a viewer")
    if "unable to open" in msg:
        if not os.access(Path(path).parent, os.W_OK):
            return _read_only_dir(Path(path))
        return LedgerUnusable(f"ledger {path}: cannot be opened ({msg}); check the path and permissions")
    if "disk is full" in msg:
        return LedgerUnusable(f"ledger {path}: the disk is full ({msg}); free some space and retry")
    return LedgerUnusable(f"ledger {path}: {msg}")


def _mapped(e: sqlite3.Error, conn: sqlite3.Connection) -> BaseException:
    """What a sqlite3 error met on `conn` leaves the store as: the ledger's own error, except a programming
    error other than a closed connection (wrong bindings, an unsupported parameter type), which is a defect and
    stays as it is."""
    if isinstance(e, (sqlite3.ProgrammingError, sqlite3.InterfaceError)) and "closed" not in str(e):
        return e
    return ledger_error(e, getattr(conn, "ledger_name", "ledger"))


T = TypeVar("T")


class SqliteCursor(sqlite3.Cursor):
    """A cursor whose reads raise the ledger's own errors (a damaged page is met while stepping, not only at
    `execute`)."""

    def fetchone(self) -> Any:
        try:
            return _FETCHONE(self)
        except sqlite3.Error as e:
            raise _mapped(e, self.connection) from None

    def fetchall(self) -> list[Any]:
        try:
            return _FETCHALL(self)
        except sqlite3.Error as e:
            raise _mapped(e, self.connection) from None

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.Error as e:
            raise _mapped(e, self.connection) from None

    def __next__(self) -> Any:
        try:
            return _NEXT(self)
        except sqlite3.Error as e:
            raise _mapped(e, self.connection) from None


# sqlite3's own methods, called directly: every reservation steps a few cursors, and super() costs each a lookup.
_NEXT = sqlite3.Cursor.__next__
_FETCHONE = sqlite3.Cursor.fetchone
_FETCHALL = sqlite3.Cursor.fetchall
_CURSOR = sqlite3.Connection.cursor
_EXECUTE = sqlite3.Cursor.execute
_STATEMENTS: dict[str, str] = {}
"""This backend's named statements (`queries.load("sqlite")`), copied into a plain dict on first use."""


def _statement(name: str) -> str:
    """The text of the named statement; KeyError for a name no file gives."""
    try:
        return _STATEMENTS[name]
    except KeyError:
        _STATEMENTS.update(queries.load("sqlite"))
        return _STATEMENTS[name]


class SqliteConnection(sqlite3.Connection):
    """A ledger file's connection (`ledger.store.Connection`): sqlite3's, except that every database error leaves
    it as the ledger's own (`ledger_error`), named after `ledger_name`."""

    ledger_name: str = "ledger"
    """The ledger as it was named when opened (the path given), for messages."""

    PARAM = "?"
    """One parameter's placeholder in this backend's SQL."""
    LIKE = "LIKE"
    """The pattern match that ignores ASCII case (SQLite's LIKE does)."""
    TEXT_ORDER = ""
    """The collation clause that orders text by its UTF-8 bytes (SQLite's BINARY, the default, already does)."""

    def run(self, name: str, parameters: Any = (), /) -> SqliteCursor:
        """Run the named statement of `ledger/store/sql/sqlite/` (`AREA.NAME`, `ledger.store.queries`). Raises
        KeyError for a name no file gives, else what `execute` raises."""
        return self.execute(_STATEMENTS.get(name) or _statement(name), parameters)  # one dict read per statement

    def sql(self, name: str) -> str:
        """The text of the named statement of `ledger/store/sql/sqlite/` (for a statement streamed, or composed
        with more). Raises KeyError for a name no file gives."""
        return _statement(name)

    def begin_read(self) -> None:
        """Open a read transaction (a deferred BEGIN: its snapshot is taken at the first read; no write lock)."""
        self.execute("BEGIN")

    # -- what differs from PostgreSQL, declared here (ledger.store's functions call these, never branch) ------------
    SERVER_CLOCK = False
    """Leases are judged by the host's clock (one file, one host's processes)."""
    NOTIFIES = False
    """No notification of a commit: a wait for a change polls `change_token`."""

    def write_tx(
        self, *, wait: float | None = None, lock: str | None = None, rows_only: bool = False
    ) -> AbstractContextManager[SqliteConnection]:
        """One BEGIN IMMEDIATE transaction (module `write_tx`); `lock` and `rows_only` change nothing on a file,
        whose one write lock serializes every writer."""
        return _WriteTx(self, wait)

    def lock_chain(self) -> None:
        """Nothing to take: BEGIN IMMEDIATE already gave the right to append to the audit chain."""

    def run_retrying(self, body: Callable[[], T]) -> T:
        """Run `body` once: SQLite aborts no transaction for a serialization failure."""
        return body()

    def change_token(self) -> int:
        """PRAGMA data_version: moves whenever another connection commits to the file."""
        return int(self.execute("PRAGMA data_version").fetchone()[0])

    def wait_change(self, timeout: float) -> bool:
        """No notification comes on SQLite: sleeps `timeout` seconds and returns False."""
        time.sleep(timeout)
        return False

    def stream(self, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Any]:
        """The rows of one SELECT, stepped from the cursor `batch` rows at a time (never held whole)."""
        cur = self.execute(sql, tuple(params))
        while rows := cur.fetchmany(batch):
            yield from rows

    def location(self) -> str:
        """The ledger file's full path (`identity.database`)."""
        return str(self.run("identity.database").fetchone()[0])

    def journal_identity(self) -> str | None:
        """None: the outcome journal sits beside the ledger file, named after its path."""
        return None

    def check_header(self) -> None:
        """The file's header and its schema (module `check_header`)."""
        check_header(self)

    def integrity_problems(self) -> list[str]:
        """Every damaged page or index PRAGMA integrity_check finds, [] when none."""
        return [str(r[0]) for r in self.execute("PRAGMA integrity_check").fetchall() if r[0] != "ok"]

    def integrity_problems_beside(self) -> Callable[[], list[str]]:
        """Start `integrity_problems` on a read-only connection of its own, in a thread (SQLite checks the pages on
        another core while this connection reads on), and return the function that waits for it and gives what
        it found, raising the ledger's own error when the check could not run. It sees the file as committed,
        not this connection's open transaction. A ledger without a file (in memory) is checked here, at once."""
        path = self.location()
        if not path:
            found = self.integrity_problems()
            return lambda: found
        result: list[list[str]] = []
        failed: list[BaseException] = []

        def check() -> None:
            try:
                other = _open(f"file:{quote(path)}?mode=ro", self.ledger_name, uri=True, check_same_thread=False)
                try:
                    other.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                    result.append(other.integrity_problems())
                finally:
                    other.close()
            except Exception as e:  # handed to the waiting thread, which raises it
                failed.append(e)

        worker = threading.Thread(target=check, name="reclaim-integrity-check", daemon=True)
        worker.start()

        def wait() -> list[str]:
            worker.join()
            if failed:
                raise failed[0]
            return result[0]

        return wait

    def missing_triggers(self) -> list[str]:
        """The triggers a current ledger has that this file lacks (dropped), sorted."""
        return sorted(TRIGGERS - triggers(self))

    def ledger_owner(self) -> tuple[str, bool]:
        """(the OS account that owns the file, whether this process runs as it or as root)."""
        import pwd

        uid = os.stat(ledger_path(self)).st_uid
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = f"uid {uid}"
        return name, os.geteuid() in (0, uid)

    def execute(self, sql: str, parameters: Any = (), /) -> SqliteCursor:
        try:
            return _EXECUTE(_CURSOR(self, SqliteCursor), sql, parameters)
        except sqlite3.Error as e:
            raise _mapped(e, self) from None

    def executemany(self, sql: str, parameters: Any, /) -> SqliteCursor:
        try:
            cur = self.cursor(SqliteCursor)
            cur.executemany(sql, parameters)
        except sqlite3.Error as e:
            raise _mapped(e, self) from None
        return cur

    def commit(self) -> None:
        try:
            super().commit()
        except sqlite3.Error as e:
            raise _mapped(e, self) from None

    def rollback(self) -> None:
        try:
            super().rollback()
        except sqlite3.Error as e:
            raise _mapped(e, self) from None

    def close(self) -> None:
        try:
            super().close()
        except sqlite3.Error as e:
            raise _mapped(e, self) from None


def _open(target: str | Path, name: str | Path, **kwargs: Any) -> SqliteConnection:
    """sqlite3.connect as a SqliteConnection (autocommit, rows by index and by name) named `name`; an error
    opening it is the ledger's own."""
    try:
        conn = sqlite3.connect(target, isolation_level=None, factory=SqliteConnection, **kwargs)
    except sqlite3.Error as e:
        raise ledger_error(e, name) from None
    assert isinstance(conn, SqliteConnection)
    conn.ledger_name = str(name)
    conn.row_factory = sqlite3.Row
    return conn


def _check_identity(conn: sqlite3.Connection, path: Path) -> int:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id != APPLICATION_ID:
        try:
            empty = path.stat().st_size == 0
        except OSError:
            empty = False
        if empty:
            raise LedgerUnusable(
                f"ledger {path}: an empty file (0 bytes), not a reclaim ledger; remove it, then run 'reclaim init' "
                "to make the ledger there"
            )
        raise LedgerUnusable(
            f"ledger {path}: a SQLite file that is not a reclaim ledger; point --ledger at a ledger, or at a new "
            "path and run 'reclaim init' there"
        )
    if version > SCHEMA_VERSION:
        raise LedgerUnusable(
            f"ledger {path}: schema version {version} is newer than this reclaim understands "
            f"({SCHEMA_VERSION}); upgrade reclaim"
        )
    return int(version)


def _statements(script: str) -> list[str]:
    """Split a migration into complete statements (trigger bodies keep their inner semicolons)."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete statement in migration: {buf.strip()[:60]!r}")
    return out


def _migrate(conn: sqlite3.Connection, path: Path, from_version: int) -> None:
    if from_version >= SCHEMA_VERSION:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        for i in range(version, SCHEMA_VERSION):
            for stmt in _statements(MIGRATIONS[i]):
                conn.execute(stmt)
            after = AFTER_SCRIPT.get(i + 1)
            if after is not None:
                after(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _chain_existing(conn: sqlite3.Connection) -> None:
    """Hash-chain the events a ledger already holds, in id order (schema version 8)."""
    from ledger.chain import event_hash

    prev: str | None = None
    rows = conn.execute(
        "SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail FROM events "
        "ORDER BY id"
    ).fetchall()
    for row in rows:
        digest = event_hash(prev, *row[1:])
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, row[0]))
        prev = digest


def _chain_then_guard(conn: sqlite3.Connection) -> None:
    """Schema version 8's Python step: chain the events already there, then the triggers that guard the chain
    (they would refuse the chaining's own UPDATEs if they came first)."""
    _chain_existing(conn)
    for stmt in _statements(_V8_TRIGGERS):
        conn.execute(stmt)


AFTER_SCRIPT: dict[int, Callable[[sqlite3.Connection], None]] = {8: _chain_then_guard}
"""Steps that run in Python right after a version's script in MIGRATIONS, keyed by that version."""


def create_ledger(path: str | Path, companions: Callable[[Path], list[Path]] | None = None) -> bool:
    """Create a ledger at `path` (or migrate one forward); return True when a new file was made.

    `companions(path)` makes the files that belong with a new ledger (its outcome journal) and returns those it
    made, removed again when the ledger cannot be made. A new ledger is built under a temporary name in the
    same folder and linked into place only when complete, so a full disk or a crash never leaves a stub that later commands
    would refuse as "not a reclaim ledger"; the temporary files are removed on failure. Refuses, writing
    nothing: a missing or read-only folder, a full disk, a file that is not SQLite, a SQLite file that
    is not a ledger, a ledger of a newer version.
    """
    p = Path(path)
    if not p.parent.is_dir():
        raise LedgerUnusable(f"ledger {p}: folder {p.parent} does not exist; create it first")
    if p.exists():
        conn = connect(p)
        conn.close()
        return False
    if not os.access(p.parent, os.W_OK):
        raise _read_only_dir(p)
    try:
        fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.init-", suffix=".tmp")
    except OSError as e:
        raise _os_error(p, e) from None
    os.close(fd)
    tmp = Path(name)
    made: list[Path] = [tmp, *(Path(f"{tmp}{s}") for s in ("-journal", "-wal", "-shm"))]
    try:
        if companions is not None:
            made.extend(companions(p))  # made by this call: removed again if the ledger cannot be made
        _build(tmp, p)
        if Path(f"{tmp}-wal").exists() and Path(f"{tmp}-wal").stat().st_size:
            raise LedgerUnusable(f"ledger {p}: the new ledger could not be checkpointed; retry 'reclaim init'")
        placed = place_new(tmp, p)
    except OSError as e:
        unlink_all(*made)
        raise _os_error(p, e) from None
    except BaseException:
        unlink_all(*made)
        raise
    unlink_all(*made[1:4])
    if not placed:  # another process made it meanwhile: use theirs
        conn = connect(p)
        conn.close()
        return False
    return True


def _build(tmp: Path, p: Path) -> None:
    """Make a complete, current ledger in the empty file `tmp` (rollback journal while building, then WAL);
    errors name the ledger `p` it is for."""
    conn = _open(tmp, p)
    try:
        _pragmas(conn, "FULL")
        _migrate(conn, p, 0)
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()


def _read_only_dir(p: Path) -> LedgerUnusable:
    return LedgerUnusable(
        f"ledger {p}: the directory {p.parent} is read-only (SQLite needs to create its -wal and -shm files "
        "beside the ledger); make the directory writable, or copy the ledger to a writable one to read it"
    )


def _os_error(p: Path, e: OSError) -> LedgerUnusable:
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return _read_only_dir(p)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return LedgerUnusable(f"ledger {p}: the disk is full ({e.strerror}); free some space and run 'reclaim init' again")
    return LedgerUnusable(f"ledger {p}: cannot be created ({e.strerror}); check the folder {p.parent}")


def connect(
    path: str | Path,
    *,
    readonly: bool = False,
    synchronous: str = "FULL",
    check_same_thread: bool = True,
) -> SqliteConnection:
    """Open an existing ledger: WAL, synchronous=FULL, a 5 s busy timeout, autocommit mode.

    Migrates an older ledger forward (not when read-only). Raises LedgerUnusable with one line when the
    file is missing, not SQLite, not a ledger or too new; nothing is created or written in that case.
    """
    p = Path(path)
    if not p.exists():
        if not p.parent.is_dir():
            raise LedgerUnusable(f"ledger {p}: folder {p.parent} does not exist; create it, then run 'reclaim init'")
        raise LedgerUnusable(f"ledger {p}: not found; run 'reclaim init' or pass --ledger / RECLAIM_LEDGER")
    if not readonly and not os.access(p.parent, os.W_OK) and not os.access(p, os.W_OK):
        raise _read_only_dir(p)  # e.g. a read-only mount: fixing the file's mode would not help
    if not readonly and not os.access(p, os.W_OK):
        raise LedgerUnusable(f"ledger {p}: the file is read-only; fix its permissions or open it as a viewer")
    uri = f"file:{quote(str(p.resolve()))}?mode={'ro' if readonly else 'rw'}"  # quoted: '?', '#', '%' in names
    conn = _open(uri, p, uri=True, check_same_thread=check_same_thread)
    try:
        _pragmas(conn, synchronous)
        version = _check_identity(conn, p)
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            _migrate(conn, p, version)
        elif version < SCHEMA_VERSION:
            conn.close()
            raise LedgerUnusable(
                f"ledger {p}: schema version {version} is older than {SCHEMA_VERSION}; "
                "run 'reclaim init' once to migrate it"
            )
    except BaseException:
        conn.close()
        raise
    return conn


def _begin_immediate(conn: sqlite3.Connection, wait: float | None = None) -> None:
    """BEGIN IMMEDIATE, waiting up to the busy timeout (or `wait` seconds) in short, jittered steps.

    SQLite's own busy handler sleeps up to 100 ms between tries, so under many writers one of them can
    lose the race for seconds. Trying again after 0.5 ms, backing off to at most 8 ms, keeps the worst wait short.
    """
    deadline = time.monotonic() + (BUSY_TIMEOUT_MS / 1000 if wait is None else wait)
    pause = 0.0005
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except LedgerLocked:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(random.uniform(pause / 2, pause))
                pause = min(pause * 1.5, 0.008)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def write_tx(conn: SqliteConnection, *, wait: float | None = None) -> AbstractContextManager[SqliteConnection]:
    """Run the block in one BEGIN IMMEDIATE transaction; commit on success, roll back on any error.

    A lock held past the busy timeout (or `wait` seconds, when given) raises LedgerLocked; a read-only file
    raises LedgerUnusable; a damaged page raises LedgerCorrupt. Other sqlite3 errors (a trigger's refusal)
    propagate as they are.
    """
    return _WriteTx(conn, wait)


class _WriteTx:
    """write_tx's context: a plain class, not a generator, since every write (each reservation) enters one."""

    __slots__ = ("conn", "wait")

    def __init__(self, conn: SqliteConnection, wait: float | None) -> None:
        self.conn = conn
        self.wait = wait

    def __enter__(self) -> SqliteConnection:
        _begin_immediate(self.conn, self.wait)
        return self.conn

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        _end(self.conn, error)
        return False


def _end(conn: sqlite3.Connection, error: BaseException | None) -> None:
    """End write_tx's transaction: COMMIT when the block raised nothing, else ROLLBACK (the block's error then
    propagates as it is). A COMMIT that fails (a lock, a full disk) is rolled back and raised as the ledger's own."""
    if error is None:
        try:
            conn.execute("COMMIT")
        except LedgerError:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def ledger_path(conn: sqlite3.Connection) -> str:
    """The file a connection is attached to."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2])


HEADER_MAGIC = b"SQLite format 3\x00"


def check_header(conn: SqliteConnection) -> None:
    """`ledger.store.check_header` on a SQLite file: its first 100 bytes say SQLite, a page size SQLite can have
    and (when the header's page count is current) a database no longer than the file; the schema reads back.
    Raises LedgerCorrupt naming what is wrong."""
    path = ledger_path(conn)
    try:
        with open(path, "rb") as f:
            header = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise ledger_error(sqlite3.OperationalError(f"unable to open database file: {e.strerror}"), path) from None
    if len(header) < 100 or not header.startswith(HEADER_MAGIC):
        raise corrupt_error(path, "the file header does not say SQLite")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise corrupt_error(path, f"the file header gives an impossible page size ({page_size})")
    pages = int.from_bytes(header[28:32], "big")
    header_current = header[24:28] == header[92:96]  # SQLite's rule for when the in-header size can be trusted
    if header_current and pages * page_size > size:
        raise corrupt_error(path, f"the file is shorter ({size} bytes) than its {pages} pages of {page_size} bytes "
                                  "(truncated)")
    try:  # sqlite3's own execute: the schema's pages, read now rather than by the first statement that needs them
        sqlite3.Connection.execute(conn, "SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        raise ledger_error(e, conn.ledger_name) from None


def loose_permissions(p: Path) -> list[str]:
    """`ledger.store.loose_permissions` for the ledger file `p`: its -wal and -shm files and its folder too (a
    sticky folder that only its group may write is fine), and a folder its group may write without the setgid
    bit."""
    import stat as st

    out: list[str] = []
    for path in (p, Path(f"{p}-wal"), Path(f"{p}-shm"), p.parent):
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if mode & (st.S_IWGRP | st.S_IWOTH) and not (path == p.parent and mode & st.S_ISVTX and not mode & st.S_IWOTH):
            who = "group and others" if mode & st.S_IWGRP and mode & st.S_IWOTH else (
                "others" if mode & st.S_IWOTH else "its group")
            out.append(f"{path} is writable by {who} (mode {st.S_IMODE(mode):o}): anyone who can write it can edit "
                       f"the ledger around reclaim; chmod go-w {path} and let operators act through the CLI")
    shared = p.absolute().parent
    try:
        folder = shared.stat().st_mode
    except OSError:
        folder = 0
    if folder & st.S_IWGRP and not folder & st.S_ISGID:
        out.append(f"{shared} is shared with its group (mode {st.S_IMODE(folder):o}) but not setgid: the -wal "
                   "and -shm files SQLite makes there take the group of the account that makes them, and the "
                   f"other accounts then cannot open the ledger (exit 7); chmod g+s {shared}")
    return out
