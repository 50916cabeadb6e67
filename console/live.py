"""What the console reads and writes: the ledger's `Ledger`, from worker threads.

`LedgerSource` names the ledger and hands each unit of work its own connection (sqlite connections are
per-thread); the app wraps it in a `Ledger` for one read or one operator action (`ReclaimApp.ledger`).
`Follower` keeps one dedicated `Ledger` for the live loop: it polls the ledger's change token (cheap), reads the
new events by id cursor when it moved (and every second regardless), and with a change the live figures (the
group counts, the workers, the paused remotes). `perform()` runs one operator action and says what happened.
None of this touches Textual, so it is safe to call from any thread.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from console.times import when
from ledger import (
    GROUPS,
    Clock,
    Config,
    Connection,
    Event,
    EventCursor,
    JobKey,
    Ledger,
    LedgerError,
    LiveFigures,
    Liveness,
    Refused,
    RemoteStatus,
    WorkerBoard,
    close_quietly,
    connect,
    get_action,
    is_url,
    span,
)
from ledger import clock_time as clock_time  # the screens take the time format from here too
from ledger import parse_due as parse_due_text

if TYPE_CHECKING:
    from ledger import RemoteCache  # built by the app on the first action that asks a remote (ledger.worker)

T = TypeVar("T")

FEED_SIZE = 20
PAGE_SIZE = 50
READ_ONLY_REASON = "the console is read-only (--read-only): no action can be taken"


class LedgerSource:
    """Where the console reads from: the ledger path, read-only or not, and a fresh connection per unit of work."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path: Path | str = str(path) if is_url(path) else Path(path)
        self.read_only = read_only

    def connect(self) -> Connection:
        """A new connection for the calling thread (read-only when the console is)."""
        return connect(self.path, readonly=self.read_only)

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for one read, closed afterwards."""
        conn = self.connect()
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A read-write connection for one operator action; refused in a read-only console."""
        if self.read_only:
            raise Refused(READ_ONLY_REASON)
        conn = connect(self.path)
        try:
            yield conn
        finally:
            conn.close()


# -- calls that may block for seconds ----------------------------------------------------------------------


class Abandoned(Exception):
    """A detached call was given up on: its worker was cancelled (the console is quitting, or moved on)."""


def detached(fn: Callable[[], T], cancelled: Callable[[], bool], *, name: str, poll: float = 0.05) -> T:
    """Run `fn` on a daemon thread and wait for it; raise Abandoned as soon as `cancelled()` is true.

    For a call that can block for seconds (a remote query, a locked ledger): the Textual worker waiting here
    returns as soon as it is cancelled, and quitting never joins the daemon thread. An abandoned call either
    dies with the process or, if the process lives on, completes and writes what it would have written.
    """
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the waiting worker
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    while not done.wait(poll):
        if cancelled():
            raise Abandoned(f"{name}: given up (the console quit or moved on)")
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


# -- the live loop -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pulse:
    """What the follower saw change: the counts now, the events since the last pulse, and when."""

    version: int
    counts: dict[str, int]
    events: list[Event]
    seen_at: float
    reset: bool = False
    paused_remotes: tuple[str, ...] = ()  # remotes that refuse every job: nothing is sent to them
    head_hash: str | None = None  # the newest event's hash: the audit chain's head, to compare with a kept copy
    awaiting_me: int | None = None  # held jobs awaiting the operator's approval (None: not an approver)

    def touches(self, key: JobKey) -> bool:
        """True when this pulse may concern the job `key` (any new event for it, or a full reload)."""
        return self.reset or any(e.job_id == key.job_id and e.operation == key.operation for e in self.events)

    def touches_group(self, group: str) -> bool:
        """True when this pulse may change a list of `group`'s jobs (a job moved into, out of or within it)."""
        states = GROUPS.get(group, ())
        return self.reset or any(e.from_state in states or e.to_state in states for e in self.events)


