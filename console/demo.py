"""`reclaim demo`: a simulator, a worker with a job generator, and the console, over a fresh ledger.

Everything runs on loopback; nothing needs a key or a network. On quit, the processes the demo
started are stopped; the ledger stays for `reclaim status` and `reclaim show`.
"""

from __future__ import annotations

import base64
import os
import secrets
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from console import demo_seat, output
from ledger import create_ledger, load_config, shown_ledger

DEMO_OPERATORS = {"alice": ["triage"], "bob": ["triage", "approver"]}

CONFIG_TEMPLATE = """\
# Written by `reclaim demo`. Two seats: alice (triage) and bob (triage, approver), so the four-eyes
# rule can be seen: alice records the finding, bob releases. Both seats are on one machine, so names are
# declared (--operator), not taken from the OS account: every screen says so.
timezone = "UTC"

[identity]
source = "declared"

[policy]
four_eyes = true
release_requires_finding = true
stale_reserving_seconds = 10
lease_seconds = 5
retry_backoff_seconds = 5

[operators]
alice = ["triage"]
bob = ["triage", "approver"]
scheduler = ["sender"]   # the worker and the webhook receiver

[remotes.gemini]
kind = "gemini"
model = "gemini-flash-latest"
api_key_env = "GEMINI_API_KEY"
base_url = "{url}"
timeout_seconds = 1.5
# The simulator delivers signed webhooks (as Gemini's project webhook does) to `reclaim receiver`.
webhook_secret_env = "RECLAIM_DEMO_WEBHOOK_SECRET"

[remotes.storage]
kind = "http"
url = "{url}/cleanup"
lookup_url = "{url}/cleanup/{{handle}}?key={{idem_key}}"
dedupes_by_key = false
timeout_seconds = 1.5

# Sized for an hour of the demo's default rate (0.3 jobs/s) with room for releases.
[operations."article.generate"]
remote = "gemini"
daily_quota = 3000
sink = "results"

[operations."storage.cleanup"]
remote = "storage"
daily_quota = 300
sink = "results"
"""

FAULT_RATES = {"accept_then_hang": 0.04, "complete_lose_reply": 0.03, "status": 0.02, "drop_before_accept": 0.01,
               "status:400": 0.02}
"""The share of Gemini creates the demo's simulator answers with each fault ("status" is a 503)."""
CLEANUP_FAULT_RATES = {"accept_then_hang": 0.1, "complete_lose_reply": 0.1, "drop_before_accept": 0.05,
                       "status": 0.05}
"""The share of storage clean-ups (`POST /cleanup`) the demo's simulator answers with each fault. A clean-up has no
webhook, so each one whose reply is lost stays held until a person queries it: the query (a search by idem key)
finds the clean-up job, running or completed, or nothing, and triage presets the finding and the handle from it."""
SIMULATOR_SEED = 7
DEMO_RATE = 0.3
"""New jobs per second by default (`reclaim demo --rate`)."""

SECRET_ENV = "RECLAIM_DEMO_WEBHOOK_SECRET"
WEBHOOK_FIRST_ATTEMPT_FAIL_RATE = 0.35
"""Share of webhook deliveries whose first attempt fails at the demo's simulator; each is retried with backoff,
as Gemini retries (so it arrives late, not never)."""
WEBHOOK_TIME_COMPRESSION = 1440.0
"""The demo's simulator runs Gemini's delivery retry schedule this much faster: its 24 h window in 60 s."""


