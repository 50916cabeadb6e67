"""The storage seam: which backend a ledger lives on, and what differs between them.

A ledger is a SQLite file (a path) or a PostgreSQL database (a `postgresql://` URL). The rules (reserve,
transitions, leases, triage, outbox) reach it through the named operations of this package's modules
(`jobs`, `events`, `evidence`, ...), written once against `Connection`, the interface both backends give. Each
backend owns its SQL: the fixed statements are its own `.sql` files (`ledger/store/sql/BACKEND/`, run by name,
`ledger.store.queries`), and a statement shaped by its input is composed from what the connection declares
(`PARAM`, `LIKE`, `TEXT_ORDER`). What else differs is declared by each connection class (`SqliteConnection`,
`PgConnection`) and called by the functions here, never branched on: how a write transaction starts (BEGIN
IMMEDIATE vs an advisory lock), the clock leases are measured by, how a change is noticed (data_version vs
LISTEN/NOTIFY), what is checked on the way in and how the pages are checked, who owns the ledger. Only this package knows a database: each backend
raises the ledger's own errors (`ledger.errors`: locked, corrupt, unavailable, unusable, conflict), never its
driver's.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ledger.clock import Clock, SystemClock

T = TypeVar("T")

PG_SCHEMES = ("postgresql://", "postgres://")


class Row(Protocol):
    """One result row, readable by position and by column name."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """The result of one statement: its rows (readable by index and by column name), `rowcount`, and
    `lastrowid` after an insert."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A ledger connection, as `ledger.db.connect` opens it, whichever the backend. In autocommit mode:
    `ledger.db.write_tx` opens a write transaction, `begin_read()` a read snapshot. Every method raises
    the ledger's own errors (LedgerLocked, LedgerCorrupt, LedgerUnavailable, LedgerUnusable, LedgerConflict)."""

    ledger_name: str
    """The ledger as it was named when opened (a path, or a URL), for messages."""

    PARAM: str
    """One parameter's placeholder in the backend's SQL ("?" on SQLite, "%s" on PostgreSQL), for a statement a
    store module composes (a page's filter); the fixed ones are the backend's own files (`run`)."""
    LIKE: str
    """The pattern match that ignores ASCII case ("LIKE" on SQLite, "ILIKE" on PostgreSQL)."""
    TEXT_ORDER: str
    """The collation clause that orders text by its UTF-8 bytes on the backend ("" or ' COLLATE "C"')."""

    def run(self, name: str, parameters: Any = (), /) -> Cursor:
        """Run the backend's statement `name` (`AREA.NAME` of `ledger/store/sql/BACKEND/AREA.sql`)."""
        ...

    def sql(self, name: str) -> str:
        """The text of the backend's statement `name` (to stream it, or compose it with more)."""
        ...

    def begin_read(self) -> None:
        """Open a read transaction on one snapshot (no write lock)."""
        ...

    # What differs between the backends, each declared by its connection class; the functions below call these.
    SERVER_CLOCK: bool
    """True when leases are judged by the database server's clock (PostgreSQL: hosts share it)."""
    NOTIFIES: bool
    """True when a commit is notified (PostgreSQL's NOTIFY); else a wait for a change polls the token."""

    def write_tx(
        self, *, wait: float | None = None, lock: str | None = None, rows_only: bool = False
    ) -> AbstractContextManager[Any]:
        """One write transaction (`ledger.db.write_tx`)."""
        ...

    def lock_chain(self) -> None:
        """Inside a write transaction, wait for the right to append to the audit chain."""
        ...

    def run_retrying(self, body: Callable[[], T]) -> T:
        """Run `body` again when the backend aborted it for a serialization failure (`retrying`)."""
        ...

    def change_token(self) -> int:
        """A number that moves whenever another connection commits."""
        ...

    def wait_change(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a commit's notification; True when one came."""
        ...

    def stream(self, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Any]:
        """The rows of one SELECT, never held in memory whole."""
        ...

    def location(self) -> str:
        """Where the ledger lives, for messages."""
        ...

    def journal_identity(self) -> str | None:
        """What this host's outcome journal is named after when it cannot sit beside the ledger (PostgreSQL: the
        database's identity, the same whichever URL reaches it); None when the journal is named after `location()`."""
        ...

    def check_header(self) -> None:
        """Check what the backend can check at once on the way in (`check_header`)."""
        ...

    def integrity_problems(self) -> list[str]:
        """Every damage the backend's full check finds."""
        ...

    def integrity_problems_beside(self) -> Callable[[], list[str]]:
        """Start the full check beside this connection; the function that waits for its problems
        (`integrity_problems_beside`)."""
        ...

    def missing_triggers(self) -> list[str]:
        """The triggers a current ledger must have that this one lacks, sorted."""
        ...

    def ledger_owner(self) -> tuple[str, bool]:
        """(who owns the ledger, whether this process is that owner or a superuser)."""
        ...

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...


def is_url(ledger: str | Path) -> bool:
    """True when `ledger` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(ledger, str) and ledger.startswith(PG_SCHEMES)


def shown_ledger(ledger: str | Path) -> str:
    """How to print a ledger's name: the path, or the URL with any password replaced by ***."""
    import re

    return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", str(ledger))


class DbClock:
    """The database server's clock: every host that shares a PostgreSQL ledger measures leases by it."""

    def __init__(self, conn: Connection, host: Clock | None = None) -> None:
        self.conn = conn
        self.host: Clock = host if host is not None else SystemClock()
        """This process's own clock, for what must be timed when the server cannot answer (host_clock)."""

    def now(self) -> float:
        """Seconds since the epoch by the server's clock (clock_timestamp(), not the transaction start)."""
        row = self.conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        return float(row[0])


def ledger_clock(conn: Connection, clock: Clock) -> Clock:
    """The clock to judge leases by on `conn`: the server's for PostgreSQL when `clock` is the host's wall
    clock (unshifted), else `clock` itself (tests' manual clocks, a deliberately shifted clock, SQLite)."""
    if conn.SERVER_CLOCK and type(clock) is SystemClock and clock.offset == 0.0:
        return DbClock(conn)
    return clock


def host_clock(clock: Clock) -> Clock:
    """The process's own clock behind `clock`: a DbClock's host clock, else `clock` itself. For what is written
    outside the ledger when it may be down (the outcome journal): a stopped server has no clock."""
    return clock.host if isinstance(clock, DbClock) else clock


def stream(conn: Connection, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Any]:
    """Yield the rows of one SELECT without holding the whole result in memory: SQLite steps its cursor,
    PostgreSQL reads a server-side cursor `batch` rows at a time (inside the open transaction)."""
    return conn.stream(sql, params, batch)


@contextmanager
def read_snapshot(conn: Connection) -> Iterator[None]:
    """Run the block in one read transaction: every read inside sees the same snapshot, nothing is written and no
    write lock is taken (SQLite: a deferred BEGIN, which works on a read-only file; PostgreSQL: REPEATABLE READ).
    It is rolled back at the end (a read has nothing to keep, and a read-only file takes no COMMIT either). Raises
    the ledger's own error when the ledger cannot be read."""
    conn.begin_read()
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def missing_triggers(conn: Connection) -> list[str]:
    """The triggers a current ledger must have that this one lacks (dropped, or disabled on PostgreSQL), sorted."""
    return conn.missing_triggers()


def lock_chain(conn: Connection) -> None:
    """Inside a write transaction, wait for the right to append to the audit chain.

    SQLite's BEGIN IMMEDIATE already gives it; on PostgreSQL a transaction-scoped advisory lock, so the
    hash chain and the per-job sequence numbers are read and extended by one transaction at a time.
    """
    conn.lock_chain()


def retrying(conn: Connection, body: Callable[[], T]) -> T:
    """Run `body` (which opens its own write transaction) again when PostgreSQL aborted it for a
    serialization failure or a deadlock, a few times with a short jittered pause; once on SQLite."""
    return conn.run_retrying(body)


def change_token(conn: Connection) -> int:
    """A number that moves whenever another connection commits to the ledger (SQLite's data_version; on
    PostgreSQL a digest of the server's current snapshot). Cheap: for polling between reads."""
    return conn.change_token()


CHANGE_POLL_SECONDS = 0.05
"""How often a wait for a change looks at the change token (one cheap statement), and how long a PostgreSQL
wait for a notification lasts between looks at `wake`."""


def wait_for_change(
    conn: Connection | None, seconds: float, wake: threading.Event | None = None, *, since: int | None = None,
) -> bool:
    """Wait until another connection commits to the ledger: at most `seconds`, less when `wake` is set.

    True as soon as a commit is seen: the change token moved from `since` (take it before the read whose result
    the wait should outdate, so a commit in between is not missed), or on PostgreSQL a NOTIFY from the event
    trigger (every appended event sends one). False when the
    time ran out or `wake` was set first. With no connection (the ledger cannot be read), or on SQLite without
    `since` (a follower whose next read looks at the token itself, and must not block on a locked file between
    reads), it only waits. Raises the ledger's own error when the ledger cannot be read.
    """
    deadline = time.monotonic() + seconds
    if conn is None or (since is None and not conn.NOTIFIES):
        if wake is None:
            time.sleep(seconds)
        else:
            wake.wait(seconds)
        return False
    while True:
        if since is not None and change_token(conn) != since:
            return True
        left = deadline - time.monotonic()
        if left <= 0 or (wake is not None and wake.is_set()):
            return False
        step = left if wake is None and since is None else min(left, CHANGE_POLL_SECONDS)
        if conn.NOTIFIES:
            if conn.wait_change(step):
                return True
        elif wake is not None:
            if wake.wait(step):
                return False
        else:
            time.sleep(step)


def ledger_file(conn: Connection) -> str:
    """Where the ledger lives: the SQLite file's full path, or the PostgreSQL URL with any password hidden."""
    return conn.location()


def loose_permissions(ledger: str | Path) -> list[str]:
    """Warnings, one per file, for a SQLite ledger whose file, -wal, -shm or folder others than its owner may write
    (anyone who can write them can edit the ledger around reclaim), and one, with the `chmod g+s` that mends it,
    when its folder is shared with its group without the setgid bit (the -wal and -shm files would take their
    maker's group and shut the other accounts out). [] for PostgreSQL (its server owns the files)."""
    if is_url(ledger):
        return []
    from ledger.store.sqlite import loose_permissions as sqlite_loose_permissions

    return sqlite_loose_permissions(Path(ledger))


def check_header(conn: Connection) -> None:
    """Check, at once and never by walking the whole ledger, what the backend can: on SQLite the file's header (its
    magic, a valid page size, a file at least as long as the header says) and that the schema reads back; on
    PostgreSQL nothing (the server checks its own pages as it reads them). Raises LedgerCorrupt naming the damage.
    Every page is checked by `integrity_problems` (`reclaim verify`)."""
    conn.check_header()


def integrity_problems(conn: Connection) -> list[str]:
    """Every damaged page or index the backend's full check finds (SQLite's integrity_check), [] when none; on
    PostgreSQL [] (the server checks its own pages). Raises the ledger's own error when the check cannot run."""
    return conn.integrity_problems()


def integrity_problems_beside(conn: Connection) -> Callable[[], list[str]]:
    """Start `integrity_problems` on a connection of its own (SQLite: a read-only one, in a thread, so the pages
    are checked on another core while `conn` reads on) and return the function that waits for it and returns
    its problems, or raises the ledger's own error when the check cannot run. The check sees the database as
    committed, not `conn`'s open transaction; on PostgreSQL it returns [] at once."""
    return conn.integrity_problems_beside()
