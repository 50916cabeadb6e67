"""PostgreSQL figures, each beside its baseline from the same run (figure 8 of scripts/bench.py).

  8a. reserve() per second vs a raw psycopg loop doing the same statements (one transaction each:
      BEGIN; lock_timeout; the operation's advisory lock; existing? quota? held on target?; UPSERT quota;
      INSERT job; the chain's advisory lock; next seq and chain head; INSERT event; COMMIT). Aim >= 0.9.
  8b. 16 processes reserving at once, on 16 operations vs all on one: reservations per second.
  8c. claims per second the worker's way (ledger.picks.pick_due: batches of 20 in the picks table, FOR
      UPDATE SKIP LOCKED; then claim_for_send per job, as right before its send) with 4 worker processes
      vs 1; also with a 20 ms stand-in for each send (a sleep, no transaction open), and the same on a
      SQLite ledger file.
  8d. live lag: a commit to the follower having read its event, woken by NOTIFY vs polling every 0.1 s; p95.

The server is a throwaway one (tests/support/pg_server.py: initdb + pg_ctl on a unix socket, fsync off, as the
`postgres` user when root), or the one at $RECLAIM_BENCH_PG (a postgresql:// URL to a database this may
create databases from). Every round uses a fresh database.

    .venv/bin/python scripts/bench_pg.py [-n 2000] [--rounds 3] [--claims-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

from ledger.chain import event_hash  # noqa: E402
from ledger.clock import SystemClock, day_of  # noqa: E402
from ledger.config import Config, parse_config  # noqa: E402
from ledger.db import connect, create_ledger  # noqa: E402
from ledger.follow import EventCursor  # noqa: E402
from ledger.leases import claim_for_send  # noqa: E402
from ledger.picks import START, HeldPicks, pick_due, release_picks  # noqa: E402
from ledger.reservation import parse_payload, reserve  # noqa: E402
from ledger.store import wait_for_change  # noqa: E402
from ledger.store.postgres import CHAIN_LOCK, LOCK_TIMEOUT_MS, operation_lock  # noqa: E402

Row = dict[str, Any]
OPS = [f"bench.op{i}" for i in range(16)]


def bench_config() -> Config:
    """16 gemini operations with effectively unlimited quotas (nothing is ever sent)."""
    return parse_config({
        "remotes": {"sim": {"kind": "gemini", "base_url": "http://127.0.0.1:9"}},
        "operations": {op: {"remote": "sim", "daily_quota": 10**9} for op in OPS},
    })


class Server:
    """A database factory: the throwaway server, or $RECLAIM_BENCH_PG."""

    def __init__(self) -> None:
        self.url = os.environ.get("RECLAIM_BENCH_PG")
        self.server: Any = None
        self.n = 0
        if not self.url:
            from pg_server import PgServer

            self.server = PgServer().start()

    def new(self) -> str:
        """A fresh empty database's URL."""
        if self.server is not None:
            return str(self.server.new_database("bench"))
        import psycopg

        assert self.url is not None
        self.n += 1
        name = f"reclaim_bench_{os.getpid()}_{self.n}"
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        base, _, query = self.url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


# -- 8a ------------------------------------------------------------------------------------------------
def ledger_steps(url: str, config: Config) -> Callable[[int, int], float]:
    """A function reserving jobs [a, b) with reserve() on a fresh ledger at `url`; returns the seconds taken."""
    create_ledger(url)
    conn = connect(url)
    clock = SystemClock()
    parse_payload(config, OPS[0], {"input": "warm-up"})  # loads the SDK's request models once, untimed

    def step(a: int, b: int) -> float:
        t0 = time.perf_counter()
        for i in range(a, b):
            res = reserve(conn, config, OPS[0], {"input": f"article {i}"}, clock=clock, job_id=f"job-{i}",
                          target=f"target-{i}")
            if res.outcome != "reserved":
                raise RuntimeError(res.outcome)
        return time.perf_counter() - t0

    return step