@dataclass
class DemoProcesses:
    """The processes a demo started, stopped together."""

    simulator: subprocess.Popen[str]
    feeder: subprocess.Popen[str] | None = None
    receiver: subprocess.Popen[str] | None = None
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    seat: list[subprocess.Popen[str]] = field(default_factory=list)
    """`reclaim serve` and nginx in front of it (`reclaim demo --seat`)."""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM each process, wait (bounded), then SIGKILL what is left."""
        procs = [p for p in (*reversed(self.seat), self.feeder, *self.workers, self.receiver, self.simulator)
                 if p is not None]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def start_simulator(log: Path, fault_rates: dict[str, float], seed: int = SIMULATOR_SEED,
                    cleanup_fault_rates: dict[str, float] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start the simulator on a free loopback port, with `fault_rates` on Gemini creates and `cleanup_fault_rates`
    on clean-ups; return the process and its URL (read from its first line). RuntimeError if it did not start."""
    cmd = [sys.executable, "-m", "ledger.simulator", "--port", "0", "--complete-after", "3", "--seed", str(seed)]
    for kind, rate in fault_rates.items():
        cmd += ["--fault-rate", f"{kind}={rate}"]
    for kind, rate in (cleanup_fault_rates or {}).items():
        cmd += ["--cleanup-fault-rate", f"{kind}={rate}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log.open("a"), text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"the simulator did not start (see {log})")
    return proc, line.strip().rsplit(" ", 1)[-1]


def prepare(folder: Path, url: str, ledger_url: str | None = None) -> tuple[Path | str, Path]:
    """Write the demo config (pointing at `url`) and create the ledger in `folder` (or in the PostgreSQL
    database at `ledger_url`); return the ledger and the config."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "reclaim.toml"
    config.write_text(CONFIG_TEMPLATE.format(url=url), encoding="utf-8")
    ledger: Path | str = ledger_url or folder / "reclaim.db"
    load_config(config)
    create_ledger(ledger)
    return ledger, config


def start_receiver(ledger: Path | str, config: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    """Start `reclaim receiver` on a free loopback port; return the process and its URL."""
    cmd = [sys.executable, "-m", "console", "receiver", "--port", "0", "--ledger", str(ledger), "--config", str(config)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log.open("a"), text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "RECLAIM_OPERATOR": "scheduler"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"the webhook receiver did not start (see {log})")
    return proc, line.strip().rsplit(" ", 1)[-1]


def point_webhooks(
    sim_url: str, receiver_url: str, secret: str, first_attempt_fail_rate: float = WEBHOOK_FIRST_ATTEMPT_FAIL_RATE,
    time_compression: float = WEBHOOK_TIME_COMPRESSION,
) -> None:
    """Register the receiver as the simulator's project webhook (as one does once with the Webhooks API), with
    that share of first delivery attempts failing and the retry schedule compressed by `time_compression`."""
    import json
    import urllib.request

    body = json.dumps({"webhook_url": receiver_url, "webhook_secret": secret,
                       "webhook_first_attempt_fail_rate": first_attempt_fail_rate,
                       "webhook_time_compression": time_compression})
    req = urllib.request.Request(f"{sim_url}/_sim/config", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as reply:
        reply.read()


def start_worker(ledger: Path | str, config: Path, log: Path) -> subprocess.Popen[str]:
    """Start one more plain worker (`reclaim worker`), as a second host would run it."""
    cmd = [sys.executable, "-m", "console", "worker", "--interval", "0.5", "--ledger", str(ledger),
           "--config", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RECLAIM_OPERATOR": "scheduler"}
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def start_feeder(ledger: Path | str, config: Path, log: Path, rate: float) -> subprocess.Popen[str]:
    """Start the worker with its job generator in its own process."""
    cmd = [sys.executable, "-m", "console.demo_feed", "--ledger", str(ledger), "--config", str(config),
           "--rate", str(rate)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def run_demo(folder: Path, *, ui: bool, seconds: float, operator: str, rate: float, ledger_url: str | None = None,
             workers: int = 1, seat: bool = False) -> int:
    """Run the demo; with ui=False, run headless for `seconds` and print where things ended. `ledger_url`
    puts the ledger on PostgreSQL; `workers` > 1 adds plain worker processes beside the feeding one; `seat` opens
    the browser seat on the demo's ledger too (console.demo_seat; a SQLite ledger only)."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "demo.log"
    sim, url = start_simulator(log, FAULT_RATES, SIMULATOR_SEED, CLEANUP_FAULT_RATES)
    procs = DemoProcesses(simulator=sim)
    try:
        ledger, config = prepare(folder, url, ledger_url)
        seat_plan = None
        if seat:
            seat_plan = demo_seat.plan_seat(folder)
            demo_seat.write_configs(seat_plan, config)
        os.environ.setdefault(SECRET_ENV, "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode())
        procs.receiver, receiver_url = start_receiver(ledger, config, log)
        point_webhooks(url, receiver_url, os.environ[SECRET_ENV])
        procs.feeder = start_feeder(ledger, config, log, rate)
        procs.workers = [start_worker(ledger, config, log) for _ in range(max(workers - 1, 0))]
        output.line(f"demo: simulator at {url} (its remote console: {url}/console/interactions?format=html); "
                    f"webhooks to {receiver_url}; ledger {shown_ledger(ledger)}; {workers} worker process(es); "
                    f"config {config}; logs {log}")
        if seat_plan is not None:
            assert isinstance(ledger, Path)
            procs.seat = demo_seat.start_seat(seat_plan, ledger, folder, log)
            output.line(f"demo: browser seat at {seat_plan.url} as alice or bob, password {seat_plan.password} "
                        f"(basic auth by nginx; the seat's config {seat_plan.seat_config})")
        if ui:
            from console.app import run_console

            run_console(ledger, load_config(config), operator, False, config_path=config)
        else:
            # SIGTERM / SIGINT end a headless demo early, the same clean way as its time running out.
            stopping = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stopping.set())
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not stopping.is_set():
                if procs.feeder.poll() is not None:
                    output.notice("demo: the worker exited early; see the log")
                    return 1
                stopping.wait(0.2)
    finally:
        procs.stop()
    output.line(f"demo stopped; the ledger stays: {reclaim_command()} status --ledger {shlex.quote(shown_ledger(ledger))} "
                f"--config {shlex.quote(str(config))}")
    return 0


def reclaim_command() -> str:
    """How to run `reclaim` again from the current folder, as this process was started: `.venv/bin/reclaim`
    under `make demo`, the absolute path of the script when it lies outside, plain `reclaim` otherwise."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None or script.name != "reclaim" or not script.is_file():
        return "reclaim"
    rel = os.path.relpath(script.absolute())
    return shlex.quote(rel if not rel.startswith("..") and os.sep in rel else str(script.absolute()))


def ledger_holders(ledger: Path) -> list[tuple[int, str]]:
    """The other live processes that have `ledger` (or its -wal / -shm / .outcomes file) open, as (pid, command
    line), read from /proc/*/fd (Linux). Processes of other accounts cannot be seen and are not listed; without a
    /proc (not Linux) the list is empty: nothing can be checked there."""
    names = {str(p.resolve()) for p in (ledger, *(ledger.with_name(ledger.name + s) for s in ("-wal", "-shm",
                                                                                               ".outcomes")))}
    found: list[tuple[int, str]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fds = list((entry / "fd").iterdir())
            if not any(os.readlink(fd) in names for fd in fds):
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or another account's
            continue
        found.append((int(entry.name), " ".join(a.decode("utf-8", "replace") for a in argv if a)))
    return sorted(found)
