"""Test-only launcher: the `reclaim` CLI with its clock frozen or shifted, for subprocess tests.

The shipped CLI reads the system clock and no environment variable moves it. Tests that need another
time run `python tests/support/clocked_reclaim.py ARGS` with RECLAIM_TEST_NOW (epoch seconds or ISO) or
RECLAIM_TEST_CLOCK_OFFSET (seconds); this file is never installed.
"""

from __future__ import annotations

import os

from ledger.clock import ManualClock, SystemClock, parse_time, use_clock


def main() -> None:
    """Swap the process clock as the test asked, then run the CLI."""
    fixed = os.environ.get("RECLAIM_TEST_NOW")
    offset = os.environ.get("RECLAIM_TEST_CLOCK_OFFSET")
    if fixed:
        use_clock(ManualClock(parse_time(fixed)))
    elif offset:
        use_clock(SystemClock(float(offset)))
    from console.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