def _idem(job_id: str, operation: str) -> str:
    return hashlib.sha256(json.dumps([job_id, operation], separators=(",", ":")).encode()).hexdigest()[:32]


def raw_steps(url: str, quota: int = 10**9) -> Callable[[int, int], float]:
    """The same transactions with plain psycopg (autocommit connection, explicit BEGIN/COMMIT)."""
    import psycopg

    create_ledger(url)
    conn = psycopg.connect(url, autocommit=True)

    def step(a: int, b: int) -> float:
        t0 = time.perf_counter()
        for i in range(a, b):
            _raw_one(conn, i, quota)
        return time.perf_counter() - t0

    return step


def _raw_one(conn: Any, i: int, quota: int) -> None:
    ex = conn.execute
    op, tz = OPS[0], "UTC"
    oplock = operation_lock(op)
    jid, target = f"job-{i}", f"target-{i}"
    payload = json.dumps({"input": f"article {i}"}, sort_keys=True, separators=(",", ":"))
    ex(f"BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}; "
       f"SELECT pg_advisory_xact_lock({oplock})")
    now = time.time()
    day = day_of(now, tz)
    if ex("SELECT * FROM jobs WHERE job_id = %s AND operation = %s", (jid, op)).fetchone() is not None:
        raise RuntimeError("duplicate")
    row = ex("SELECT used FROM quota_usage WHERE operation = %s AND day = %s", (op, day)).fetchone()
    used = row[0] if row else 0
    if used >= quota:
        raise RuntimeError("quota")
    if ex("SELECT job_id, operation FROM jobs WHERE target = %s AND state = 'held' ORDER BY held_at LIMIT 1",
          (target,)).fetchone() is not None:
        raise RuntimeError("held")
    ikey = _idem(jid, op)
    ex("INSERT INTO quota_usage (operation, day, used) VALUES (%s, %s, 1) "
       "ON CONFLICT (operation, day) DO UPDATE SET used = quota_usage.used + 1", (op, day))
    ex("INSERT INTO jobs (job_id, operation, idem_key, target, payload, state, quota_day, created_at, updated_at) "
       "VALUES (%s, %s, %s, %s, %s, 'reserving', %s, %s, %s) ON CONFLICT (job_id, operation) DO NOTHING "
       "RETURNING *", (jid, op, ikey, target, payload, day, now, now))
    ex("SELECT pg_advisory_xact_lock(%s)", (CHAIN_LOCK,))
    detail = json.dumps({"idem_key": ikey, "quota_day": day, "quota_used": used + 1, "quota_limit": quota},
                        sort_keys=True)
    seq, prev = ex(
        "SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = %s AND operation = %s), "
        "(SELECT hash FROM events ORDER BY id DESC LIMIT 1)", (jid, op),
    ).fetchone()
    digest = event_hash(prev, now, jid, op, seq, "reclaim", "reserve", None, "reserving", 0, detail)
    ex("INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
       "prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
       (now, jid, op, seq, "reclaim", "reserve", None, "reserving", 0, detail, prev, digest))
    ex("COMMIT")


def fig_reserve(server: Server, n: int, rounds: int) -> list[Row]:
    """Both sides on their own fresh ledger, interleaved in chunks of 50 (the order alternating), so a
    busy neighbour slows both alike; per round the ratio of the summed times, the median over rounds."""
    config = bench_config()
    led: list[float] = []
    raw: list[float] = []
    ratios: list[float] = []
    for _ in range(rounds):
        lstep, rstep = ledger_steps(server.new(), config), raw_steps(server.new())
        tl = tr = 0.0
        for k, a in enumerate(range(0, n, 50)):
            b = min(a + 50, n)
            if k % 2:
                tr += rstep(a, b)
                tl += lstep(a, b)
            else:
                tl += lstep(a, b)
                tr += rstep(a, b)
        led.append(n / tl)
        raw.append(n / tr)
        ratios.append(tr / tl)
    return [{"figure": f"PostgreSQL: reserve() per second ({n:,} jobs, {rounds} rounds, median)",
             "value": f"{statistics.median(led):,.0f} /s", "baseline": f"raw psycopg {statistics.median(raw):,.0f} /s",
             "ratio": statistics.median(ratios),
             "note": "aim >= 0.9; same statements, one transaction each, interleaved in chunks of 50"}]


