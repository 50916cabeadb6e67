"""A worker SIGKILLed at each named crash point, then restarted: where every job must end (docs/design.md, the send path).

Real `reclaim` subprocesses (`python -m console`) die by a real SIGKILL (RECLAIM_CRASH_AT, see
ledger/crashpoints.py). The simulator runs in the test process, so its HTTP-level counts survive the
worker's death. Each check reads the ledger back from a fresh connection.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from child_env import inherited_env
from ledger_reads import QmarkSql

from ledger.crashpoints import POINTS
from ledger.db import connect
from ledger.model import idem_key
from ledger.simulator import Simulator

CLOCKED = Path(__file__).parents[1] / "support" / "clocked_reclaim.py"  # the CLI with a test clock (test-only)
OP = "article.generate"
LEASE_SECONDS = 30
BACKENDS = ("sqlite", "postgresql")  # every crash point on each backend (tests/conftest.py)
STALE_SECONDS = 60
# Far enough ahead that the lease and the stale window have both run out.
PAST_STALE = str(LEASE_SECONDS + STALE_SECONDS + 5)
HELD_NO_SEARCH = "no handle recorded and the remote cannot be searched"


@pytest.fixture
def cp_sim() -> Iterator[Simulator]:
    with Simulator(complete_after=0.0).start() as s:
        yield s


@pytest.fixture
def cp_env(tmp_path: Path, cp_sim: Simulator, ledger_backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """A ledger (a file in tmp_path, or a fresh PostgreSQL database) and a config in tmp_path, pointed at
    the simulator; returns the subprocess environment."""
    ledger = request.getfixturevalue("pg_url") if ledger_backend == "postgresql" else str(tmp_path / "reclaim.db")
    config = tmp_path / "reclaim.toml"
    config.write_text(
        f"""
[identity]
source = "declared"

[operators]
"cp-test" = ["sender"]

[policy]
lease_seconds = {LEASE_SECONDS}
stale_reserving_seconds = {STALE_SECONDS}

[remotes.gemini]
kind = "gemini"
base_url = "{cp_sim.url}"
timeout_seconds = 5

