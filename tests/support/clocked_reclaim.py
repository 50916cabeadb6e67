"""Test-only launcher: the `reclaim` CLI with its clock frozen or shifted, for subprocess tests.

The shipped CLI reads the system clock and no environment variable moves it. Tests that need another
time run `python tests/support/clocked_reclaim.py ARGS` with RECLAIM_TEST_NOW (epoch seconds or ISO) or
RECLAIM_TEST_CLOCK_OFFSET (seconds); this file is never installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ledger.clock import Clock, ManualClock, SystemClock, parse_time, use_clock


def clock_from_env(env: Mapping[str, str]) -> Clock | None:
    """The clock `env` asks for: frozen at RECLAIM_TEST_NOW, else shifted by RECLAIM_TEST_CLOCK_OFFSET
    seconds, else None (the system clock). Raises ValueError on a value that is not a time or a number."""
    fixed = env.get("RECLAIM_TEST_NOW")
    offset = env.get("RECLAIM_TEST_CLOCK_OFFSET")
    if fixed:
        return ManualClock(parse_time(fixed))
    if offset:
        return SystemClock(float(offset))
    return None


def main() -> None:
    """Swap the process clock as the test asked, then run the CLI."""
    clock = clock_from_env(os.environ)
    if clock is not None:
        use_clock(clock)
    from console.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