class Follower:
    """Follows a ledger through one dedicated `Ledger` (its own connection), used only by the live worker's thread.

    Every event committed after the follower first looked reaches exactly one pulse, in id order, within one
    poll (`ledger.follow.EventCursor`): a burst arrives over as many pulses as it takes, never skipped, and a
    reconnect to the same file carries on from the cursor. Only a different file (replaced under us) starts
    over from its newest events with a reset pulse.
    """

    def __init__(
        self, source: LedgerSource, config: Config, clock: Clock, feed_size: int = FEED_SIZE, *,
        awaiting: Callable[[Ledger], int | None] | None = None,
    ) -> None:
        self.source = source
        self.config = config
        """The figures each pulse carries are read under it (`Ledger.live_figures`: today's quota by its time zone)."""
        self.awaiting = awaiting
        """Counts the held jobs awaiting the operator's approval, with each change (None: not counted)."""
        self.clock = clock
        self.feed_size = feed_size
        self.silence_seconds = config.policy.worker_silence_seconds
        self._board: WorkerBoard | None = None
        self.max_events = feed_size * 50
        """The most events one pulse carries; the rest follow in the next polls at once."""
        self._ledger: Ledger | None = None
        self._inode: tuple[int, int] | None = None
        self._events: EventCursor | None = None
        self._head: str | None = None

    def _identity(self) -> tuple[int, int]:
        if is_url(self.source.path):
            return (0, 0)  # a database, not a file that can be replaced under us
        st = os.stat(self.source.path)
        return (st.st_dev, st.st_ino)

    @property
    def behind(self) -> bool:
        """True when the last pulse stopped at `max_events` with more waiting: poll again without a pause."""
        return self._events is not None and self._events.behind

    def close(self) -> None:
        """Drop the connection; the next poll reconnects (and carries on from the cursor on the same file)."""
        if self._ledger is not None:
            close_quietly(self._ledger.conn)
        self._ledger = None

    def poll(self) -> Pulse | None:
        """One cheap look: None when nothing changed; raises LedgerError (a database error as the ledger's own:
        locked, corrupt, unusable) or OSError when it cannot read."""
        try:
            identity = self._identity()
        except FileNotFoundError:
            self.close()
            raise LedgerError(f"ledger {self.source.path}: the file is gone; waiting for it to come back") from None
        if self._ledger is not None and identity != self._inode:
            self.close()  # replaced under us: start over on the new file
        if self._ledger is None:
            self._ledger = Ledger(self.source.path, self.source.connect(), self.config, self.clock)
            same_file = identity == self._inode and self._events is not None
            self._inode = identity
            if not same_file or self._events is None or self._ledger.last_event_id() < self._events.cursor:
                return self._reload()
            self._events = self._ledger.events(self._events.cursor)  # carry on where the last connection left
        assert self._events is not None
        events = self._events.poll(limit=self.max_events)
        if not events and not self._events.changed:
            return None
        figures = self._figures()
        if events:
            self._head = events[-1].hash
        version = self._events.version or 0
        return Pulse(version, figures.groups(), events, self.clock.now(), paused_remotes=tuple(sorted(
            figures.paused_remotes)), head_hash=self._head, awaiting_me=self._awaiting())

    def _reload(self) -> Pulse:
        assert self._ledger is not None
        self._events = self._ledger.events()
        events = self._events.tail(self.feed_size)
        figures = self._figures()
        self._head = events[-1].hash if events else None
        return Pulse(self._events.version or 0, figures.groups(), events, self.clock.now(), reset=True,
                     paused_remotes=tuple(sorted(figures.paused_remotes)), head_hash=self._head,
                     awaiting_me=self._awaiting())

    def _figures(self) -> LiveFigures:
        """The ledger's live figures (what `reclaim status` and `reclaim metrics` show), kept for `workers()`."""
        assert self._ledger is not None
        figures = self._ledger.live_figures()
        self._board = figures.board
        return figures

    def _awaiting(self) -> int | None:
        assert self._ledger is not None
        return self.awaiting(self._ledger) if self.awaiting is not None else None

    def wait(self, seconds: float, wake: threading.Event) -> None:
        """Until the next poll is worth it: `seconds`, cut short by `wake` (our own write) or, on PostgreSQL,
        by the NOTIFY a commit sends (polling stays the fallback)."""
        if self._ledger is None:
            wake.wait(seconds)  # nothing to listen on until the next poll connects
        else:
            self._ledger.wait_for_change(seconds, wake)

    def workers(self) -> Liveness | None:
        """The workers' liveness now, judged from the heartbeats read with the last change (no read here: silence
        grows with time alone); None before the first read."""
        return None if self._board is None else self._board.liveness(self.clock.now(), self.silence_seconds)


