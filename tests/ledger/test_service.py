"""ledger.Ledger, an open ledger: the config acts under the policy the ledger holds (a setting the caller's config
leaves out is the ledger's; one it states otherwise is refused and nothing is written), leases go by the given
clock, and its status and live figures are the status document's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ledger_reads import fresh, job_fingerprint

from ledger import Ledger, policy
from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import write_tx
from ledger.errors import BadInput, JobNotFound, Refused
from ledger.identity import Identity
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.status import read_live_figures
from ledger.views import builtin_views
from ledger.worker import RemoteCache, submit_now

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"


@pytest.fixture
def opened(ledger_path: Path, cfg: Config, clock: ManualClock) -> Iterator[Ledger]:
    """The test ledger, open with the standard config on the manual clock."""
    with Ledger.open(ledger_path, cfg, clock=clock) as ledger:
        yield ledger


def _hold_policy(ledger_path: Path, config: dict[str, Any], tmp_path: Path) -> None:
    """Record `config`'s policy settings as the ledger's own."""
    with fresh(ledger_path) as conn, write_tx(conn):
        assert policy.record(conn, parse_config(config, base_dir=tmp_path), actor="owner", now=1.0e9, how="test")


def test_the_ledger_policy_governs_the_config_and_a_contradicting_one_is_refused(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path, owner_signer: Any,
) -> None:
    _hold_policy(ledger_path, make_config(policy={"four_eyes": False}), tmp_path)
    silent = make_config()
    silent["policy"].pop("four_eyes", None)
    with Ledger.open(ledger_path, parse_config(silent, base_dir=tmp_path)) as opened:
        assert opened.config.policy.four_eyes is False  # the ledger's, not the default
    assert Ledger.governed_config(ledger_path, parse_config(silent, base_dir=tmp_path)).policy.four_eyes is False
    with fresh(ledger_path) as conn:
        before = job_fingerprint(conn)
    contradicting = parse_config(make_config(policy={"four_eyes": True}), base_dir=tmp_path)
    with pytest.raises(policy.PolicyConflict, match=r"policy\.four_eyes"):
        Ledger.open(ledger_path, contradicting)
    with fresh(ledger_path) as conn:
        assert job_fingerprint(conn) == before


def test_its_status_and_live_figures_are_the_status_documents(
    opened: Ledger, clock: ManualClock, ledger_path: Path,
) -> None:
    assert opened.clock is clock and opened.name == ledger_path
    assert reserve(opened.conn, opened.config, OP, {"input": "x"}, clock=clock, job_id="j1").outcome == "reserved"
    figures = opened.live_figures()
    assert figures == read_live_figures(opened.conn, opened.config, clock.now())
    assert figures.states["reserving"] == 1 and figures.groups()["reserving"] == 1
    status = opened.status(Identity("bob", "declared"))
    assert status.states == figures.states and status.quota_today == figures.quota_today
    assert status.verified == {} and status.identity.name == "bob"  # verify never passed on it
    verdict = opened.verify()
    assert verdict.ok
    opened.record_verify_pass(verdict, scope="full", actor="bob")
    passed = opened.status(Identity("bob", "declared")).verified["full"]
    assert (passed.at, passed.events, passed.head, passed.actor) == (
        clock.now(), verdict.events, verdict.head_hash, "bob")


def test_a_jobs_whole_story_is_read_through_it_and_an_unknown_job_is_none(
    opened: Ledger, clock: ManualClock,
) -> None:
    assert reserve(opened.conn, opened.config, OP, {"input": "x"}, clock=clock, job_id="j1").outcome == "reserved"
    detail = opened.job_detail(JobKey("j1", OP), operator="bob", refused_because="read-only",
                               with_previews=True, with_remote=False)
    assert detail is not None and detail.job.state == "reserving" and detail.can_answer == []
    assert [e.kind for e in detail.events] == ["reserve"]
    assert detail.previews and all(p.reason == "read-only" and not p.allowed for p in detail.previews.values())
    assert opened.job_detail(JobKey("nope", OP), operator="bob") is None


def test_the_lists_of_jobs_are_read_through_it_a_page_at_a_time(
    opened: Ledger, clock: ManualClock,
) -> None:
    for n in range(3):
        assert reserve(opened.conn, opened.config, OP, {"input": str(n)}, clock=clock, job_id=f"j{n}").outcome \
            == "reserved"
    first = opened.page("reserving", offset=0, oldest_first=True, filter_text="", me="bob", page_size=2)
    assert [j.key.job_id for j in first.jobs] == ["j0", "j1"] and first.has_more
    rest = opened.page("reserving", offset=2, oldest_first=True, filter_text="", me="bob", page_size=2)
    assert [j.key.job_id for j in rest.jobs] == ["j2"] and not rest.has_more
    refused = opened.page("reserving", offset=0, oldest_first=True, filter_text="nokey:x", me="bob", page_size=2)
    assert refused.jobs == [] and refused.error is not None
    overview = opened.overview()
    assert overview.held == [] and [q.used for q in overview.quotas] == [3]
    quotas = opened.quotas(days=2)
    assert [d.used for d in quotas.history[OP]][-1] == 3 and quotas.held == {}


def test_the_console_acts_through_it_on_a_held_job_and_a_refusal_writes_nothing(
    opened: Ledger, clock: ManualClock, ledger_path: Path, cfg: Config, sim: Simulator,
) -> None:
    """A held job found by its id, previewed, assigned in bulk and given a finding; saved views, the outbox, the
    orphan evidence and the hold report read through the same object; a refused action changes nothing."""
    sim.add_fault("status", status=503)
    held = submit_now(opened.conn, opened.config, OP, {"input": "h"}, clock=clock, job_id="h1",
                      remotes=RemoteCache(opened.config))
    assert held.state == "held"
    assert [j.key for j in opened.jobs_named("h1")] == [held.key] == [j.key for j in opened.jobs_named("h1", OP)]
    assert opened.jobs_named("h1", "other.op") == [] and opened.jobs_named("nope") == []
    assert opened.preview(held.key, "assign", "alice").allowed
    refused = opened.preview(held.key, "release", "alice")  # alice is no approver
    assert not refused.allowed and "approver" in refused.reason
    with fresh(ledger_path) as conn:
        before = job_fingerprint(conn)
    with pytest.raises(Refused):
        opened.take(held.key, "release", {"reason": "looked"}, actor="alice")
    with pytest.raises(BadInput, match="not in the outbox"):
        opened.settle_notification("no-such-event", "confirmed", actor="bob")
    with fresh(ledger_path) as conn:
        assert job_fingerprint(conn) == before
    counted = opened.bulk_assign(None, "alice", clock.now() + 3600, actor="bob", reason="r", apply=False)
    assert counted.matched == [held.key] and counted.assigned == 0
    done = opened.bulk_assign(None, "alice", clock.now() + 3600, actor="bob", reason="r", apply=True,
                              only=[held.key])
    assert done.assigned == 1
    opened.take(held.key, "finding", {"category": "not_received", "note": "absent"}, actor="alice")
    assert opened.job_detail(held.key, operator="bob", with_remote=False) is not None
    with fresh(ledger_path) as conn:
        assert job_fingerprint(conn) != before
    assert [v.name for v in opened.saved_views("bob")] == []
    opened.save_view("bob", "mine", "held", "owner:me")
    assert [v.name for v in opened.saved_views("bob")] == ["mine"]
    assert opened.view("bob", "mine").filter == "owner:me"
    assert {v.name for v in opened.views("bob")} >= {"mine"} | {v.name for v in builtin_views(cfg, "bob")}
    opened.delete_view("bob", "mine")
    with pytest.raises(BadInput, match="mine"):
        opened.view("bob", "mine")
    assert opened.outbox() == [] and opened.orphan_evidence() == []
    report = opened.report(clock.now() - 3600, clock.now() + 1)
    assert report.total.holds == 1


def test_the_cli_sends_finds_and_writes_history_through_it(
    opened: Ledger, ledger_path: Path, tmp_path: Path, sim: Simulator,
) -> None:
    """A job submitted and sent once through it, found by its id alone, dry-run and passed over a worker pass;
    an ambiguous or unknown id and a remote that is not paused are refused, writing nothing; the history file
    holds the job."""
    sent = opened.submit(OP, {"input": "s"}, actor="scheduler", job_id="s1")
    assert sent.outcome == "reserved" and sent.state == "submitted" and sim.count("create") == 1
    assert opened.key_of("s1") == sent.key == opened.key_of("s1", OP) and opened.job(sent.key).state != "held"
    assert opened.candidates(opened.job(sent.key)) == []
    would = opened.dry_run(sent.key, "reject", {"reason": "no"}, actor="carol")
    assert not would.allowed and would.reason
    assert {a.name for a in opened.remotes()} == set(opened.config.remotes)
    with fresh(ledger_path) as conn:
        before = job_fingerprint(conn)
    with pytest.raises(BadInput, match="not in the ledger"):
        opened.key_of("nope")
    with pytest.raises(JobNotFound):
        opened.job(JobKey("nope", OP))
    with pytest.raises(Refused, match="not paused"):
        opened.resume_remote(next(iter(opened.config.remotes)), actor="carol", reason="looked")
    with fresh(ledger_path) as conn:
        assert job_fingerprint(conn) == before
    opened.tick()
    assert sim.count("create") == 1  # the pass sent nothing again
    written = opened.write_history(tmp_path / "history.sqlite")
    assert written.rows["jobs"] == 1 and written.path.exists()


def test_a_ledger_opened_for_reading_needs_no_config_and_writes_nothing(
    opened: Ledger, ledger_path: Path,
) -> None:
    """What `show`, `jobs`, `events`, `export` and `verify` read, through a ledger opened for reading with no
    config: the job, its events and evidence, a page of its group, the events after a cursor, the export rows of
    one snapshot, the verdict and the policy; a group that is none is refused."""
    sent = opened.submit(OP, {"input": "r"}, actor="scheduler", job_id="r1")
    with fresh(ledger_path) as conn:
        before = job_fingerprint(conn)
    with Ledger.read(ledger_path) as reading:
        assert reading.config.operations == {} and reading.config.timezone == "UTC"
        job = reading.job(reading.key_of("r1"))
        assert [e.kind for e in reading.history_of(job.key)][:1] == ["reserve"]
        assert reading.evidence_of(job) == [] and reading.may_arrive_until(job) is None
        assert [j.key for j in reading.jobs("submitted")] == [sent.key]
        with pytest.raises(BadInput, match="unknown"):
            reading.jobs("nogroup")
        cursor = reading.events()
        assert [e.kind for e in cursor.poll(limit=100)] == [e.kind for e in reading.history_of(job.key)]
        assert not reading.wait_for_change(0.01) and cursor.poll(limit=100) == []  # nothing was committed since
        reading.check_opening()
        with reading.export_snapshot() as anchor:
            rows = list(reading.export_rows("jobs"))
        assert [r["job_id"] for r in rows] == ["r1"] and anchor.events == len(reading.history_of(job.key))
        assert reading.verify().ok
        assert reading.policy().settings is None and reading.owner()[0]
    with fresh(ledger_path) as conn:
        assert job_fingerprint(conn) == before
