"""The writers' queue: processes writing one ledger take a ticket and go in turn, then BEGIN IMMEDIATE.

SQLite's busy handler polls: a writer that finds the ledger locked sleeps and tries again, so under
many writers one of them can lose the race again and again. Here a writer first takes a ticket from
the sidecar file `<ledger>.writers` (a counter in its first 8 bytes) and, in the same step, locks the
byte of its ticket's slot; it then waits, in the kernel, for the byte of the ticket before it to be
let go, and lets its own go after its COMMIT or ROLLBACK. Tickets go in the order they were taken
and each release wakes only the next writer. The wait is bounded by the caller's deadline (the busy
timeout), after which the writer gives up as before (LedgerLocked, exit 8).

A writer alone needs no ticket. The sidecar's first 16 bytes, mapped into memory, hold the tickets handed
out and the tickets done: when they are equal, nobody is writing or waiting, so the writer locks the sidecar's
byte ALONE (one system call, not waiting) and, when nobody took a ticket meanwhile, goes straight to BEGIN
IMMEDIATE; it lets the byte go after its COMMIT or ROLLBACK. Of two writers finding nobody at the same moment,
the lock lets one through; the other takes a ticket. The next writer takes a ticket and leaves the turn to the
one holding ALONE for as long as it holds it: one that lost SQLite's lock to the queue would wait in SQLite's
busy handler, whose sleeps grow to 100 ms, while queued writers went on one after another (turns held 0.3-0.5 s
were seen under 16 writers). The OS lets the byte of a killed writer go. The counters only choose between the
two ways in: a stale or torn value costs order, never safety.

A writer writing in a loop keeps its turn for up to STREAK turns in a row, and STREAK_SECONDS in all, while
others wait. When it lets go with someone waiting and it came back within LINGER_SECONDS last time, it leaves
the turn lingering (its id and a deadline in the header); the next writer in line, once the slot before its
own is free, leaves it the turn until the lingering writer lets go for good or its deadline passes. Each
hand-over costs the next writer's process its CPU caches and SQLite the pages it must re-read; fewer of them,
each wait still bounded: about STREAK_SECONDS per writer ahead, and at most 50 ms in all spent leaving the
turn to a lingering writer that does not let go (killed, or stuck), after which both try SQLite's lock in
short steps. A writer that sends between writes (a worker) is not back in time and is never waited for.

The locks are Linux open-file-description locks: the OS drops those of a killed process, so the next
writer goes on. The queue only orders writers; SQLite's own lock still guards the data, so a writer
that does not queue (an older reclaim, the sqlite3 shell, one whose wait timed out) stays safe, only
unordered. A sidecar that cannot be made or written (read-only folder, no rights on it) or a system
without such locks means no queue: the writer goes straight to BEGIN IMMEDIATE. Viewers (read-only
connections) never touch it.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import sqlite3
import struct
import threading
import time
from pathlib import Path

SUFFIX = ".writers"


def sidecar(ledger: str | Path) -> Path:
    """The lock file of the ledger at `ledger`: `<ledger>.writers`, beside it."""
    p = Path(ledger)
    return p.with_name(p.name + SUFFIX)


class QueuedConnection(sqlite3.Connection):
    """A sqlite3 connection that knows its ledger's writers' queue (None for a viewer)."""

    writers: WriterQueue | None = None

    def close(self) -> None:
        """Close the connection and its handle on the queue."""
        if self.writers is not None:
            self.writers.close()
        super().close()


def attach(conn: sqlite3.Connection, ledger: Path) -> None:
    """Give a writable connection made with `factory=QueuedConnection` the queue of `ledger` (opened lazily)."""
    if isinstance(conn, QueuedConnection):
        conn.writers = WriterQueue(ledger)


def queue_of(conn: sqlite3.Connection) -> WriterQueue | None:
    """The writers' queue of `conn`, or None (a viewer, or a connection not made by ledger.db.connect)."""
    return getattr(conn, "writers", None)