# -- read models ---------------------------------------------------------------------------------------------


class PageRequest(NamedTuple):
    """Which page of which group a job list asks for."""

    group: str
    offset: int
    oldest_first: bool
    filter_text: str
    page_size: int = PAGE_SIZE
    sort: str = "age"
    """The key the page is ordered by (`ledger.SORTS`); `oldest_first` is then ascending."""


# -- operator actions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActionInput:
    """What the operator typed for an action."""

    category: str = ""
    note: str = ""
    handle: str = ""
    owner: str = ""
    due: str = ""

    def fields(self) -> dict[str, str]:
        """The input under the action table's field names: the one note box is a finding's note, a decision's
        reason and a remediation's note."""
        return {"category": self.category, "note": self.note, "reason": self.note, "handle": self.handle,
                "owner": self.owner, "due": self.due}


def parse_due(text: str, now: float, tz: str = "UTC") -> float:
    """A due time in 1970..9999, by the ledger's one parser: '30m', '4h', '2d' from now, 'tomorrow 09:00' in `tz`,
    or epoch seconds / ISO-8601 (naive is UTC); else BadInput."""
    return parse_due_text(text, now, tz)


def check_input(action: str, given: ActionInput) -> str | None:
    """What the operator must still type for `action` (the action table's first missing field, in its words), or
    None."""
    missing = get_action(action).missing(given.fields())
    return None if missing is None else missing.ask


def describe_input(action: str, given: ActionInput) -> list[str]:
    """The operator's own words for the confirmation, one line per field the action table requires (shown
    literally)."""
    return get_action(action).describe(given.fields())


def perform(ledger: Ledger, remotes: RemoteCache, key: JobKey, action: str, given: ActionInput, *, actor: str) -> str:
    """Run one operator action through the ledger (`Ledger.take`, the CLI's path too); return what happened.
    Raises Refused / BadInput, writing nothing."""
    fields: dict[str, Any] = dict(given.fields())
    if action == "assign":
        fields["due"] = parse_due(given.due, ledger.clock.now(), ledger.config.timezone)
    remote = remotes.for_operation(key.operation) if action in ("query", "reconcile") else None
    result = ledger.take(key, action, fields, actor=actor, remote=remote)
    if isinstance(result, RemoteStatus):
        said = result.error or (f"handle {result.handle}" if result.handle else "")
        return f"remote says {result.state}" + (f": {said}" if said else "")
    if action == "release":
        attempt = result.job.attempt if result.job else "?"
        return f"released: attempt {attempt} will be sent once by the next worker pass"
    return {
        "finding": f"finding recorded: {given.category}",
        "assign": f"assigned to {given.owner}, due {when(fields['due'], ledger.clock.now(), ledger.config.timezone)}",
        "reconcile": f"reconciled with handle {given.handle} (verified with the remote): submitted, nothing sent",
        "reject": "rejected: closed without re-sending",
        "remediate": "remediated: closed as done by other means",
    }[action]


# -- formatting helpers (plain strings from trusted numbers) ------------------------------------------------


def age(seconds: float) -> str:
    """A short age: 45s, 12m, 3h 05m, 2d 04h; 'invalid' for a span no two valid times have (inf, nan, 1e20)."""
    return span(seconds)


