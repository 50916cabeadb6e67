"""Random pauses: worker processes stopped (SIGSTOP) for one to three lease lengths, over and over.

Four `reclaim worker` processes send a stream of jobs while a feeder reserves new ones and an operator
releases or rejects what gets held. Pausers stop random workers at random moments (mid-claim, mid-
request, mid-commit) for 1-3 leases, then resume them. After every resume the invariants are read
from the simulator's own records and a fresh ledger connection:

- per idem key, the `attempt` labels of the creates that reached the remote strictly increase: each
  attempt at most once, and never an older attempt after a newer one was authorised;
- nothing reaches the remote for a job after it was rejected;
- no job has more creates than attempts, and the jobs table equals the replay of its events.

The pass condition does not depend on the machine's speed: it runs until 100 pauses were made (with
a generous deadline), and checks invariants over whatever ran. The figures go to stdout (`-s`).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from ledger import replay, triage
from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect
from ledger.errors import LedgerError
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store

OP = "article.generate"
LEASE = 1.0
WORKERS = 4
PAUSES = 100
DEADLINE = 900.0  # seconds; a loaded 2-core machine needs far less

pytestmark = pytest.mark.chaos


def _attempts_by_idem(sim: Simulator) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i in sim.interactions():
        labels = i["labels"]
        out.setdefault(labels["idem"], []).append(int(labels["attempt"]))
    return out


def test_random_pauses_of_senders_never_send_an_attempt_twice_or_after_a_reject(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]],
    write_config: Callable[..., Path], start_cli: Callable[..., subprocess.Popen[str]],
) -> None:
    config = write_config(make_config(timeout_seconds=0.3, daily_quota=100_000, policy={
        "lease_seconds": LEASE, "send_margin_seconds": 0.2, "stale_reserving_seconds": 0,
        "retry_backoff_seconds": 0.2, "outcome_retry_seconds": 0.3,
    }))
    cfg = load_config(config)
    clock = SystemClock()
    rng = random.Random(20261203)
    stop = threading.Event()
    lock = threading.Lock()
    workers: list[subprocess.Popen[str]] = [start_cli("worker", "--interval", "0.05") for _ in range(WORKERS)]
    rejected: dict[str, int] = {}  # idem -> creates seen when it was rejected
    figures = {"pauses": 0, "restarts": 0, "reserved": 0, "released": 0, "rejected": 0}

    def feeder() -> None:
        conn = connect(ledger_path, check_same_thread=False)
        try:
            n = 0
            while not stop.wait(0.08):
                n += 1
                try:
                    res = reserve(conn, cfg, OP, {"input": f"job {n}"}, clock=clock, job_id=f"p-{n}")
                except LedgerError:
                    continue
                figures["reserved"] += res.outcome == "reserved"
        finally:
            conn.close()

    def operator() -> None:
        conn = connect(ledger_path, check_same_thread=False)
        try:
            while not stop.wait(0.2):
                try:
                    # Only jobs held for a while: a timed-out request must have reached the remote by then,
                    # so "after the reject" and "after the release" mean what they say.
                    settled = time.time() - 2.0
                    held = [j for j in jobs_store.held_jobs(conn, limit=20) if (j.held_at or 0) < settled][:5]
                    for job in held:
                        if rng.random() < 0.3:
                            with lock:
                                triage.reject(conn, cfg, job.key, actor="bob", clock=clock, reason="chaos")
                                rejected[job.idem_key] = sim.count("create", job.idem_key)
                            figures["rejected"] += 1
                        else:
                            triage.record_finding(conn, cfg, job.key, "not_received", "chaos", actor="alice",
                                                  clock=clock)
                            triage.release(conn, cfg, job.key, actor="bob", clock=clock, reason="chaos")
                            figures["released"] += 1
                except LedgerError:
                    continue
        finally:
            conn.close()

    def pauser(slot: int) -> None:
        local = random.Random(slot)
        while not stop.is_set():
            if stop.wait(local.uniform(0.05, 0.6)):
                return
            proc = workers[slot]
            if proc.poll() is not None:  # a worker that exited (e.g. a lock past its timeout) is restarted
                workers[slot] = start_cli("worker", "--interval", "0.05")
                figures["restarts"] += 1
                continue
            os.kill(proc.pid, signal.SIGSTOP)
            stop.wait(local.uniform(1.0, 3.0) * LEASE)
            os.kill(proc.pid, signal.SIGCONT)
            with lock:
                figures["pauses"] += 1

    threads = [threading.Thread(target=feeder, daemon=True), threading.Thread(target=operator, daemon=True)]
    threads += [threading.Thread(target=pauser, args=(i,), daemon=True) for i in range(WORKERS)]
    for t in threads:
        t.start()

    def check() -> None:
        with lock:
            by_idem = _attempts_by_idem(sim)
            for idem, attempts in by_idem.items():
                assert all(a < b for a, b in pairwise(attempts)), f"{idem}: {attempts}"
            for idem, seen in rejected.items():
                assert sim.count("create", idem) == seen, f"{idem}: a create after its reject"
        conn = connect(ledger_path, readonly=True)
        try:
            for idem_key, attempt in conn.execute("SELECT idem_key, attempt FROM jobs"):
                assert len(by_idem.get(idem_key, [])) <= attempt
            assert replay.mismatches(conn) == []
        finally:
            conn.close()

    checked = 0
    deadline = time.monotonic() + DEADLINE
    try:
        while figures["pauses"] < PAUSES:
            assert time.monotonic() < deadline, f"only {figures['pauses']} pauses in {DEADLINE:g} s"
            if figures["pauses"] > checked:
                checked = figures["pauses"]
                check()
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for proc in workers:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)
    check()
    conn = connect(ledger_path, readonly=True)
    try:
        abandoned = conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'send_abandoned'").fetchone()[0]
        abandoned_fenced = conn.execute(
            "SELECT COUNT(*) FROM fenced_writes WHERE event = 'send_abandoned'").fetchone()[0]
        fenced = conn.execute("SELECT COUNT(*) FROM fenced_writes").fetchone()[0]
        states = jobs_store.state_counts(conn)
    finally:
        conn.close()
    print(f"\npause chaos: {figures}, creates {sim.count('create')}, sends abandoned {abandoned} "
          f"(+{abandoned_fenced} abandoned after a takeover), fenced writes {fenced}, states {states}")
    assert figures["reserved"] >= 20 and figures["pauses"] >= PAUSES
    assert sim.count("create") >= 1
