"""`make demo`'s ledger as it is at a named moment, built deterministically and without the console.

The same config (`console.demo.prepare`), the same job generator (`console.demo_feed.new_job`, 0.3 jobs a
second), the same simulator fault rates and seed (`console.demo.FAULT_RATES`, `SIMULATOR_SEED`), the real
worker passes and the real SDK against a loopback simulator: only the clock is a `ManualClock` started at
`START`, so every time, id and count is the same on every run. The screenshots are drawn over it.

What `make demo` adds that is left out here: the webhook receiver (its deliveries race the worker's passes
and are signed with the wall clock), so no held job is resolved by evidence at this moment; and the faults on
storage clean-ups (`CLEANUP_FAULT_RATES`, drawn apart from the creates': tests/console/test_demo_cleanup_faults.py
drives them), so this moment's held jobs are its Gemini jobs. What differs:
the worker passes run with a 5 s remote timeout and a 60 s lease (the demo's config file says 1.5 s and
5 s): those are measured on the wall clock, and the demo's margins are thin enough that a loaded machine
would turn a slow ordinary send into a held or abandoned one and draw a different moment. Faults do not
depend on them: a hang still ends in a timeout.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from console.demo import DEMO_RATE, FAULT_RATES, SIMULATOR_SEED, prepare
from console.demo_feed import new_job
from ledger import (
    Config,
    JobKey,
    ManualClock,
    RemoteCache,
    WorkerBeat,
    connect,
    get_job,
    idem_key,
    load_config,
    parse_time,
    query_job,
    record_finding,
    tick,
)
from ledger.simulator import Simulator

START = parse_time("2026-12-03T09:00:00Z")
"""When the demo at a moment starts (its first job)."""

WORKER = "laptop:4242:5eed07"
"""The worker's name, shaped like `ledger.worker.worker_id()` (host, pid, suffix) but fixed."""

MOMENTS = ("first-finding",)
"""The moments that can be built. first-finding: the feed has run for FEED_SECONDS; then alice (triage)
queries the oldest held job and, FINDING_AFTER later, records what the remote console showed for it; the
moment is SHOWN_AFTER that. The feed and the worker go on all along, as in `make demo`."""

FEED_SECONDS = 120.0
FINDING_AFTER = 60.0
"""Seconds between alice's query and her finding (she reads the remote console meanwhile)."""
SHOWN_AFTER = 10.0
"""Seconds after the finding that the moment is drawn at."""
WORKER_TIMEOUT_SECONDS = 5.0
WORKER_LEASE_SECONDS = 60.0
PASS_SECONDS = 0.5
"""The demo worker's pause between passes (console/demo_feed.py)."""


@dataclass
class DemoMoment:
    """A built moment: the demo folder's ledger and config, the clock at the moment, and its jobs by role."""

    ledger: Path
    config_path: Path
    config: Config
    clock: ManualClock
    jobs: dict[str, JobKey] = field(default_factory=dict)
    held: list[JobKey] = field(default_factory=list)


def start_simulator(port: int = 0) -> Simulator:
    """A loopback simulator set as `reclaim demo` sets its own: fault rates and seed (not yet started).

    Interactions complete at once (the demo waits 3 s of wall time; this clock does not move by itself), and
    their ids are drawn from the seed, so the handles on screen are the same on every run. `port` 0: a free one."""
    sim = Simulator(port=port)
    sim.set_fault_rates(FAULT_RATES, seed=SIMULATOR_SEED)
    sim.seed_interaction_ids(SIMULATOR_SEED)
    return sim


def build_moment(folder: Path, sim: Simulator, moment: str = "first-finding") -> DemoMoment:
    """Write `folder`/reclaim.toml and reclaim.db as `make demo` leaves them at `moment` (one of MOMENTS).

    `sim` is a started simulator from `start_simulator()`, used by nothing else: its fault draws follow
    the creates sent to it. Raises ValueError for an unknown moment."""
    if moment not in MOMENTS:
        raise ValueError(f"unknown demo moment {moment!r}; known: {', '.join(MOMENTS)}")
    ledger, config_path = prepare(folder, sim.url)
    config = load_config(config_path)
    worker_config = _wall_clock_tolerant(config)
    clock = ManualClock(START)
    remotes = RemoteCache(worker_config)
    conn = connect(ledger)
    beat = WorkerBeat(conn, clock, WORKER, kind="worker", interval=PASS_SECONDS)
    keys: list[JobKey] = []
    next_job = START

    def feed_until(t: float) -> None:
        # The feed's loop (console/demo_feed.py): new jobs when due, one worker pass, a pause.
        nonlocal next_job
        while clock.now() < t:
            while clock.now() >= next_job:
                keys.append(new_job(conn, worker_config, clock, len(keys) + 1).key)
                next_job += 1.0 / DEMO_RATE
            tick(conn, worker_config, clock=clock, remotes=remotes, owner=WORKER, beat=beat)
            clock.advance(PASS_SECONDS)

    try:
        feed_until(START + FEED_SECONDS)
        held = [k for k in keys if get_job(conn, k).state == "held"]
        if not held:
            raise RuntimeError(f"the demo feed held no job in {FEED_SECONDS:.0f} s")
        # alice takes the oldest hold while the feed goes on: asks the remote, looks in its console, records.
        first = held[0]
        query_job(conn, config, first, remotes.for_operation(first.operation), actor="alice", clock=clock)
        feed_until(clock.now() + FINDING_AFTER)
        category, note = _finding(sim, first)
        record_finding(conn, config, first, category, note, actor="alice", clock=clock)
        feed_until(clock.now() + SHOWN_AFTER)
        held = [k for k in keys if get_job(conn, k).state == "held"]
    finally:
        conn.close()
    return DemoMoment(ledger=ledger, config_path=config_path, config=config, clock=clock,
                      jobs={"found": first, "held_next": held[1]}, held=held)


def _wall_clock_tolerant(config: Config) -> Config:
    """`config` with the remote timeouts and the lease the worker passes here use (see the module's note)."""
    remotes = {name: dataclasses.replace(rc, timeout_seconds=max(rc.timeout_seconds, WORKER_TIMEOUT_SECONDS))
               for name, rc in config.remotes.items()}
    policy = dataclasses.replace(config.policy, lease_seconds=max(config.policy.lease_seconds, WORKER_LEASE_SECONDS))
    return dataclasses.replace(config, remotes=remotes, policy=policy)


def _finding(sim: Simulator, key: JobKey) -> tuple[str, str]:
    """What alice finds in the simulator's remote console for the job's idem label."""
    found = sim.find_by_idem(idem_key(key.job_id, key.operation))
    if found:
        return ("completed_reply_lost",
                f"The remote console lists interaction {found[0]['id']} for this idem label; the reply never "
                "reached us.")
    return ("not_received", "The remote console lists nothing for this idem label: the request never arrived.")