SLOTS = 4096
"""Ticket slots (lock ranges on bytes 8..8+SLOTS of the sidecar, whatever those bytes hold): more than there
will ever be writers waiting at once."""
_COUNTER = 8
_DONE = 16  # bytes 8..16: tickets done (the last released + 1); 16..24: unused (an older reclaim's mark)
_LINGER = 24  # 24..32: the writer whose turn lingers (its id), 0 for none
_UNTIL = 32  # 32..40: until when (time.monotonic_ns()) the next in line leaves it the turn
_HEADER = 40
_NOBODY = bytes(8)

STREAK = 8
"""Turns in a row a writer that keeps writing may take while others wait: fewer hand-overs (each one costs
the next writer's process its caches and SQLite the pages it must re-read), each wait still bounded."""
STREAK_SECONDS = 0.004
"""And for no longer than this in all: with K writers queued, a writer waits at most about K times this for its
turn however slow the disk's commits are at the time (a bound by turns alone grows with them)."""
LINGER_SECONDS = 0.0002
"""How long the next writer in line leaves the turn to the one that just wrote, when that one came back
within this long last time (a writer writing in a loop); one that does not is never waited for."""
_BARGE_NS = 50_000_000
"""How long in all the next in line leaves the turn to a lingering writer before it goes anyway (50 ms): past
that (killed mid-write, or stuck), SQLite's lock decides who writes, both trying in short steps. A writer that
went without a ticket is left the turn as long as it holds ALONE (within the waiting writer's deadline)."""
_OFD = hasattr(fcntl, "F_OFD_SETLKW")
ALONE = _COUNTER + SLOTS
"""The byte (lock range) held by the writer that went without a ticket, for its whole turn."""


def _lock(fd: int, kind: int, start: int, wait: bool = False) -> bool:
    """Lock (F_WRLCK / F_RDLCK) or unlock (F_UNLCK) one range of `fd` for this open file description.

    Without `wait`, False when another holds it; with `wait`, blocks until it is free.
    """
    arg = _flock(kind, start)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK, arg)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


_FLOCK = struct.Struct("@hhqqi4x")  # struct flock: l_type, l_whence, l_start, l_len, l_pid (and padding)


def _flock(kind: int, start: int) -> bytes:
    """The `struct flock` for one lock range (the counter's 8 bytes, or a slot's one byte)."""
    return _FLOCK.pack(kind, os.SEEK_SET, start, _COUNTER if start == 0 else 1, 0)


_ALONE_OFF = _flock(fcntl.F_UNLCK, ALONE)


def _free(fd: int, start: int) -> bool:
    """True when nobody holds a write lock on the slot at `start` (asked, not taken: one system call)."""
    got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _flock(fcntl.F_RDLCK, start))
    return bool(_FLOCK.unpack(got)[0] == fcntl.F_UNLCK)


WATCH_SECONDS = 0.005
"""How long the next writer in line watches the slot of the one writing before it sleeps until it is let go."""


def _watch(fd: int, slot: int, until: float) -> bool:
    """Ask whether the slot at `slot` is free, yielding the CPU between asks, until `until`; True once it is."""
    while True:
        if _free(fd, slot):
            return True
        if time.monotonic() >= until:
            return False
        os.sched_yield()


def _wait_free(fd: int, slot: int, deadline: float) -> bool:
    """Sleep until nobody holds the slot at `slot`, or until `deadline`; True when it is free."""
    if _free(fd, slot):
        return True
    waiter = _Waiter(fd, slot)
    waiter.done.wait(max(0.0, deadline - time.monotonic()))
    return waiter.abandon()


