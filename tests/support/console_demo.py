"""A deterministic ledger for the console's tests and snapshots: states `make demo` rarely reaches in minutes.

Built with the real ledger API (reserve, worker passes against the loopback simulator, triage) under a
`ManualClock`, so every time, id and count is the same on every run: 14 days of history, overdue and
resolved holds, a blocked new job, a notification channel, a third operator (carol). The scenes the tests
drive over it are in console_scenes.py; the screenshots are drawn over `make demo`'s own data instead
(demo_moment.py). `scripts/export_browser_seat.py` draws the browser seat over it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ledger import (
    Config,
    JobKey,
    ManualClock,
    RemoteCache,
    TickReport,
    WorkerBeat,
    assign,
    claim_for_send,
    connect,
    create_ledger,
    get_job,
    idem_key,
    load_config,
    parse_time,
    poll_submitted,
    query_job,
    record_finding,
    reject,
    send_one,
    tick,
)
from ledger import (
    reserve_job as reserve,
)
from ledger.simulator import Simulator
from ledger.worker import submit_now

T0 = parse_time("2026-12-01T09:00:00Z")
"""The demo's 'now': every screen of the demo is drawn at this instant."""

ARTICLE = "article.generate"
SUMMARY = "summary.generate"
WORKER = "worker-1"

CONFIG = """\
timezone = "UTC"

[identity]
source = "declared"

[policy]
four_eyes = true
release_requires_finding = true
stale_reserving_seconds = 120
lease_seconds = 60
retry_backoff_seconds = 30

[operators]
alice = ["triage"]
bob = ["triage", "approver"]
carol = ["approver"]

[remotes.gemini]
kind = "gemini"
model = "gemini-sim"
base_url = "{url}"
timeout_seconds = 5

[operations."article.generate"]
remote = "gemini"
daily_quota = 200
sink = "results"
{extra}
"""

EXTRA_DEMO = """
[operations."summary.generate"]
remote = "gemini"
daily_quota = 50
sink = "results"

[notify.oncall]
kind = "webhook"
url = "{url}/v1/interactions?key=simulator"  # answers 400 (no model): an uncertain delivery
events = ["held", "resolved"]
timeout_seconds = 2
"""


def write_config(folder: Path, url: str, *, demo: bool = False, keys: dict[str, str] | None = None) -> Path:
    """Write the test config (alice triage, bob triage+approver, carol approver; dave is a viewer)."""
    extra = EXTRA_DEMO.format(url=url) if demo else ""
    if keys:
        extra += "\n[keys]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in keys.items())
    path = folder / "reclaim.toml"
    path.write_text(CONFIG.format(url=url, extra=extra), encoding="utf-8")
    return path


@dataclass
class Demo:
    """A built demo: where the ledger and config are, the clock at 'now', and the interesting jobs."""

    ledger: Path
    config_path: Path
    config: Config
    clock: ManualClock
    jobs: dict[str, JobKey] = field(default_factory=dict)


def _payload(text: str) -> dict[str, str]:
    return {"input": text}


