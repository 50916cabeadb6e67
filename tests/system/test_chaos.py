"""Chaos: 200+ worker processes SIGKILLed at random moments over a stream of jobs, with remote faults.

Workers are real processes: mostly children of tests/support/chaos_worker.py (a fork server, so a start costs
milliseconds instead of the ~1 s a fresh `reclaim` costs), and every 20th one a real `reclaim submit` or
`reclaim tick`. Each is killed after a random delay drawn from a seeded RNG -- the random delay is the
experiment, not a wait for something. After every kill the ledger is read back from a fresh connection
and checked; at the end, passes with the clock moved past the stale window settle every job.

What passes does not depend on the machine's speed: a slow or loaded machine kills workers earlier in
their work, so each round reserves and sends less. The rules are checked over whatever ran, and the run
goes on until minimums every machine reaches are met (kills, jobs reserved, jobs the remote accepted),
bounded by a generous deadline, not for a fixed number of rounds.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from child_env import inherited_env

from ledger.clock import day_of
from ledger.db import connect, create_ledger
from ledger.model import STATES
from ledger.simulator import Simulator

OP = "article.generate"
SEED = 20260301
KILLS = 200  # SIGKILLs landed on workers (fork-server children and real `reclaim` processes)
MIN_JOBS = 200  # jobs reserved in the ledger
MIN_ACCEPTED = 20  # jobs the remote accepted during the run (a handle recorded): each must end consumed
DEADLINE_SECONDS = 900  # a bound on the run, far above what a loaded 2-core machine needs to reach the minimums
ACCEPTED_STATES = ("submitted", "done", "consumed")  # the states a job has a handle in
LEASE_SECONDS = 30
STALE_SECONDS = 60
SETTLE_OFFSET = str(LEASE_SECONDS + STALE_SECONDS + 30)
WORKER = Path(__file__).parents[1] / "support" / "chaos_worker.py"
CLOCKED = Path(__file__).parents[1] / "support" / "clocked_reclaim.py"  # the CLI with a test clock (test-only)
# Faults whose outcome is "sent, outcome unknown" (held) or just slowness. No 4xx "not delivered"
# faults: those legitimately allow a second POST of the same key, and this test asserts at most one.
FAULTS: list[dict[str, Any]] = [
    {"kind": "drop_before_accept"},
    {"kind": "accept_then_hang"},
    {"kind": "complete_lose_reply"},
    {"kind": "status", "status": 503},
    {"kind": "status", "status": 500},
    {"kind": "slow", "seconds": 0.2},
]


def chaos_env(ledger: Path, config: Path, offset: str | None = None) -> dict[str, str]:
    env = inherited_env()
    env.update(RECLAIM_LEDGER=str(ledger), RECLAIM_CONFIG=str(config), RECLAIM_OPERATOR="chaos",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("GEMINI_API_KEY", None)
    if offset is not None:
        env["RECLAIM_TEST_CLOCK_OFFSET"] = offset
    return env


class ForkServer:
    """Talks to tests/support/chaos_worker.py: spawn a worker child, then reap it and learn how it ended."""

    def __init__(self, ledger: Path, config: Path, log: Path) -> None:
        self.log = log
        self._err: IO[str] = open(log, "a", encoding="utf-8")  # closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(ledger), str(config), str(log)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
            env=chaos_env(ledger, config),
        )
        hello = self._read()
        assert hello.get("ready"), hello

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"chaos worker server died; log:\n{self.log.read_text(encoding='utf-8')[-4000:]}"
        return dict(json.loads(line))

    def _ask(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def spawn(self, plan: list[list[str]], offset: str = "0") -> int:
        return int(self._ask({"cmd": "spawn", "plan": plan, "offset": offset})["pid"])

    def reap(self, pid: int) -> dict[str, Any]:
        return self._ask({"cmd": "wait", "pid": pid})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._err.close()


def kill_after(delays: dict[int, float]) -> None:
    """For each pid: wait until it exits or its delay (from now) passes -- a pidfd, no sleep -- then SIGKILL it."""
    start = time.monotonic()
    fds = {pid: os.pidfd_open(pid) for pid in delays}
    try:
        for pid, delay in sorted(delays.items(), key=lambda item: item[1]):
            remaining = max(delay - (time.monotonic() - start), 0.0)
            exited, _, _ = select.select([fds[pid]], [], [], remaining)
            if not exited:
                signal.pidfd_send_signal(fds[pid], signal.SIGKILL)
    finally:
        for fd in fds.values():
            os.close(fd)


def check_invariants(ledger: Path, sim: Simulator, tz: str = "UTC") -> dict[str, str]:
    """The rules that must hold after any kill; returns {job_id: state}."""
    conn = connect(ledger, readonly=True)
    try:
        jobs = {r["idem_key"]: dict(r) for r in conn.execute(
            "SELECT job_id, operation, idem_key, state, handle, held_reason FROM jobs")}
        states: dict[str, str] = {}
        for j in jobs.values():
            assert j["job_id"] not in states, f"job {j['job_id']} appears twice"
            assert j["state"] in STATES, j
            states[j["job_id"]] = j["state"]
            if j["state"] in ("submitted", "done", "consumed"):
                assert j["handle"], f"{j['state']} job without a handle: {j}"
            if j["state"] == "held":
                assert j["held_reason"], j
        releases = Counter(r[0] for r in conn.execute("SELECT job_id FROM events WHERE kind = 'release'"))
        started = {r[0] for r in conn.execute("SELECT DISTINCT job_id FROM events WHERE kind = 'send_started'")}
        for ikey, per in sim.calls()["by_idem"].items():
            creates = per.get("create", 0)
            if not creates:
                continue
            job = jobs.get(ikey)
            assert job is not None, f"{creates} create(s) for idem {ikey}, which the ledger never reserved"
            assert job["job_id"] in started, f"a create for {job['job_id']} with no committed send_started"
            assert creates <= 1 + releases[job["job_id"]], (
                f"job {job['job_id']}: {creates} create POSTs, {releases[job['job_id']]} releases")
        for job_id, operation, n, lo, hi in conn.execute(
            "SELECT job_id, operation, COUNT(*), MIN(seq), MAX(seq) FROM events GROUP BY job_id, operation"
        ):
            assert (lo, hi) == (1, n), f"job {job_id} / {operation}: event seq {lo}..{hi} for {n} events"
        expected: Counter[tuple[str, str]] = Counter()
        for kind, at, detail, op in conn.execute(
            "SELECT kind, at, detail, operation FROM events WHERE kind IN ('reserve', 'release')"
        ):
            day = json.loads(detail)["quota_day"] if kind == "reserve" else day_of(at, tz)
            expected[(op, day)] += 1
        used = {(r[0], r[1]): r[2] for r in conn.execute("SELECT operation, day, used FROM quota_usage")}
        assert used == dict(expected), (used, dict(expected))
        return states
    finally:
        conn.close()


@pytest.fixture
def chaos_sim() -> Iterator[Simulator]:
    with Simulator(complete_after=0.0).start() as s:
        yield s


@pytest.mark.chaos
def test_random_kills_never_send_twice(tmp_path: Path, chaos_sim: Simulator) -> None:
    sim = chaos_sim
    rng = random.Random(SEED)
    ledger, config, log = tmp_path / "reclaim.db", tmp_path / "reclaim.toml", tmp_path / "workers.log"
    sink = tmp_path / "results"
    config.write_text(
        f"""
