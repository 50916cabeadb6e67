"""The demo's worker process: generates jobs at a steady rate and runs worker passes until SIGTERM."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from pathlib import Path

from ledger import (
    Clock,
    Config,
    Connection,
    RemoteCache,
    ReserveResult,
    SystemClock,
    WorkerBeat,
    connect,
    day_of,
    load_config,
    tick,
    worker_id,
)
from ledger import (
    reserve_job as reserve,
)

TOPICS = ["tides", "lighthouses", "glaciers", "bridges", "owls", "comets", "orchards", "ferries", "kilns", "dunes"]
BUCKETS = ["bucket-a", "bucket-b", "bucket-c", "bucket-d"]


def new_job(conn: Connection, config: Config, clock: Clock, n: int) -> ReserveResult:
    """Reserve the generator's `n`-th job (as the scheduler): every 10th a storage clean-up, else an article."""
    day = day_of(clock.now(), config.timezone)
    if n % 10 == 0 and "storage.cleanup" in config.operations:
        bucket = BUCKETS[(n // 10) % len(BUCKETS)]
        return reserve(conn, config, "storage.cleanup", {"bucket": bucket, "older_than_days": 30}, clock=clock,
                       job_id=f"retention-check #{n} {bucket} {day}", target=bucket, actor="scheduler")
    topic = TOPICS[n % len(TOPICS)]
    return reserve(conn, config, "article.generate", {"input": f"Write four lines about {topic}."},
                   clock=clock, job_id=f"article #{n} {topic} {day}", actor="scheduler")


def main(argv: list[str] | None = None) -> int:
    """Generate jobs and run passes until SIGTERM/SIGINT; the pass under way finishes its job first."""
    parser = argparse.ArgumentParser(prog="python -m console.demo_feed")
    parser.add_argument("--ledger", type=str, required=True, help="a ledger file or a postgresql:// URL")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--rate", type=float, default=2.0, help="new jobs per second")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    config = load_config(args.config)
    conn = connect(args.ledger)
    clock = SystemClock()
    remotes = RemoteCache(config)
    owner = worker_id()
    beat = WorkerBeat(conn, clock, owner, kind="worker", interval=0.5)
    n = 0
    next_job = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        while now >= next_job and not stop.is_set():
            n += 1
            new_job(conn, config, clock, n)
            next_job += 1.0 / max(args.rate, 0.01)
        report = tick(conn, config, clock=clock, remotes=remotes, owner=owner, stop=stop, beat=beat)
        print(f"pass: {report.as_dict()}", flush=True)
        stop.wait(0.5)
    beat.stopped()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
