"""No decision while attempt 1 can still land: a job held because its send got no answer says until when its
request could still reach the remote, and release, reject and remediate wait for that moment (exit 12, nothing
written); reconcile does not wait. A job held by an answer (a 503) has no such moment.

The simulator hangs after accepting the create (`accept_then_hang`), so the send times out (0.3 s) with no answer:
held at T0 by the manual clock, its request could still arrive until T0 + the send margin (1 s).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import triage
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, parse_config
from ledger.errors import EXIT_NOT_YET, NotYet
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
T0 = parse_time("2026-12-01T12:00:00Z")
MARGIN = 1.0
DECISIONS = {"release": ["--reason", "not received"], "reject": ["--reason", "not wanted"],
             "remediate": ["--note", "done by hand, ticket 42"]}


@pytest.fixture
def hang_config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], tmp_path: Path
                ) -> tuple[Path, Config]:
    doc = make_config(timeout_seconds=0.3, policy={"send_margin_seconds": MARGIN})
    return write_config(doc), parse_config(doc, base_dir=tmp_path)


def _held_by_timeout(sim: Simulator, conn: Any, cfg: Config, job_id: str) -> JobKey:
    sim.add_fault("accept_then_hang")
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=ManualClock(T0), job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def test_a_job_held_without_an_answer_says_until_when_its_request_could_arrive(
    sim: Simulator, conn: Any, hang_config: tuple[Path, Config], run_cli: Callable[..., Any],
) -> None:
    config, cfg = hang_config
    key = _held_by_timeout(sim, conn, cfg, "hung")
    job = triage.get_job(conn, key)
    assert triage.may_arrive_until(conn, job) == T0 + MARGIN

    shown = run_cli("show", "hung", config=config, now=T0 + 0.5)
    assert shown.rc == 0, shown
    assert "attempt 1 could still arrive until 12:00:01 (UTC): release, reject and remediate wait" in shown.stdout
    doc = json.loads(run_cli("show", "hung", "--json", config=config, now=T0 + 0.5).stdout)
    assert doc["may_arrive_until"] == "2026-12-01T12:00:01Z"
    # Once the moment has passed, nothing is said.
    later = run_cli("show", "hung", config=config, now=T0 + MARGIN)
    assert "could still arrive" not in later.stdout
    assert json.loads(run_cli("show", "hung", "--json", config=config, now=T0 + MARGIN).stdout)[
        "may_arrive_until"] is None


def test_release_reject_and_remediate_wait_for_the_moment_and_change_nothing_before(
    sim: Simulator, conn: Any, hang_config: tuple[Path, Config], ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    config, cfg = hang_config
    _held_by_timeout(sim, conn, cfg, "hung")
    assert run_cli("finding", "hung", "--category", "not_received", "--note", "nothing in the logs",
                   operator="alice", config=config, now=T0 + 0.1).rc == 0
    before, creates = fingerprint(ledger_path), sim.count("create")
    for name, args in DECISIONS.items():
        r = run_cli(name, "hung", *args, operator="carol", config=config, now=T0 + 0.5)
        assert r.rc == EXIT_NOT_YET == 12, (name, r)
        [line] = r.stderr.strip().splitlines()
        assert line == (f"reclaim: error: {name} refused for hung / {OP}: attempt 1 could still arrive until "
                        f"12:00:01 (UTC) (in 1s); {name} after then (a reconcile need not wait)"), line
        dry = run_cli(name, "hung", *args, "--dry-run", "--json", operator="carol", config=config, now=T0 + 0.5)
        assert json.loads(dry.stdout)["refusal"].startswith("attempt 1 could still arrive until 12:00:01"), dry
    assert fingerprint(ledger_path) == before and sim.count("create") == creates

    r = run_cli("release", "hung", "--reason", "not received", operator="carol", config=config, now=T0 + MARGIN)
    assert r.rc == 0, r
    assert triage.get_job(conn, JobKey("hung", OP)).state == "reserving"


def test_reconcile_need_not_wait(
    sim: Simulator, conn: Any, hang_config: tuple[Path, Config], run_cli: Callable[..., Any],
) -> None:
    config, cfg = hang_config
    key = _held_by_timeout(sim, conn, cfg, "hung")
    (found,) = sim.find_by_idem(triage.get_job(conn, key).idem_key)
    r = run_cli("reconcile", "hung", "--handle", found["id"], "--reason", "seen in the console", operator="carol",
                config=config, now=T0 + 0.1)
    assert r.rc == 0, r
    assert triage.get_job(conn, key).state == "submitted"


def test_the_ledger_raises_not_yet_with_the_moment(
    sim: Simulator, conn: Any, hang_config: tuple[Path, Config],
) -> None:
    _config, cfg = hang_config
    key = _held_by_timeout(sim, conn, cfg, "hung")
    with pytest.raises(NotYet) as raised:
        triage.reject(conn, cfg, key, actor="carol", clock=ManualClock(T0 + 0.2), reason="not wanted")
    assert raised.value.until == T0 + MARGIN and raised.value.exit_code == 12
    triage.reject(conn, cfg, key, actor="carol", clock=ManualClock(T0 + MARGIN), reason="not wanted")
    assert triage.get_job(conn, key).state == "rejected"


def test_a_job_held_by_an_answer_has_no_moment_to_wait_for(
    sim: Simulator, conn: Any, hang_config: tuple[Path, Config],
) -> None:
    _config, cfg = hang_config
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": "503"}, clock=ManualClock(T0), job_id="answered",
                     remotes=RemoteCache(cfg))
    assert res.state == "held"
    assert triage.may_arrive_until(conn, triage.get_job(conn, res.key)) is None
    triage.reject(conn, cfg, res.key, actor="carol", clock=ManualClock(T0), reason="not wanted")