[identity]
source = "declared"

[operators]
chaos = ["sender"]

[policy]
lease_seconds = {LEASE_SECONDS}
stale_reserving_seconds = {STALE_SECONDS}

[remotes.gemini]
kind = "gemini"
base_url = "{sim.url}"
timeout_seconds = 0.5

[operations."{OP}"]
remote = "gemini"
daily_quota = 100000
sink = "{sink}"
""",
        encoding="utf-8",
    )
    # The settle passes are not the experiment: they get a timeout no loaded machine reaches, so a job
    # sent for the first time while settling is delivered, not held for a slow reply.
    settle_text = config.read_text(encoding="utf-8").replace("timeout_seconds = 0.5", "timeout_seconds = 10")
    assert "timeout_seconds = 10" in settle_text
    settle_config = tmp_path / "settle.toml"
    settle_config.write_text(settle_text, encoding="utf-8")
    create_ledger(ledger)
    sim.set_fault_rates({"drop_before_accept": 0.02, "complete_lose_reply": 0.02, "status": 0.02}, seed=SEED)
    server = ForkServer(ledger, config, log)
    planned: list[str] = []
    kills = cli_kills = exits = rounds = partners = 0
    states: dict[str, str] = {}
    accepted: set[str] = set()  # jobs seen with a handle recorded at some check during the run
    started = time.monotonic()
    try:
        while kills < KILLS or len(states) < MIN_JOBS or len(accepted) < MIN_ACCEPTED:
            assert time.monotonic() - started < DEADLINE_SECONDS, (
                f"minimums not reached in {DEADLINE_SECONDS} s: {kills}/{KILLS} kills, {len(states)}/{MIN_JOBS} jobs, "
                f"{len(accepted)}/{MIN_ACCEPTED} accepted, in {rounds} rounds")
            rounds += 1
            if rng.random() < 0.1:
                sim.add_fault(**rng.choice(FAULTS))
            if rounds % 20 == 0:
                # A real `reclaim` process, killed somewhere between start-up and the end of its work.
                if rng.random() < 0.5:
                    job_id = f"cli-{rounds}"
                    planned.append(job_id)
                    args = ["submit", OP, "--payload", json.dumps({"input": job_id}), "--job-id", job_id]
                else:
                    args = ["tick"]
                proc = subprocess.Popen([sys.executable, "-m", "console", *args], env=chaos_env(ledger, config),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                try:
                    _, err = proc.communicate(timeout=rng.uniform(0.3, 1.3))
                    assert proc.returncode in (0, 4), (args, proc.returncode, err)
                    exits += 1
                except subprocess.TimeoutExpired:
                    proc.kill()
                    _, err = proc.communicate()
                    if proc.returncode in (0, 4):  # it finished on its own just before the kill landed
                        exits += 1
                    else:
                        assert proc.returncode == -signal.SIGKILL, (args, proc.returncode, err)
                        kills += 1
                        cli_kills += 1
            else:
                plan: list[list[str]] = []
                for n in range(rng.randint(1, 4)):
                    if rng.random() < 0.25:
                        plan.append(["tick"])
                    if planned and rng.random() < 0.2:
                        plan.append(["submit", rng.choice(planned)])  # a duplicate: must send nothing
                    job_id = f"w{rounds}-{n}"
                    planned.append(job_id)
                    plan.append(["submit", job_id])
                if rng.random() < 0.7:
                    plan.append(["tick"])
                delays = {server.spawn(plan): rng.uniform(0.0, 0.3)}
                if rng.random() < 0.3:
                    # A second worker at the same time ("two ticks at once are safe"); half of them with a
                    # clock ahead past the stale window, so they take over sends still in flight and the
                    # first worker's late writes must be fenced out.
                    skewed = rng.random() < 0.5
                    partner = server.spawn([["tick"]], offset=SETTLE_OFFSET if skewed else "0")
                    delays[partner] = rng.uniform(0.0, 0.3)
                    partners += 1
                kill_after(delays)
                for pid in delays:
                    status = server.reap(pid)
                    if status["signal"] == signal.SIGKILL:
                        kills += 1
                    else:
                        assert status["code"] == 0, (
                            f"worker failed: {status}\n{log.read_text(encoding='utf-8')[-4000:]}")
                        exits += 1
            states = check_invariants(ledger, sim)
            accepted.update(job_id for job_id, state in states.items() if state in ACCEPTED_STATES)
    finally:
        server.close()
    run_seconds = time.monotonic() - started
    conn = connect(ledger, readonly=True)
    try:
        # Jobs no worker ever began to send: nothing of theirs reached the remote, so settling must deliver them.
        never_sent = {r[0] for r in conn.execute(
            "SELECT job_id FROM jobs WHERE job_id NOT IN (SELECT job_id FROM events WHERE kind = 'send_started')")}
    finally:
        conn.close()

    # Settle: no more faults; passes with the clock past the lease and stale window hold stale sends.
    sim.clear_faults()
    for _ in range(8):
        # Twice the skew: a send begun by a worker whose clock ran SETTLE_OFFSET ahead must look stale too.
        done = subprocess.run([sys.executable, str(CLOCKED), "tick"],
                              env=chaos_env(ledger, settle_config, str(2 * int(SETTLE_OFFSET))),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 4), done.stderr
        states = check_invariants(ledger, sim)
        if not any(s in ("reserving", "submitted", "done") for s in states.values()):
            break
    counts = Counter(states.values())
    assert not (counts["reserving"] or counts["submitted"] or counts["done"]), counts
    assert sum(counts.values()) >= MIN_JOBS, counts  # the stream really was a stream
    # A job the remote accepted (it has a handle) or that was never sent cannot be held: each ends consumed.
    stuck = {job_id: states[job_id] for job_id in accepted | never_sent if states[job_id] != "consumed"}
    assert not stuck, stuck
    assert counts["consumed"] >= MIN_ACCEPTED, counts
    conn = connect(ledger, readonly=True)
    try:
        consumed = [r[0] for r in conn.execute("SELECT idem_key FROM jobs WHERE state = 'consumed'")]
        fenced = conn.execute("SELECT COUNT(*) FROM fenced_writes").fetchone()[0]
    finally:
        conn.close()
    files = {p.name for p in sink.iterdir()}
    leftovers = {n for n in files if n.startswith(".deliver-")}  # a kill between temp write and rename
    assert files - leftovers == {f"{k}.json" for k in consumed}
    print(
        f"\nchaos seed={SEED}: kills={kills} (cli {cli_kills}) clean exits={exits} rounds={rounds} "
        f"seconds={run_seconds:.0f} concurrent={partners} accepted_during_run={len(accepted)} "
        f"never_sent_before_settle={len(never_sent)} "
        f"jobs={len(states)} planned={len(set(planned))} consumed={counts['consumed']} held={counts['held']} "
        f"failed={counts['failed']} creates={sim.count('create')} fenced_writes={fenced} sink_temp_leftovers={len(leftovers)}"
    )