class _Waiter:
    """One blocking wait for the slot before ours, in a thread, so the caller can stop waiting at its deadline."""

    def __init__(self, fd: int, slot: int) -> None:
        self.fd, self.slot = fd, slot
        self.done = threading.Event()
        self._guard = threading.Lock()
        self._got = False
        self._abandoned = False
        threading.Thread(target=self._run, name="reclaim-writers-queue", daemon=True).start()

    def _run(self) -> None:
        try:
            _lock(self.fd, fcntl.F_RDLCK, self.slot, wait=True)
            _lock(self.fd, fcntl.F_UNLCK, self.slot)
        except OSError:
            pass  # no queue after all: SQLite's lock still orders this writer
        with self._guard:
            self._got = not self._abandoned
        self.done.set()

    def abandon(self) -> bool:
        """Stop waiting; True when the turn came after all."""
        with self._guard:
            self._abandoned = not self._got
            return self._got


class WriterQueue:
    """The queue of one connection: its own open file on the sidecar, so every connection waits its turn."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        self.path = sidecar(ledger)
        self._fd: int | None = None
        self._map: mmap.mmap | None = None  # the sidecar's counters, read and written without system calls
        self._usable = _OFD
        self._held: int | None = None  # the slot this writer holds while it writes
        self._ticket_no = 0  # the ticket that slot is for
        self._direct = False  # this writer went without a ticket (nobody else was writing or waiting)
        self.contended = False  # a writer outside the queue may hold SQLite's lock as this turn starts
        self._id = os.urandom(8).replace(b"\0", b"\1")  # never 0 (nobody)
        self._lingering = False  # this writer left its turn lingering for its own next write
        self._barging = False  # this turn is a lingering writer's next one, taken without a ticket
        self._streak = 0  # turns in a row
        self._streak_from = 0  # time.monotonic_ns() the streak's first turn was had
        self._left_at = 0  # time.monotonic_ns() this writer last let its turn go
        self._quick = False  # it came back within LINGER_SECONDS then

    def _open(self) -> int | None:
        if self._fd is None and self._usable:
            try:
                self._fd = _open_sidecar(self.path, self.ledger)
            except OSError:
                self._usable = False  # read-only folder, no rights: write unqueued, as before
                return None
            try:
                if os.fstat(self._fd).st_size < _HEADER:
                    os.ftruncate(self._fd, _HEADER)  # a sidecar made before the counters beyond the first
                self._map = mmap.mmap(self._fd, _HEADER)
            except (OSError, ValueError):
                self._map = None  # every writer takes a ticket, as before
        return self._fd

    def take(self, deadline: float) -> bool:
        """Wait for this writer's turn until `deadline` (a time.monotonic() value); False when it passed.

        True means the turn is held (or there is no usable queue): call `release` after COMMIT or ROLLBACK.
        When no writer holds a ticket or writes outside one, the turn is taken at once without a ticket,
        holding the byte ALONE so that the next writer queues; SQLite's lock still decides who writes.
        A writer whose turn still lingers (see the module's docstring) takes it again at once, without a ticket.
        `contended` then says whether another writer may hold SQLite's lock as the turn starts.
        """
        got = self._take(deadline)
        if got and not self._barging:
            self._streak_from = time.monotonic_ns()
        return got

    def _take(self, deadline: float) -> bool:
        fd = self._open()
        if fd is None:
            return True
        m = self._map
        self.contended = False
        if m is not None:
            now = time.monotonic_ns()
            self._quick = now - self._left_at < LINGER_SECONDS * 1e9
            if self._lingering:
                self._lingering = False
                if m[_LINGER:_UNTIL] == self._id:
                    if now < int.from_bytes(m[_UNTIL:_HEADER], "little"):
                        m[_UNTIL:_HEADER] = (now + _BARGE_NS).to_bytes(8, "little")  # writing: the next one waits
                        self._barging = True
                        self.contended = True  # a queued writer whose wait for it ran out may be writing
                        self._streak += 1
                        return True
                    m[_LINGER:_UNTIL] = _NOBODY  # back too late: the turn is the next writer's
            self._streak = 0
            try:
                if m[0:_COUNTER] == m[_COUNTER:_DONE] and self._alone(fd, m):
                    return True
            except OSError:
                self._usable = False  # e.g. no such locks on this filesystem: unqueued from now on
                return True
        try:
            mine = self._ticket(fd, deadline)
            if mine is None:
                return False
            self._held = mine
            before = _COUNTER + (mine - _COUNTER - 1) % SLOTS
            if _free(fd, before):
                return self._outwait(deadline)
        except OSError:
            self._usable = False  # e.g. no such locks on this filesystem: unqueued from now on
            self.release()
            return True
        # Asleep in the kernel until the writer two ahead is done (the one just ahead is then writing), then
        # next in line: watch its slot for a short while instead of sleeping, so the hand-over costs no
        # wake-up; past that (a slow commit), sleep for it too.
        try:
            if _wait_free(fd, _COUNTER + (mine - _COUNTER - 2) % SLOTS, deadline):
                # Watch only when the writer ahead is about to write, not while it leaves a lingering turn be:
                # two writers yielding on two cores would take the CPU from the one writing.
                watch = m is None or m[_LINGER:_UNTIL] == _NOBODY
                if watch and _watch(fd, before, min(deadline, time.monotonic() + WATCH_SECONDS)):
                    return self._outwait(deadline)
                if _wait_free(fd, before, deadline):
                    return self._outwait(deadline)
        except OSError:
            self._usable = False
            self.release()
            return True
        self._let_go(done=False)  # the writers behind this one must not wait for it
        return False

    def _alone(self, fd: int, m: mmap.mmap) -> bool:
        """Nobody was writing or waiting: hold ALONE (not waiting for it) for this turn without a ticket. True when
        held and still nobody had taken a ticket once it was; False (nothing held) when another writer holds it
        or took a ticket meanwhile: this one then queues too."""
        if not _lock(fd, fcntl.F_WRLCK, ALONE):
            return False  # another writer found nobody at the same moment
        # Read after the lock (a system call on the same file as the tickets' lock): a writer that took its
        # ticket before it is seen here and goes first; one that takes it after finds ALONE held and waits.
        if m[0:_COUNTER] == m[_COUNTER:_DONE]:
            self._direct = True
            return True
        _lock(fd, fcntl.F_UNLCK, ALONE)
        return False

    def _outwait(self, deadline: float) -> bool:
        """The writer before this one is done. While the turn lingers (its writer is writing again, or may be
        within LINGER_SECONDS), leave it the turn for _BARGE_NS at most; while a writer that went without a
        ticket holds ALONE, leave it the turn as long as it does, within `deadline`. Then this writer's turn
        starts, `contended` when one of them may still hold SQLite's lock. True."""
        m, fd = self._map, self._fd
        if m is None or fd is None:
            return True
        end = min(deadline, time.monotonic() + _BARGE_NS / 1e9) * 1e9
        while True:
            owner = m[_LINGER:_UNTIL]
            now = time.monotonic_ns()
            if owner != _NOBODY and now >= int.from_bytes(m[_UNTIL:_HEADER], "little"):
                if m[_LINGER:_UNTIL] == owner:
                    m[_LINGER:_UNTIL] = _NOBODY  # it did not come back in time: its streak is over
                owner = _NOBODY
            alone = owner == _NOBODY and not _free(fd, ALONE)
            if owner == _NOBODY and not alone:
                self.contended = False
                return True
            if now >= end:
                if owner != _NOBODY and m[_LINGER:_UNTIL] == owner:
                    m[_LINGER:_UNTIL] = _NOBODY  # stuck or killed: its streak is over
                    owner = _NOBODY
                    alone = not _free(fd, ALONE)
                if alone and now < deadline * 1e9:
                    # Writing without a ticket, for long: it holds (or is about to take) SQLite's lock and
                    # would lose it in SQLite's slow busy handler to every queued writer after this one.
                    time.sleep(0.0005)
                    continue
                self.contended = True  # it may still write: BEGIN IMMEDIATE in short steps
                return True
            os.sched_yield()

    def _ticket(self, fd: int, deadline: float) -> int | None:
        """Take the next ticket and lock its slot, in one step under the counter's lock; the slot's offset."""
        pause = 0.00005
        while not _lock(fd, fcntl.F_WRLCK, 0):  # held for a few system calls only
            if time.monotonic() >= deadline:
                return None
            time.sleep(pause)
            pause = min(pause * 2, 0.002)
        try:
            m = self._map
            if m is not None:
                ticket = int.from_bytes(m[0:_COUNTER], "little")
                m[0:_COUNTER] = ((ticket + 1) % 2**63).to_bytes(_COUNTER, "little")
            else:
                raw = os.pread(fd, _COUNTER, 0)
                ticket = int.from_bytes(raw, "little") if len(raw) == _COUNTER else 0
                os.pwrite(fd, ((ticket + 1) % 2**63).to_bytes(_COUNTER, "little"), 0)
            self._ticket_no = ticket
            slot = _COUNTER + ticket % SLOTS
            if not _lock(fd, fcntl.F_WRLCK, slot):
                raise OSError(errno.EBUSY, "ticket slot still held")  # SLOTS writers waiting: go unqueued
            return slot
        finally:
            _lock(fd, fcntl.F_UNLCK, 0)

    def release(self) -> None:
        """Let the next writer go (no-op when the turn is not held)."""
        self._let_go(done=True)

    def _let_go(self, *, done: bool) -> None:
        """Give the turn up; `done`: this ticket's turn was had (not given up waiting for it)."""
        m = self._map
        if self._direct or self._barging or self._held is not None:
            self._left_at = time.monotonic_ns()
        if self._direct:
            self._direct = False
            if self._fd is not None:
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, _ALONE_OFF)  # an unlock: never refused
        barging, self._barging = self._barging, False
        if m is not None and (barging or self._held is not None):
            # someone waits: a ticket was handed out after this writer's (a lingering writer's next turn: assumed)
            waiting = barging or int.from_bytes(m[0:_COUNTER], "little") != (self._ticket_no + 1) % 2**63
            if done and self._quick and self._streak + 1 < STREAK and waiting and (
                self._left_at - self._streak_from < STREAK_SECONDS * 1e9
            ) and (barging or m[_LINGER:_UNTIL] == _NOBODY):
                # Writing in a loop with others waiting: leave the turn lingering for this writer's next write.
                m[_UNTIL:_HEADER] = (self._left_at + int(LINGER_SECONDS * 1e9)).to_bytes(8, "little")
                m[_LINGER:_UNTIL] = self._id
                self._lingering = True
            elif barging or m[_LINGER:_UNTIL] == self._id:
                m[_LINGER:_UNTIL] = _NOBODY
        slot, self._held = self._held, None
        if slot is not None and self._fd is not None:
            if m is not None and done:  # with the counter, tells the next writer whether anyone is queued
                m[_COUNTER:_DONE] = ((self._ticket_no + 1) % 2**63).to_bytes(_COUNTER, "little")
            _lock(self._fd, fcntl.F_UNLCK, slot)

    def close(self) -> None:
        """Release and close the sidecar."""
        self.release()
        m, self._map = self._map, None
        if m is not None and self._lingering and m[_LINGER:_UNTIL] == self._id:
            m[_LINGER:_UNTIL] = _NOBODY  # not coming back: the next writer need not wait
        self._lingering = False
        if m is not None:
            m.close()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


def _open_sidecar(path: Path, ledger: Path) -> int:
    """Open (making it when missing) the sidecar for reading and writing, with the ledger's permissions.

    Made with the ledger's permission bits (whatever the umask) and, when made by root, given the ledger's
    owner, as SQLite does with its -wal and -shm files, so every user who can write the ledger can queue.
    """
    flags = os.O_RDWR | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    st = os.stat(ledger)
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, st.st_mode & 0o666)
    except FileExistsError:
        return os.open(path, flags)
    try:
        os.fchmod(fd, st.st_mode & 0o666)
        if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
            os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass
    return fd
