"""Named points where a test can make this process die (RECLAIM_CRASH_AT=name: SIGKILL) or stop
(RECLAIM_PAUSE_AT=name: SIGSTOP, until the test sends SIGCONT). `name#N` acts the N-th time this process
reaches the point (e.g. `after_send_claim#3`: at the third claim of a batch); plain `name` the first."""

from __future__ import annotations

import os
import signal
from collections import Counter

POINTS = (
    "after_reserve_commit",
    "after_pick_read",
    "after_send_claim",
    "after_window_check",
    "after_request_written",
    "after_remote_accept",
    "after_done",
    "after_deliver",
    "before_dispatch",
    "after_outbox_claim",
)

_reached: Counter[str] = Counter()


def _names(value: str | None, name: str, n: int) -> bool:
    """True when the variable's value names this point at its n-th reach (`name` alone: the first)."""
    if not value:
        return False
    point, _, nth = value.partition("#")
    return point == name and n == (int(nth) if nth.isdigit() else 1)


def crashpoint(name: str) -> None:
    """SIGKILL this process when RECLAIM_CRASH_AT names this point (and this reach of it), SIGSTOP it when
    RECLAIM_PAUSE_AT does (once only: a resumed process runs on); otherwise do nothing."""
    _reached[name] += 1
    n = _reached[name]
    if _names(os.environ.get("RECLAIM_CRASH_AT"), name, n):
        os.kill(os.getpid(), signal.SIGKILL)
    if _names(os.environ.get("RECLAIM_PAUSE_AT"), name, n):
        del os.environ["RECLAIM_PAUSE_AT"]
        os.kill(os.getpid(), signal.SIGSTOP)
