"""Generate a big ledger fixture fast: N jobs (default 1,000,000), mostly consumed, a few thousand held.

The file is created by ledger.db.create_ledger, so the schema (tables, indexes, triggers, version) is
the real one; the rows are then written with executemany in large transactions (a fixture generator
may use raw SQL). During the load the journal is off and synchronous=OFF; the file is switched back
to WAL at the end, so it opens like any other ledger.

Contents (deterministic for a given --seed and --now):
  * jobs: created over the last --days days, oldest first; --held held jobs (a third owned by
    "alice", with due times and reasons), some of every other state (reserving, submitted and done
    among the newest; failed, rejected, remediated scattered), the rest consumed;
  * events: the full history of every non-consumed job (reserve, send_started, accepted /
    send_unknown, completed, findings, assign, reject / remediate ...), and for consumed jobs
    either the full five (--consumed-events full, the default) or reserve + delivered (short);
  * quota_usage: one row per operation and day, counting exactly the jobs reserved that day.

    .venv/bin/python scripts/make_big_ledger.py big.db [-n 1000000] [--held 3000]
        [--config-out big.toml] [--consumed-events short|full] [--force]

Prints the time taken, the row counts and the file size.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.chain import event_hash
from ledger.db import connect, create_ledger

OPERATIONS = ("article.summarize", "article.translate", "report.digest")
OWNERS = ("alice", "bob", "carol")
HELD_REASONS = (
    "send outcome unknown (timeout)",
    "send outcome unknown (HTTP 503)",
    "send outcome unknown (connection reset after the request was sent)",
    "no handle recorded and the remote cannot be searched",
    "the remote does not know the recorded handle",
)

# share of N for each state other than consumed and held (held is an absolute count)
SHARES = {"reserving": 0.002, "submitted": 0.003, "done": 0.0005, "failed": 0.001, "rejected": 0.0005,
          "remediated": 0.0005}
RECENT = ("reserving", "submitted", "done")  # states only the newest jobs are in


def config_toml(daily_quota: int) -> str:
    """A config declaring the fixture's operations and operators (the remote is a placeholder)."""
    ops = "\n".join(
        f'[operations."{op}"]\nremote = "gemini"\ndaily_quota = {daily_quota}\n' for op in OPERATIONS
    )
    return (
        'timezone = "UTC"\n\n[identity]\nsource = "declared"\n\n[operators]\nalice = ["triage", "approver"]\nbob = ["triage"]\n'
        'carol = ["approver"]\n\n[remotes.gemini]\nkind = "gemini"\nbase_url = "http://127.0.0.1:9"\n'
        'model = "gemini-sim"\n\n' + ops
    )


def _idem(job_id: str, operation: str) -> str:
    # == ledger.model.idem_key, inlined for speed (canonical JSON of [job_id, operation])
    return hashlib.sha256(f'["{job_id}","{operation}"]'.encode()).hexdigest()[:32]


def assign_states(n: int, held: int, rng: random.Random) -> list[str]:
    """The state of each job index (index order = creation order)."""
    states = ["consumed"] * n
    counts = {s: max(1, round(n * f)) for s, f in SHARES.items()}
    recent = sum(counts[s] for s in RECENT)
    if recent + held + sum(counts[s] for s in SHARES if s not in RECENT) > n:
        raise SystemExit(f"-n {n} is too small for --held {held} and a few jobs of every state")
    i = n - recent
    for s in RECENT:  # the newest jobs, in state order, then shuffled among themselves
        states[i:i + counts[s]] = [s] * counts[s]
        i += counts[s]
    tail = states[n - recent:]
    rng.shuffle(tail)
    states[n - recent:] = tail
    scattered = [s for s in SHARES if s not in RECENT for _ in range(counts[s])] + ["held"] * held
    for s, idx in zip(scattered, rng.sample(range(n - recent), len(scattered)), strict=True):
        states[idx] = s
    return states


