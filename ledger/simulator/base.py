"""What every part of the simulator shares: the state's declaration, one lock, counting, waiting, hanging.

Each concern is a mixin over ``_SimBase`` (``faults``, ``webhooks``, ``gemini``, ``cleanup``, ``console``,
``control``); ``server.Simulator`` combines them and owns the HTTP server. One lock (``_lock``) guards
all state; nothing sleeps, hangs or makes a network call while holding it.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from ledger.simulator.cleanup import _CleanupJob
    from ledger.simulator.gemini import _Interaction
    from ledger.simulator.server import _Handler

Method = Literal["create", "get", "cancel", "delete", "cleanup", "cleanup_get"]
METHODS: tuple[str, ...] = get_args(Method)
"""The API methods the simulator counts (and a fault rule can name)."""

MAX_HANG_SECONDS = 120.0
"""Upper bound on how long an ``accept_then_hang`` fault holds a connection."""


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_loopback_host(host: str) -> bool:
    """Return True iff ``host`` is ``localhost`` or a loopback IP (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Close(Exception):
    """Raised inside a handler to close the connection without replying."""


def _new_counts() -> dict[str, int]:
    return {m: 0 for m in METHODS}


class _SimBase:
    """The state every concern reads, and the primitives they share."""

    host: str
    port: int
    complete_after: float
    _lock: threading.Lock
    _stopping: threading.Event
    _interactions: dict[str, _Interaction]
    _jobs: dict[str, _CleanupJob]
    _total: int
    _by_method: dict[str, int]
    _by_idem: dict[str, dict[str, int]]

    def _init_base(self, host: str, port: int, complete_after: float) -> None:
        self.host = host
        self.port = port
        self.complete_after = float(complete_after)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._interactions = {}
        self._jobs = {}
        self._reset_counts()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT`` (``http://[::1]:PORT`` for IPv6)."""
        host = self.host.strip("[]")
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    # -- counting (every API request, when it arrives, before any fault) --------
    def _reset_counts(self) -> None:
        self._total = 0
        self._by_method = _new_counts()
        self._by_idem = {}

    def _count_locked(self, method: str, idem: str | None) -> int:
        """Count one arriving request; returns the per-idem count for this method."""
        self._total += 1
        self._by_method[method] += 1
        if idem is None:
            return 0
        per = self._by_idem.setdefault(idem, _new_counts())
        per[method] += 1
        return per[method]

    # -- waiting -------------------------------------------------------------
    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` unless stopping; True if the simulator is stopping."""
        return self._stopping.wait(max(0.0, seconds))

    def _hang(self, h: _Handler) -> None:
        """Hold the connection without replying until the client leaves, stop(), or 120 s."""
        deadline = time.monotonic() + MAX_HANG_SECONDS
        conn = h.connection
        while time.monotonic() < deadline and not self._stopping.is_set():
            try:
                readable, _, _ = select.select([conn], [], [], 0.05)
                if readable and not conn.recv(1, socket.MSG_PEEK):
                    break  # client closed its side
            except (OSError, ValueError):
                break
            if readable:
                self._wait(0.05)
        raise _Close
