"""Following the event log by id cursor: every committed event is read exactly once, in order, promptly.

Why an id cursor cannot skip: SQLite has one writer at a time and assigns an event's id inside that
writer's transaction, so once a reader has seen id N, every event with a lower id was committed before
it; none can appear later below the cursor. What can skip is the *wake-up*. `PRAGMA data_version` moves
when another connection commits; a follower that reads the events first and takes the version after
counts a commit landing between the two as seen although its events were not read, and then nothing
wakes it until some later commit. So `EventCursor` takes the version *before* it reads, reads again
whenever the version moved, keeps reading while a page comes back full, and reads again every
`recheck_seconds` regardless, so a wake-up is never the only road to an event. Every statement runs in
autocommit mode, so no read snapshot outlives one query.

On PostgreSQL the same holds: every event is appended under the audit chain's advisory lock, which is
held until the transaction has committed, so ids become visible in order and none can appear later
below the cursor (tests/system/test_postgres.py holds a writer open mid-append to prove it). The wake-up is a
NOTIFY sent by the event trigger at commit (`ledger.store.wait_for_change`), with the same polling as the fallback.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ledger import store
from ledger.model import Event
from ledger.store import Connection
from ledger.store import events as events_store

PAGE = 500
RECHECK_SECONDS = 1.0


class EventCursor:
    """Reads the events committed after an id, oldest first, on a connection in autocommit mode."""

    def __init__(
        self, conn: Connection, after: int = 0, *, page: int = PAGE, recheck_seconds: float = RECHECK_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.conn = conn
        self.cursor = after
        """The id of the last event read (0: none yet)."""
        self.version: int | None = None
        """`data_version` as it was just before the last read."""
        self.changed = False
        """Whether the last `poll()` saw another connection's commit (or was the first look)."""
        self.behind = False
        """Whether the last `poll()` stopped at its limit with more events waiting: poll again at once."""
        self.page = page
        self.recheck_seconds = recheck_seconds
        self._monotonic = monotonic
        self._last_read = float("-inf")

    def poll(self, limit: int | None = None) -> list[Event]:
        """The events committed after the cursor, oldest first (at most `limit`), each returned exactly once.

        Reads when another connection committed since the last look, when the last look stopped at its
        limit, or when `recheck_seconds` passed; otherwise returns [] after one cheap pragma.
        """
        version = store.change_token(self.conn)  # before the read: a commit after this moves it again
        self.changed = version != self.version
        now = self._monotonic()
        if not (self.changed or self.behind or now - self._last_read >= self.recheck_seconds):
            return []
        self.version = version
        self._last_read = now
        out: list[Event] = []
        while True:
            want = self.page if limit is None else min(self.page, limit - len(out))
            batch = events_store.events_after(self.conn, self.cursor, limit=want)
            out += batch
            if batch:
                self.cursor = batch[-1].id
            if len(batch) < want:
                self.behind = False
                return out
            if limit is not None and len(out) >= limit:
                self.behind = True
                return out

    def tail(self, n: int) -> list[Event]:
        """Start from the newest `n` events: returns them oldest first and follows on from the newest.

        The version is taken before they are read, so an event committed meanwhile is read by the next poll.
        """
        self.version = store.change_token(self.conn)
        self.changed, self.behind = True, False
        self._last_read = self._monotonic()
        if n <= 0:
            self.cursor = events_store.last_event_id(self.conn)
            return []
        events = list(reversed(events_store.latest_events(self.conn, n)))
        self.cursor = events[-1].id if events else 0
        return events
