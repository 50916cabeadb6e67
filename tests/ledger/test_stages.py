"""Held-job stages on both backends: who each held job waits for, the `stage:` filter (its SQL), the count of jobs
awaiting an approver (four-eyes leaves out the ones they looked at), and a new attempt starting over."""

from __future__ import annotations

from typing import Any

import pytest

from ledger import stages, triage
from ledger.clock import ManualClock
from ledger.config import Config
from ledger.errors import BadInput
from ledger.model import JobFilter
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store
from ledger.views import builtin_views
from ledger.worker import RemoteCache, submit_now

NOW = 1_796_115_600.0  # 2026-12-01T09:00:00Z: what a since:/until: span in a filter counts back from

BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
OP = "article.generate"


def _held(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, job_id: str) -> Any:
    sim.add_fault("drop_before_accept")
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _ids(conn: Any, text: str, me: str, four_eyes: bool = True) -> list[str]:
    flt = JobFilter.parse(text, me=me, four_eyes=four_eyes, now=NOW)
    return sorted(j.job_id for j in jobs_store.list_jobs(conn, "held", flt=flt))


def test_stages_filter_and_count(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock) -> None:
    none, by_alice, by_bob, owned = (_held(sim, conn, cfg, clock, n) for n in ("none", "alice", "bob", "owned"))
    triage.record_finding(conn, cfg, by_alice, "not_received", "nothing there", actor="alice", clock=clock)
    triage.record_finding(conn, cfg, by_bob, "not_received", "nothing there", actor="bob", clock=clock)
    triage.assign(conn, cfg, owned, "carol", clock.now() + 3600, actor="bob", clock=clock, reason="she knows it")

    def stage(key: Any) -> str:
        job = jobs_store.find_job(conn, key)
        assert job is not None
        found = stages.job_stage(conn, job, "2026-12-01 10:00")
        assert found is not None
        return found.words

    assert stage(none) == "needs a finding"
    assert stage(by_alice) == "awaiting approval (finding by alice)"
    assert stage(owned) == "assigned to carol, due 2026-12-01 10:00"
    assert _ids(conn, "stage:needs-finding", "bob") == ["none", "owned"]
    assert _ids(conn, "stage:awaiting-approval", "bob") == ["alice", "bob"]
    assert _ids(conn, "stage:assigned", "bob") == ["owned"]
    assert _ids(conn, "stage:awaiting-my-approval", "bob") == ["alice"]  # four-eyes: not the one bob found
    assert _ids(conn, "stage:awaiting-my-approval", "carol") == ["alice", "bob"]
    assert _ids(conn, "stage:awaiting-my-approval", "bob", four_eyes=False) == ["alice", "bob"]
    assert _ids(conn, "stage:awaiting-approval alice", "bob") == ["alice"]  # with other terms
    assert stages.awaiting_count(conn, cfg, "bob") == (1 if cfg.policy.four_eyes else 2)
    assert stages.awaiting_count(conn, cfg, "carol") == 2
    assert stages.awaiting_count(conn, cfg, "alice") is None  # not an approver

    # A release starts a new attempt: its finding is history, the job needs a finding again.
    triage.release(conn, cfg, by_alice, actor="carol", clock=clock, reason="alice found nothing")
    assert _ids(conn, "stage:awaiting-approval", "carol") == ["bob"]


def test_an_unknown_stage_is_refused_naming_the_stages() -> None:
    with pytest.raises(BadInput) as refused:
        JobFilter.parse("stage:waiting", me="bob", now=NOW)
    message = str(refused.value)
    assert "stage:waiting: unknown stage" in message
    for name in stages.STAGES:
        assert f"stage:{name}" in message


def test_awaiting_my_approval_is_a_view_for_approvers_only(cfg: Config) -> None:
    [view] = builtin_views(cfg, "carol")
    assert (view.name, view.group, view.filter) == ("awaiting my approval", "held", "stage:awaiting-my-approval")
    assert builtin_views(cfg, "alice") == []