[operations."{OP}"]
remote = "gemini"
daily_quota = 100
sink = "{tmp_path / 'results'}"
""",
        encoding="utf-8",
    )
    env = inherited_env()
    env.update(RECLAIM_LEDGER=ledger, RECLAIM_CONFIG=str(config), RECLAIM_OPERATOR="cp-test",
               RECLAIM_JOURNAL_DIR=str(tmp_path))
    env.pop("GEMINI_API_KEY", None)
    done = cp_run(env, "init")
    assert done.returncode == 0, done.stderr
    return env


def cp_run(env: dict[str, str], *args: str, crash_at: str | None = None, offset: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    """Run `reclaim ARGS` in a real subprocess, optionally set to die at a crash point or with a moved clock."""
    e = dict(env)
    if crash_at:
        e["RECLAIM_CRASH_AT"] = crash_at
    if offset:
        e["RECLAIM_TEST_CLOCK_OFFSET"] = offset
    return subprocess.run(
        [sys.executable, str(CLOCKED), *args], env=e, capture_output=True, text=True, timeout=60
    )


def cp_submit(env: dict[str, str], job_id: str, *, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return cp_run(env, "submit", OP, "--payload", json.dumps({"input": f"write {job_id}"}), "--job-id", job_id,
                  crash_at=crash_at)


def cp_killed(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr)


def cp_job(env: dict[str, str], job_id: str) -> dict[str, Any]:
    """The job row, read from a fresh read-only connection."""
    conn = QmarkSql(connect(env["RECLAIM_LEDGER"], readonly=True))
    try:
        row = conn.execute("SELECT * FROM jobs WHERE job_id = ? AND operation = ?", (job_id, OP)).fetchone()
        assert row is not None, f"job {job_id} missing from the ledger"
        return dict(row)
    finally:
        conn.close()


def cp_check_ledger(env: dict[str, str], sim: Simulator) -> None:
    """Invariants after every crash: <= 1 create POST per job, contiguous per-job event sequences."""
    conn = QmarkSql(connect(env["RECLAIM_LEDGER"], readonly=True))
    try:
        jobs = conn.execute("SELECT job_id, operation, idem_key FROM jobs").fetchall()
        assert jobs
        for job_id, operation, ikey in jobs:
            assert sim.count("create", idem=ikey) <= 1, (job_id, sim.calls())
            seqs = [r[0] for r in conn.execute(
                "SELECT seq FROM events WHERE job_id = ? AND operation = ? ORDER BY seq", (job_id, operation))]
            assert seqs == list(range(1, len(seqs) + 1)), (job_id, seqs)
        known = {r[2] for r in jobs}
        for ikey, per in sim.calls()["by_idem"].items():
            if per.get("create"):
                assert ikey in known, f"a create for idem {ikey} that the ledger never reserved"
    finally:
        conn.close()


def cp_event_kinds(env: dict[str, str], job_id: str) -> list[str]:
    conn = QmarkSql(connect(env["RECLAIM_LEDGER"], readonly=True))
    try:
        return [r[0] for r in conn.execute(
            "SELECT kind FROM events WHERE job_id = ? AND operation = ? ORDER BY seq", (job_id, OP))]
    finally:
        conn.close()


def cp_sink_files(env: dict[str, str]) -> list[Path]:
    folder = Path(env["RECLAIM_CONFIG"]).parent / "results"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def cp_tick_until(env: dict[str, str], job_id: str, state: str, *, offset: str | None = None, tries: int = 5) -> None:
    """Run `reclaim tick` until the job reaches `state` (bounded); the simulator completes jobs at once."""
    for _ in range(tries):
        done = cp_run(env, "tick", offset=offset)
        assert done.returncode in (0, 4), done.stderr
        if cp_job(env, job_id)["state"] == state:
            return
    pytest.fail(f"job {job_id} did not reach {state} in {tries} ticks: {cp_job(env, job_id)['state']}")


def test_every_named_point_is_covered() -> None:
    covered = {"after_reserve_commit", "after_send_claim", "after_remote_accept", "after_done", "after_deliver"}
    assert covered <= set(POINTS)


def test_after_reserve_commit_tick_sends_once_then_consumed(cp_env: dict[str, str], cp_sim: Simulator) -> None:
    ikey = idem_key("j-reserve", OP)
    cp_killed(cp_submit(cp_env, "j-reserve", crash_at="after_reserve_commit"))
    job = cp_job(cp_env, "j-reserve")
    assert job["state"] == "reserving" and job["send_started_at"] is None
    assert cp_sim.count("create", idem=ikey) == 0
    cp_check_ledger(cp_env, cp_sim)

    cp_tick_until(cp_env, "j-reserve", "consumed")
    assert cp_sim.count("create", idem=ikey) == 1
    assert [p.name for p in cp_sink_files(cp_env)] == [f"{ikey}.json"]
    # A resubmission of the same job is a duplicate: nothing more is sent.
    again = cp_submit(cp_env, "j-reserve")
    assert again.returncode == 0 and "duplicate" in again.stdout
    assert cp_sim.count("create", idem=ikey) == 1
    cp_check_ledger(cp_env, cp_sim)


def test_after_send_claim_is_held_and_never_sent(cp_env: dict[str, str], cp_sim: Simulator) -> None:
    ikey = idem_key("j-claim", OP)
    cp_killed(cp_submit(cp_env, "j-claim", crash_at="after_send_claim"))
    job = cp_job(cp_env, "j-claim")
    assert job["state"] == "reserving" and job["send_started_at"] is not None and job["epoch"] == 1
    cp_check_ledger(cp_env, cp_sim)

    # Restarted inside the lease: the begun send is neither repeated nor judged yet.
    assert cp_run(cp_env, "tick").returncode == 0
    assert cp_job(cp_env, "j-claim")["state"] == "reserving"
    assert cp_sim.count("create", idem=ikey) == 0

    # Past the lease and the stale window: held, because Gemini cannot be searched by key.
    done = cp_run(cp_env, "tick", offset=PAST_STALE)
    assert done.returncode == 4, (done.stdout, done.stderr)
    job = cp_job(cp_env, "j-claim")
    assert job["state"] == "held"
    assert job["held_reason"] == HELD_NO_SEARCH
    assert cp_sim.count("create", idem=ikey) == 0
    assert cp_sim.count("create") == 0
    assert cp_event_kinds(cp_env, "j-claim") == ["reserve", "send_started", "stale_claimed", "orphan_held"]
    # Further passes leave a held job alone.
    assert cp_run(cp_env, "tick", offset=PAST_STALE).returncode == 0
    assert cp_job(cp_env, "j-claim")["state"] == "held"
    assert cp_sim.count("create") == 0
    cp_check_ledger(cp_env, cp_sim)


def test_after_remote_accept_is_held_with_one_post(cp_env: dict[str, str], cp_sim: Simulator) -> None:
    ikey = idem_key("j-accept", OP)
    cp_killed(cp_submit(cp_env, "j-accept", crash_at="after_remote_accept"))
    job = cp_job(cp_env, "j-accept")
    assert job["state"] == "reserving" and job["handle"] is None
    assert cp_sim.count("create", idem=ikey) == 1
    assert len(cp_sim.find_by_idem(ikey)) == 1  # the remote did accept it
    cp_check_ledger(cp_env, cp_sim)

    assert cp_run(cp_env, "tick").returncode == 0
    assert cp_job(cp_env, "j-accept")["state"] == "reserving"
    assert cp_sim.count("create", idem=ikey) == 1

    done = cp_run(cp_env, "tick", offset=PAST_STALE)
    assert done.returncode == 4, (done.stdout, done.stderr)
    job = cp_job(cp_env, "j-accept")
    assert job["state"] == "held" and job["held_reason"] == HELD_NO_SEARCH and job["handle"] is None
    assert cp_sim.count("create", idem=ikey) == 1
    cp_check_ledger(cp_env, cp_sim)


def test_after_done_restart_delivers_once(cp_env: dict[str, str], cp_sim: Simulator) -> None:
    ikey = idem_key("j-done", OP)
    sent = cp_submit(cp_env, "j-done")
    assert sent.returncode == 0 and cp_job(cp_env, "j-done")["state"] == "submitted", sent.stdout
    cp_killed(cp_run(cp_env, "tick", crash_at="after_done"))
    job = cp_job(cp_env, "j-done")
    assert job["state"] == "done" and job["result"] is not None
    assert cp_sink_files(cp_env) == []
    cp_check_ledger(cp_env, cp_sim)

    cp_tick_until(cp_env, "j-done", "consumed")
    assert [p.name for p in cp_sink_files(cp_env)] == [f"{ikey}.json"]
    body = json.loads(cp_sink_files(cp_env)[0].read_text(encoding="utf-8"))
    assert body["idem_key"] == ikey and body["handle"] == job["handle"]
    assert cp_sim.count("create", idem=ikey) == 1
    assert cp_event_kinds(cp_env, "j-done").count("delivered") == 1
    cp_check_ledger(cp_env, cp_sim)


def test_after_deliver_restart_redelivers_harmlessly(cp_env: dict[str, str], cp_sim: Simulator) -> None:
    ikey = idem_key("j-deliver", OP)
    assert cp_submit(cp_env, "j-deliver").returncode == 0
    cp_killed(cp_run(cp_env, "tick", crash_at="after_deliver"))
    assert cp_job(cp_env, "j-deliver")["state"] == "done"
    files = cp_sink_files(cp_env)
    assert [p.name for p in files] == [f"{ikey}.json"]
    first = json.loads(files[0].read_text(encoding="utf-8"))
    cp_check_ledger(cp_env, cp_sim)

    cp_tick_until(cp_env, "j-deliver", "consumed")
    files = cp_sink_files(cp_env)
    assert [p.name for p in files] == [f"{ikey}.json"]  # rewritten in place, no temp file left behind
    assert json.loads(files[0].read_text(encoding="utf-8")) == first
    assert cp_sim.count("create", idem=ikey) == 1
    assert cp_event_kinds(cp_env, "j-deliver").count("delivered") == 1
    cp_check_ledger(cp_env, cp_sim)
