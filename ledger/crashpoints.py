"""Named points where a test can make this process die by SIGKILL (RECLAIM_CRASH_AT=name)."""

from __future__ import annotations

import os
import signal

POINTS = (
    "after_reserve_commit",
    "after_send_claim",
    "after_remote_accept",
    "after_done",
    "after_deliver",
    "before_dispatch",
    "after_outbox_claim",
)


def crashpoint(name: str) -> None:
    """SIGKILL this process when RECLAIM_CRASH_AT names this point; otherwise do nothing."""
    if os.environ.get("RECLAIM_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