class Gen:
    """Row generators over one shared plan (states, times) so jobs, events and quota agree."""

    def __init__(self, n: int, held: int, days: int, now: float, seed: int, consumed_events: str) -> None:
        self.n = n
        self.now = now
        self.rng = random.Random(seed)
        self.states = assign_states(n, held, self.rng)
        # from the start of the UTC day `days - 1` days ago to an hour before now: exactly `days` quota days
        self.start = (now // 86400 - (days - 1)) * 86400
        self.step = max(now - 3600 - self.start, 1.0) / n
        self.full_consumed = consumed_events == "full"
        self._days: dict[int, str] = {}
        self.quota: Counter[tuple[str, str]] = Counter()

    def day(self, ts: float) -> str:
        k = int(ts // 86400)
        d = self._days.get(k)
        if d is None:
            d = self._days[k] = datetime.fromtimestamp(k * 86400, UTC).strftime("%Y-%m-%d")
        return d

    def job(self, i: int) -> tuple[Any, ...]:
        state = self.states[i]
        op = OPERATIONS[i % len(OPERATIONS)]
        jid = f"job-{i:07d}"
        created = self.start + i * self.step
        day = self.day(created)
        self.quota[(op, day)] += 1
        payload = f'{{"input":"summarise document {i}"}}'
        handle = result = result_at = held_reason = held_at = owner = due_at = last_error = None
        epoch, tries, updated = 1, 1, created + 5
        if state in ("consumed", "done", "submitted"):
            handle = f"int-{i}"
        if state in ("consumed", "done"):
            result = f'{{"text":"simulated reply to: summarise document {i}"}}'
            result_at = updated = created + 60
            if state == "consumed":
                updated = created + 61
        elif state == "reserving":
            epoch, tries = 0, 0
            updated = created
        elif state in ("held", "rejected", "remediated"):
            held_reason = HELD_REASONS[i % len(HELD_REASONS)]
            held_at = updated = created + 30
            last_error = "TimeoutException: timed out" if "timeout" in held_reason else None
            if state == "held":
                owner = OWNERS[i % 3] if i % 3 == 0 else None
                due_at = held_at + 86400 if owner else None
            else:
                updated = held_at + 3600
                epoch = 2  # a reject or a remediate bumps the epoch (ledger.event_table)
        elif state == "failed":
            last_error = "HTTP 400: simulated fault: 400 Bad Request"
        return (jid, op, _idem(jid, op), f"doc-{i:07d}", payload, state, 1, epoch, handle, day, created, updated,
                tries, last_error, held_reason, held_at, owner, due_at, result, result_at)

    def jobs(self) -> Iterator[tuple[Any, ...]]:
        for i in range(self.n):
            yield self.job(i)

    def events(self) -> Iterator[tuple[Any, ...]]:
        for i in range(self.n):
            state = self.states[i]
            op = OPERATIONS[i % len(OPERATIONS)]
            jid = f"job-{i:07d}"
            t = self.start + i * self.step
            w = f"worker-{i % 4}"
            hist: list[tuple[str, str, str | None, str, int, str]] = [
                ("reclaim", "reserve", None, "reserving", 0, f'{{"quota_day":"{self.day(t)}"}}')
            ]
            if state == "reserving":
                pass
            elif state == "consumed" and not self.full_consumed:
                hist.append((w, "delivered", "done", "consumed", 1, f'{{"handle":"int-{i}"}}'))
            else:
                hist.append((w, "send_started", "reserving", "reserving", 1, '{"attempt":1,"try":1}'))
                if state in ("submitted", "done", "consumed"):
                    hist.append((w, "accepted", "reserving", "submitted", 1, f'{{"handle":"int-{i}"}}'))
                    if state != "submitted":
                        hist.append((w, "completed", "submitted", "done", 1, f'{{"handle":"int-{i}"}}'))
                    if state == "consumed":
                        hist.append((w, "delivered", "done", "consumed", 1, f'{{"handle":"int-{i}"}}'))
                elif state == "failed":
                    hist.append((w, "invalid", "reserving", "failed", 1, '{"error":"HTTP 400"}'))
                else:  # held, rejected, remediated
                    reason = HELD_REASONS[i % len(HELD_REASONS)]
                    hist.append((w, "send_unknown", "reserving", "held", 1, f'{{"held_reason":"{reason}"}}'))
                    if i % 3 == 0:
                        hist.append(("bob", "assign", "held", "held", 1, f'{{"owner":"{OWNERS[i % 3]}"}}'))
                    if state != "held" or i % 2 == 0:
                        hist.append(("bob", "finding", "held", "held", 1,
                                     '{"category":"not_received","note":"no trace on the remote"}'))
                    if state == "rejected":
                        hist.append(("carol", "reject", "held", "rejected", 2, '{"reason":"superseded"}'))
                    elif state == "remediated":
                        hist.append(("carol", "remediate", "held", "remediated", 2, '{"note":"re-run by hand"}'))
            for seq, (actor, kind, frm, to, epoch, detail) in enumerate(hist, 1):
                yield (t + seq, jid, op, seq, actor, kind, frm, to, epoch, detail)


def generate(path: Path, n: int, held: int, days: int, now: float, seed: int, consumed_events: str,
             batch: int = 200_000) -> dict[str, Any]:
    """Write the fixture to a new ledger at `path`; return counts and timings."""
    t0 = time.perf_counter()
    create_ledger(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")  # fixture load only; back to WAL below
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -1000000")
    conn.execute("PRAGMA temp_store = MEMORY")
    g = Gen(n, held, days, now, seed, consumed_events)
    job_sql = (
        "INSERT INTO jobs (job_id, operation, idem_key, target, payload, state, attempt, epoch, handle, quota_day, "
        "created_at, updated_at, tries, last_error, held_reason, held_at, owner, due_at, result, result_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
    )
    ev_sql = (
        "INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
        "prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    )

    def chained(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """Each event with the audit chain's previous hash and its own, in insertion (id) order."""
        prev: str | None = None
        for row in rows:
            digest = event_hash(prev, *row)
            yield (*row, prev, digest)
            prev = digest

    def load(sql: str, rows: Iterator[tuple[Any, ...]]) -> int:
        total = 0
        while True:
            chunk = [r for _, r in zip(range(batch), rows, strict=False)]
            if not chunk:
                return total
            conn.execute("BEGIN")
            conn.executemany(sql, chunk)
            conn.execute("COMMIT")
            total += len(chunk)

    jobs = load(job_sql, g.jobs())
    t_jobs = time.perf_counter() - t0
    events = load(ev_sql, chained(g.events()))
    t_events = time.perf_counter() - t0 - t_jobs
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO quota_usage (operation, day, used) VALUES (?, ?, ?)",
                     [(op, day, used) for (op, day), used in sorted(g.quota.items())])
    conn.execute("COMMIT")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    check = connect(path, readonly=True)  # opens like any ledger
    by_state = dict(check.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    check.close()
    return {
        "seconds": time.perf_counter() - t0,
        "jobs_s": t_jobs,
        "events_s": t_events,
        "jobs": jobs,
        "events": events,
        "quota_rows": len(g.quota),
        "by_state": by_state,
        "bytes": path.stat().st_size,
        "max_per_day": max(g.quota.values()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path, help="the ledger file to create (must not exist unless --force)")
    ap.add_argument("-n", "--jobs", type=int, default=1_000_000, help="number of jobs (default 1,000,000)")
    ap.add_argument("--held", type=int, default=3000, help="held jobs (default 3000)")
    ap.add_argument("--days", type=int, default=14, help="days of history and quota rows (default 14)")
    ap.add_argument("--now", type=float, default=None, help="epoch seconds the newest job is an hour before "
                    "(default: now)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--consumed-events", choices=("short", "full"), default="full",
                    help="events per consumed job: full = all five (default), short = reserve + delivered")
    ap.add_argument("--config-out", type=Path, default=None, help="also write a matching config TOML here")
    ap.add_argument("--force", action="store_true", help="replace an existing file")
    args = ap.parse_args(argv)
    if args.path.exists() or Path(f"{args.path}-wal").exists():
        if not args.force:
            print(f"{args.path}: exists; pass --force to replace it", file=sys.stderr)
            return 2
        for p in (args.path, Path(f"{args.path}-wal"), Path(f"{args.path}-shm")):
            p.unlink(missing_ok=True)
    now = args.now if args.now is not None else time.time()
    info = generate(args.path, args.jobs, args.held, args.days, now, args.seed, args.consumed_events)
    if args.config_out:
        args.config_out.write_text(config_toml(max(info["max_per_day"] * 2, 1000)), encoding="utf-8")
    print(
        f"{args.path}: {info['jobs']:,} jobs, {info['events']:,} events, {info['quota_rows']} quota rows "
        f"in {info['seconds']:.1f} s (jobs {info['jobs_s']:.1f} s, events {info['events_s']:.1f} s), "
        f"{info['bytes'] / 1e6:,.0f} MB"
    )
    print("  " + ", ".join(f"{s} {c:,}" for s, c in sorted(info["by_state"].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