# -- 8b ------------------------------------------------------------------------------------------------
def _writer(url: str, op: str, first: int, n: int, barrier: Any, out: Any) -> None:
    config = bench_config()
    # Import and build what the first reserve() would (the Gemini SDK's request validator, about a second of
    # CPU) before the start: 16 processes on two cores would otherwise spend most of the timed run importing.
    parse_payload(config, op, {"input": "warm up"})
    conn = connect(url)
    clock = SystemClock()
    barrier.wait(timeout=120)
    t0 = time.perf_counter()
    for i in range(first, first + n):
        res = reserve(conn, config, op, {"input": f"a {i}"}, clock=clock, job_id=f"w-{i}")
        assert res.outcome == "reserved", res.outcome
    out.put((t0, time.perf_counter()))
    conn.close()


def _writers(url: str, procs: int, per: int, spread: bool) -> float:
    create_ledger(url)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_writer, args=(url, OPS[i % 16] if spread else OPS[0], i * per, per, barrier, out))
          for i in range(procs)]
    for p in ps:
        p.start()
    spans = [out.get(timeout=600) for _ in ps]
    for p in ps:
        p.join(timeout=60)
    return procs * per / (max(e for _, e in spans) - min(s for s, _ in spans))


def fig_writers(server: Server, procs: int, per: int) -> list[Row]:
    spread = _writers(server.new(), procs, per, True)
    one = _writers(server.new(), procs, per, False)
    return [{"figure": f"PostgreSQL: {procs} processes x {per} reserve(), on {procs} operations",
             "value": f"{spread:,.0f} /s", "baseline": f"all on one operation {one:,.0f} /s", "ratio": spread / one,
             "note": "per-operation lock; every event still takes the audit chain's lock"}]


# -- 8c ------------------------------------------------------------------------------------------------
def _claimer(url: str, send_s: float, barrier: Any, out: Any) -> None:
    """One worker's send step without the remote, as `ledger.worker.send_due` does it: pick 20 (a row each
    in `picks`), renew the picks as the batch goes, claim each job right before its (stand-in) send, give
    back what is left at the end."""
    config = bench_config()
    conn = connect(url)
    owner = f"w{os.getpid()}"
    clock = SystemClock()
    held = HeldPicks(conn, config, owner, clock)
    barrier.wait(timeout=120)
    t0 = time.perf_counter()
    got = 0
    while True:
        picked = pick_due(conn, config, owner=owner, now=clock.now(), limit=20, after=START)
        if not picked:
            break
        held.picked()
        for job in picked:
            held.keep()
            if claim_for_send(conn, config, job.key, owner=owner, now=clock.now(), expected_epoch=job.epoch):
                got += 1
                if send_s:
                    time.sleep(send_s)  # the send itself: no transaction open
    release_picks(conn, owner, now=clock.now())
    out.put((t0, time.perf_counter(), got))
    conn.close()


