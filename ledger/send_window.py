"""The send window: a request may go on the wire only while the claim's lease outlasts all of it.

The epoch fences the ledger's rows; it cannot call back a request a stale worker already wrote. So the
last thing before a create is written (an httpx request hook, or just before `http.client` writes),
the adapter calls `SendWindow.check()`: measured on the monotonic clock from the claim's commit, the
lease left must exceed the whole request's deadline plus a margin, or nothing is sent. One window lets
exactly one request through: a redirect or a retry inside a client is refused, not sent.

When the sender gives up (its deadline passed, or it was cancelled), `close()` also aborts the request in flight:
the adapter attached its connection's `ConnectionAbort` (ledger.remotes.abort), and the connection is reset so
no further byte of the body leaves. What remains is the pause between `check()` returning and the socket write
(a few system calls), and what a reset cannot stop: a body that had (nearly) all left before the give-up. A
body is sent only when at `policy.min_send_rate` it fits in the send margin (`transfer_refusal`), measured as
the adapter puts it on the wire (`ledger.remotes.request_body_size`); docs/design.md states both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ledger.remotes.abort import ConnectionAbort

T = TypeVar("T")


def transfer_refusal(size: int, *, margin_seconds: float, min_send_rate: float) -> str | None:
    """Why a body of `size` bytes may not be sent, or None: at `min_send_rate` its transfer must fit in the send
    margin, since the kernel keeps sending a body after the request was given up (and recovery waits only the
    margin past the lease)."""
    need = size / min_send_rate
    if need <= margin_seconds:
        return None
    return (
        f"payload of {size:,} bytes: its transfer may take {need:.3g} s at policy.min_send_rate "
        f"{min_send_rate:,.0f} bytes/s, more than policy.send_margin_seconds {margin_seconds:g} s; send a smaller "
        "payload, or raise send_margin_seconds (and lease_seconds) if the link is known to be faster"
    )


class SendWindowClosed(Exception):
    """Raised inside an adapter's client when a request may not be written; nothing was sent."""


class SendWindow:
    """One claim's permission to write one request, while `lease left > deadline + margin`.

    `claimed_at` is `time.monotonic()` read just after the claim committed (so a pause of the process
    before the send counts against the lease, whatever the wall clock does).
    """

    def __init__(self, *, lease_seconds: float, deadline_seconds: float, margin_seconds: float,
                 claimed_at: float | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.lease_seconds = lease_seconds
        self.deadline_seconds = deadline_seconds
        self.margin_seconds = margin_seconds
        self._monotonic = monotonic
        self.claimed_at = monotonic() if claimed_at is None else claimed_at
        self._lock = threading.Lock()
        self._closed = False
        self._abort: ConnectionAbort | None = None
        self.written = False
        self.checked_at: float | None = None
        self.sent_at: float | None = None
        self.refusal: str | None = None

    def lease_left(self) -> float:
        """Seconds of the lease left now, by the monotonic clock."""
        return self.lease_seconds - (self._monotonic() - self.claimed_at)

    def check(self) -> None:
        """Allow this one request to be written, or raise SendWindowClosed (and close the window).

        Refuses when the window was closed (the caller gave up waiting), when a request already went
        through it, or when the lease left is not more than the deadline plus the margin.
        """
        with self._lock:
            if self.written:
                self._closed = True
                self.refusal = "a second request in one send (a redirect or a client retry) was not sent"
                raise SendWindowClosed(self.refusal)
            if self._closed:
                self.refusal = self.refusal or "the send was given up before its request was written"
                raise SendWindowClosed(self.refusal)
            left = self.lease_left()
            if left <= self.deadline_seconds + self.margin_seconds:
                self._closed = True
                self.refusal = (
                    f"lease left {max(left, 0.0):.3f} s is not more than the request deadline "
                    f"{self.deadline_seconds:g} s + margin {self.margin_seconds:g} s"
                )
                raise SendWindowClosed(self.refusal)
            self.written = True
            self.checked_at = self._monotonic()

    def attach(self, abort: ConnectionAbort) -> None:
        """The adapter's means to reset the connection its request goes on (given once connected, before the
        check); when the window was closed meanwhile, the connection is reset at once."""
        with self._lock:
            self._abort = abort
            closed = self._closed
        if closed:
            abort.abort()

    def request_sent(self) -> None:
        """The adapter's word that the whole request was handed to the connection (the body has left, bar the
        few kilobytes the kernel may hold: ledger.remotes.abort): from then on only the reply is awaited, and a
        pause of the process no longer cuts the send (call_with_deadline's `firm_limit` is for the write)."""
        with self._lock:
            if self.sent_at is None:
                self.sent_at = self._monotonic()

    def close(self) -> bool:
        """Close the window so no later request can pass, and reset the connection of the one in flight (if
        the adapter attached one); return whether a request was already written."""
        with self._lock:
            self._closed = True
            abort = self._abort
            written = self.written
        if abort is not None:
            abort.abort()
        return written


class OpenWindow(SendWindow):
    """A window for calls made outside a claim (tests, tools): no lease, but still one request."""

    def __init__(self) -> None:
        super().__init__(lease_seconds=float("inf"), deadline_seconds=0.0, margin_seconds=0.0)


STALL_SECONDS = 0.25
"""A wait that overran its step by more than this means the waiting thread did not run (the process was
stopped, suspended or starved): that time is not counted against the deadline (see call_with_deadline)."""


def call_with_deadline(
    fn: Callable[[], T], limit: Callable[[], float], step: float = 0.05,
    while_waiting: Callable[[], None] | None = None, monotonic: Callable[[], float] = time.monotonic,
    firm_limit: Callable[[], float] | None = None,
) -> tuple[bool, T | None]:
    """Run `fn` on a daemon thread until it returns or `limit()` (a monotonic time) passes.

    Returns (True, result) or (False, None); an exception from `fn` is re-raised here. `limit` is asked
    again every `step` seconds, so it may move (e.g. once the request was written); `while_waiting`, when
    given, is called on this thread at each of those steps (it must be quick and must not raise).

    A call that finished wins over the clock: the result is taken whenever `fn` has returned, also when
    the limit has passed meanwhile. Time during which this waiter did not run (a wake-up later than
    `step` + STALL_SECONDS: the process was stopped or starved) is added to the limit, since `fn`'s thread
    could not run either: a reply that reached the socket while the process was stopped is read and used
    after it resumes, not thrown away. `fn` must bound its own waits (the adapters bound every phase by
    the request's deadline), so the added time ends as soon as `fn` does. `firm_limit`, when given, is a
    time no stall extends (asked like `limit`): a request still being written when it passes is given up
    even right after a pause, since what it writes next could arrive after the lease. On (False, None) the
    call may still be running: the caller closes its SendWindow so it can no longer write anything.
    """
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="reclaim-send", daemon=True).start()
    stalled = 0.0
    last = monotonic()
    while not done.wait(step):
        now = monotonic()
        overrun = now - last - step
        if overrun > STALL_SECONDS:
            stalled += overrun
        last = now
        # The limits first: a request past its firm limit is given up before anything else this waiter does
        # (`while_waiting` may write to the ledger, and wait on its disk, while `fn` goes on writing).
        if (now >= limit() + stalled or (firm_limit is not None and now >= firm_limit())) and not done.is_set():
            return False, None
        if while_waiting is not None:
            while_waiting()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return True, box.get("value")  # type: ignore[return-value]
