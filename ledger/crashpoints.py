"""Named points where a test can make this process die (RECLAIM_CRASH_AT=name: SIGKILL) or stop
(RECLAIM_PAUSE_AT=name: SIGSTOP, until the test sends SIGCONT)."""

from __future__ import annotations

import os
import signal

POINTS = (
    "after_reserve_commit",
    "after_send_claim",
    "after_window_check",
    "after_remote_accept",
    "after_done",
    "after_deliver",
    "before_dispatch",
    "after_outbox_claim",
)


def crashpoint(name: str) -> None:
    """SIGKILL this process when RECLAIM_CRASH_AT names this point, SIGSTOP it when RECLAIM_PAUSE_AT
    does (the first time only: a resumed process runs on); otherwise do nothing."""
    if os.environ.get("RECLAIM_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("RECLAIM_PAUSE_AT") == name:
        del os.environ["RECLAIM_PAUSE_AT"]
        os.kill(os.getpid(), signal.SIGSTOP)