def _claims(url: str, jobs: int, workers: int, send_s: float = 0.0) -> float:
    create_ledger(url)
    config = bench_config()
    conn = connect(url)
    clock = SystemClock()
    for i in range(jobs):
        reserve(conn, config, OPS[i % 16], {"input": f"c {i}"}, clock=clock, job_id=f"c-{i}")
    conn.close()
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    ps = [ctx.Process(target=_claimer, args=(url, send_s, barrier, out)) for _ in range(workers)]
    for p in ps:
        p.start()
    res = [out.get(timeout=600) for _ in ps]
    for p in ps:
        p.join(timeout=60)
    total = sum(g for _, _, g in res)
    if total != jobs:
        raise RuntimeError(f"claimed {total} of {jobs} jobs")
    return total / (max(e for _, e, _ in res) - min(s for s, _, _ in res))


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def fig_claims(server: Server, jobs: int, tmp: Path | None = None) -> list[Row]:
    """4 workers vs 1, on PostgreSQL (and on a SQLite file in `tmp` when given), with no send and with a
    20 ms stand-in send; each job claimed exactly once (checked)."""
    rows: list[Row] = []
    backends: list[tuple[str, Callable[[str], str]]] = [("PostgreSQL", lambda tag: server.new())]
    if tmp is not None:
        backends.append(("SQLite", lambda tag: str(tmp / f"claims-{tag}-{time.monotonic_ns()}.db")))
    for name, new in backends:
        for send_s, n in ((0.0, jobs), (0.02, max(jobs // 4, 100))):
            before = _load()
            four = _claims(new("4"), n, 4, send_s)
            one = _claims(new("1"), n, 1, send_s)
            what = "no send" if not send_s else f"{send_s * 1000:g} ms stand-in send each"
            rows.append({"figure": f"{name}: claims per second, 4 workers ({n:,} jobs, picks of 20, {what})",
                         "value": f"{four:,.0f} /s", "baseline": f"1 worker {one:,.0f} /s", "ratio": four / one,
                         "note": f"each job claimed once (checked); {before} before, {_load()} after"})
    return rows


# -- 8d ------------------------------------------------------------------------------------------------
def _lags(url: str, events: int, notify: bool) -> list[float]:
    create_ledger(url)
    config = bench_config()
    reader = connect(url, readonly=True)
    cursor = EventCursor(reader)
    cursor.poll()
    if notify:
        reader.listen()  # type: ignore[attr-defined]
    committed: dict[str, float] = {}
    lags: list[float] = []
    stop = threading.Event()

    def write() -> None:
        conn = connect(url)
        clock = SystemClock()
        for i in range(events):
            reserve(conn, config, OPS[0], {"input": f"l {i}"}, clock=clock, job_id=f"l-{i}")
            committed[f"l-{i}"] = time.perf_counter()
            time.sleep(0.02 + (i % 7) * 0.005)  # uneven arrivals, so polling is not in phase with them
        conn.close()
        stop.set()

    t = threading.Thread(target=write)
    t.start()
    while len(lags) < events:
        for e in cursor.poll():
            lags.append(time.perf_counter() - committed.get(e.job_id, time.perf_counter()))
        if len(lags) >= events:
            break
        if notify:
            wait_for_change(reader, 0.1)
        else:
            time.sleep(0.1)
    t.join()
    reader.close()
    return lags


def fig_lag(server: Server, events: int) -> list[Row]:
    def p95(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=20)[-1] * 1000

    notify = p95(_lags(server.new(), events, True))
    poll = p95(_lags(server.new(), events, False))
    return [{"figure": f"PostgreSQL: live lag, commit to event read, p95 ({events} events)",
             "value": f"{notify:.1f} ms (NOTIFY)", "baseline": f"polling every 0.1 s {poll:.1f} ms",
             "ratio": notify / poll, "note": "aim < 50 ms"}]


def run(n: int = 2000, rounds: int = 3) -> list[Row]:
    """All the PostgreSQL figures (rows for scripts/bench.py)."""
    server = Server()
    try:
        rows = fig_reserve(server, n, rounds)
        rows += fig_writers(server, 16, max(n // 16, 20))
        rows += fig_claims(server, n)
        rows += fig_lag(server, 200)
        return rows
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--claims-only", action="store_true", help="only figure 8c, on PostgreSQL and SQLite")
    args = ap.parse_args()
    if args.claims_only:
        import tempfile

        server = Server()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                rows = fig_claims(server, args.n, Path(tmp))
        finally:
            server.stop()
    else:
        rows = run(args.n, args.rounds)
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if isinstance(row["ratio"], float) else ""
        print(f"{row['figure']}: {row['value']} | baseline {row['baseline']} | ratio {ratio} | {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