def build_demo(folder: Path, sim: Simulator) -> Demo:
    """Fill `folder` with reclaim.toml and ledger.db: 14 days of history and today's held, failed, open jobs."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = write_config(folder, sim.url, demo=True)
    config = load_config(config_path)
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T0)
    remotes = RemoteCache(config)
    conn = connect(ledger)
    jobs: dict[str, JobKey] = {}

    def res(op: str, job_id: str, target: str | None = None) -> JobKey:
        r = reserve(conn, config, op, _payload(f"write {job_id}"), clock=clock, job_id=job_id, target=target)
        assert r.outcome == "reserved", (job_id, r.outcome)
        return r.key

    beat = WorkerBeat(conn, clock, WORKER, kind="worker", interval=60.0)

    def run_tick() -> TickReport:
        return tick(conn, config, clock=clock, remotes=remotes, owner=WORKER, beat=beat)

    try:
        # 13 past days of steady work, all delivered.
        per_day = (2, 3, 1, 4, 2, 5, 4, 2, 1, 3, 4, 2, 3)
        for back, n in zip(range(13, 0, -1), per_day, strict=True):
            clock.set(T0 - back * 86400)
            day = f"d-{back:02d}"
            for i in range(n):
                res(ARTICLE, f"article {day} #{i + 1:02d}", f"blog/{day}-{i + 1:02d}")
            if back % 3 == 0:
                res(SUMMARY, f"summary {day}", "newsletter/daily")
            run_tick()

        # Today: a few delivered this morning.
        clock.set(T0 - 5 * 3600)
        for i in range(1, 5):
            res(ARTICLE, f"article today #{i:02d}", f"blog/post-{i:04d}")
        run_tick()

        # Held: the reset after the request went out (was it delivered?).
        clock.set(T0 - 4 * 3600 - 600)
        key = res(ARTICLE, "article today #07", "blog/post-0007")
        sim.add_fault("drop_before_accept", match_idem=idem_key(*_k(key)))
        run_tick()
        jobs["held_reset"] = key

        # Held: completed remotely, reply lost.
        clock.set(T0 - 3 * 3600)
        key = res(ARTICLE, "article today #09", "blog/post-0009")
        sim.add_fault("complete_lose_reply", match_idem=idem_key(*_k(key)))
        run_tick()
        jobs["held_lost_reply"] = key

        # Held: a 503 from the remote.
        clock.set(T0 - 2 * 3600)
        key = res(SUMMARY, "summary today", "newsletter/daily")
        sim.add_fault("status", status=503, match_idem=idem_key(*_k(key)))
        run_tick()
        jobs["held_503"] = key

        # Held: a worker died mid-send (claimed, never recorded an outcome); the recovery pass holds it.
        clock.set(T0 - 90 * 60)
        key = res(ARTICLE, "article today #12", "blog/post-0012")
        claim_for_send(conn, config, key, owner="worker-2", now=clock.now())
        clock.set(T0 - 80 * 60)
        run_tick()
        jobs["held_orphan"] = key

        # Failed: rejected as invalid.
        clock.set(T0 - 70 * 60)
        key = res(ARTICLE, "article today #14", "blog/post-0014")
        sim.add_fault("status", status=400, match_idem=idem_key(*_k(key)))
        run_tick()
        jobs["failed"] = key

        # Resolved: held, looked at by bob, rejected by carol.
        clock.set(T0 - 60 * 60)
        key = res(ARTICLE, "article today #15", "blog/post-0015")
        sim.add_fault("drop_before_accept", match_idem=idem_key(*_k(key)))
        run_tick()
        clock.set(T0 - 50 * 60)
        query_job(conn, config, key, remotes.for_operation(ARTICLE), actor="bob", clock=clock)
        record_finding(conn, config, key, "changed_by_other", "Editor published the post by hand at 08:05.",
                              actor="bob", clock=clock)
        clock.set(T0 - 45 * 60)
        reject(conn, config, key, actor="carol", clock=clock, reason="Published by hand; do not generate.")
        jobs["resolved"] = key

        # Triage under way on the oldest hold: bob queried and found it not received; alice owns it, overdue.
        clock.set(T0 - 40 * 60)
        held = jobs["held_reset"]
        query_job(conn, config, held, remotes.for_operation(ARTICLE), actor="bob", clock=clock)
        clock.set(T0 - 35 * 60)
        record_finding(
            conn, config, held, "not_received",
            "No interaction labelled with this idem key in the Gemini console; our proxy log shows the "
            "connection reset before any response.", actor="bob", clock=clock,
        )
        assign(conn, config, held, "alice", T0 - 20 * 60, actor="bob", clock=clock,
                      reason="alice is on call until noon")
        # The lost reply: alice asked; owned by bob, due this afternoon.
        clock.set(T0 - 30 * 60)
        query_job(conn, config, jobs["held_lost_reply"], remotes.for_operation(ARTICLE), actor="alice",
                         clock=clock)
        assign(conn, config, jobs["held_lost_reply"], "bob", T0 + 4 * 3600, actor="alice", clock=clock,
                      reason="bob can check the Gemini console")

        # Done (polled, not yet delivered), submitted (accepted, not polled), reserving (not sent / not delivered).
        clock.set(T0 - 20 * 60)
        key = res(ARTICLE, "article today #16", "blog/post-0016")
        send_one(conn, config, key, remotes.for_operation(ARTICLE), clock=clock, owner=WORKER)
        poll_submitted(conn, config, remotes, clock=clock, owner=WORKER, report=TickReport())
        jobs["done"] = key
        clock.set(T0 - 10 * 60)
        key = res(ARTICLE, "article today #17", "blog/post-0017")
        send_one(conn, config, key, remotes.for_operation(ARTICLE), clock=clock, owner=WORKER)
        jobs["submitted"] = key
        clock.set(T0 - 5 * 60)
        key = res(SUMMARY, "summary today (retry)", "newsletter/weekly")
        sim.add_fault("status", status=429, match_idem=idem_key(*_k(key)))
        send_one(conn, config, key, remotes.for_operation(SUMMARY), clock=clock, owner=WORKER)
        jobs["not_delivered"] = key
        # The scheduler tries the oldest hold's post again under a new job id: refused while #07 is held, and
        # recorded on #07 (blocked_new_job), so the held job shows the work it holds up.
        clock.set(T0 - 3 * 60)
        blocked = reserve(conn, config, ARTICLE, _payload("write article today #07 (retry)"), clock=clock,
                          job_id="article today #07 (retry)", target="blog/post-0007", actor="scheduler")
        assert blocked.outcome == "blocked_by_hold" and blocked.blocking == jobs["held_reset"], blocked
        clock.set(T0 - 60)
        jobs["reserving"] = res(ARTICLE, "article today #18", "blog/post-0018")
        # worker-1 passes once a minute; its last pass (a quiet one) ended 75 s before 'now': the header says
        # "1 worker · 1m". Recorded on its heartbeat only, so the jobs above stay as the scenes need them.
        clock.set(T0 - 80)
        beat.pass_started()
        clock.set(T0 - 75)
        beat.pass_ended(TickReport().as_dict())
    finally:
        conn.close()
    clock.set(T0)
    return Demo(ledger=ledger, config_path=config_path, config=config, clock=clock, jobs=jobs)


def _k(key: JobKey) -> tuple[str, str]:
    return key.job_id, key.operation


def held_with_handle(folder: Path, sim: Simulator, *, job_id: str, target: str, timeout_s: int = 5,
                     at: float = T0 - 3600) -> tuple[Path, Path, ManualClock, JobKey]:
    """A ledger in `folder` whose one job the remote accepted (handle recorded) and then denied knowing: held, so a
    query asks the remote about that handle (the remote's timeout is `timeout_s`). Returns the ledger, its config
    file, the clock it was written by (at `at`) and the job."""
    config_path = write_config(folder, sim.url)
    config_path.write_text(config_path.read_text().replace("timeout_seconds = 5", f"timeout_seconds = {timeout_s}"))
    config = load_config(config_path)
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(at)
    key = JobKey(job_id, ARTICLE)
    remotes = RemoteCache(config)
    conn = connect(ledger)
    try:
        res = submit_now(conn, config, ARTICLE, {"input": f"write {job_id}"}, clock=clock, job_id=key.job_id,
                         target=target, remotes=remotes)
        assert res.state == "submitted"
        sim.add_fault("status", status=404, method="get")  # the poll: "no such interaction" -> held
        poll_submitted(conn, config, remotes, clock=clock, owner=WORKER, report=TickReport())
        job = get_job(conn, key)
        assert job.state == "held" and job.handle
    finally:
        conn.close()
    return ledger, config_path, clock, key


def held_storm(folder: Path, sim: Simulator, n: int) -> tuple[Path, Config, ManualClock, list[JobKey]]:
    """A ledger whose `n` jobs were each held by a 503 on their create."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T0)
    conn = connect(ledger)
    keys = []
    try:
        for i in range(n):
            sim.add_fault("status", status=503, match_idem=idem_key(f"storm-{folder.name}-{i:02d}", ARTICLE))
            res = submit_now(conn, config, ARTICLE, {"input": f"storm {i}"}, clock=clock,
                             job_id=f"storm-{folder.name}-{i:02d}", remotes=RemoteCache(config))
            assert res.state == "held", res
            keys.append(res.key)
    finally:
        conn.close()
    return ledger, config, clock, keys
