"""A writer process for tests/system/test_follow.py: commits events to a ledger at random moments, then exits.

Usage: python follow_writer.py LEDGER CONFIG NAME COUNT SEED
Reserves COUNT jobs named "NAME #i" through the ledger API, one transaction each, pausing a random 0-30 ms
before each (so commits from several writers interleave at unpredictable moments). Prints nothing.
"""

from __future__ import annotations

import random
import sys
import time

from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect
from ledger.reservation import reserve

OP = "article.generate"


def main(argv: list[str]) -> int:
    """Reserve the jobs; exit 0 when every one was reserved."""
    ledger, config_path, name, count, seed = argv
    rng = random.Random(int(seed))
    cfg = load_config(config_path)
    conn = connect(ledger)
    clock = SystemClock()
    try:
        for i in range(int(count)):
            time.sleep(rng.uniform(0, 0.03))  # pacing: a random moment for the next commit
            res = reserve(conn, cfg, OP, {"input": f"write {name} #{i}"}, clock=clock, job_id=f"{name} #{i}",
                          actor="follow-writer")
            if res.outcome != "reserved":
                print(f"{name} #{i}: {res.outcome}", file=sys.stderr)
                return 1
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
