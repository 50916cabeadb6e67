"""`reclaim report`: the hold-resolution figures checked against a ledger built with known holds and decisions,
on SQLite and PostgreSQL.

The ledger is built through the ledger's own functions on a manual clock: sends whose outcome is unknown are
recorded as the worker records them (`record_send_outcome`), a dead worker's send held as the recovery pass holds
it, the remote's evidence reconciles as the worker does (actor `reclaim`), and people decide through `triage`
(roles and four-eyes checked). The report is read by a separate `reclaim report` process (JSON, CSV and text) from
the ledger alone; it writes nothing and asks no remote (the simulator counts).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import triage
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, load_config
from ledger.db import connect, write_tx
from ledger.leases import claim_for_send
from ledger.model import JobKey
from ledger.remotes import remote_for
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.transitions import apply
from ledger.worker import record_send_outcome

OP = "article.generate"
HTTP_OP = "storage.cleanup"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
T0 = parse_time("2026-12-01T12:00:00Z")
UNTIL = T0 + 3 * 3600
TIMEOUT = "timeout after the request was sent"


def _config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], sim: Simulator) -> tuple[
        Path, Config]:
    doc = make_config(base_url=sim.url)
    doc["remotes"]["store"] = {"kind": "http", "url": f"{sim.url}/v1/cleanups",
                               "lookup_url": f"{sim.url}/v1/cleanups?idem={{idem_key}}", "dedupes_by_key": True}
    doc["operations"][HTTP_OP] = {"remote": "store", "daily_quota": 10, "sink": "results"}
    path = write_config(doc)
    return path, load_config(path)


class Builder:
    """Builds the known ledger on a manual clock."""

    def __init__(self, conn: Any, cfg: Config, clock: ManualClock) -> None:
        self.conn, self.cfg, self.clock = conn, cfg, clock

    def at(self, offset: float) -> None:
        self.clock.set(T0 + offset)

    def held(self, job: str, offset: float, cause: str = TIMEOUT, op: str = OP, orphan: bool = False) -> JobKey:
        """Reserve `job` and hold it at T0 + offset: a send whose outcome is unknown, or (`orphan`) a dead worker's."""
        self.at(offset)
        assert reserve(self.conn, self.cfg, op, {"input": job}, clock=self.clock, job_id=job).outcome == "reserved"
        key = JobKey(job, op)
        claim = claim_for_send(self.conn, self.cfg, key, owner="worker-1", now=self.clock.now())
        assert claim is not None
        if orphan:
            with write_tx(self.conn):
                reason = "no handle recorded and the remote cannot be searched"
                assert apply(self.conn, key, "orphan_held", actor="worker-2", now=self.clock.now(),
                             expected_state="reserving", expected_epoch=claim.epoch,
                             detail={"cause": "worker died mid-send", "held_reason": reason},
                             fields={"held_reason": reason}).ok
        else:
            done = record_send_outcome(self.conn, self.cfg, claim, SendOutcome("unknown", error="no reply", reason=cause),
                                       now=self.clock.now())
            assert done.ok and done.job is not None and done.job.state == "held"
        return key

    def by_evidence(self, key: JobKey, offset: float) -> None:
        """The worker reconciles on the remote's own record (actor `reclaim`), as ledger.worker does."""
        self.at(offset)
        job = triage.get_job(self.conn, key)
        with write_tx(self.conn):
            assert apply(self.conn, key, "reconcile", actor="reclaim", now=self.clock.now(), expected_state="held",
                         expected_epoch=job.epoch,
                         detail={"handle": "interactions/x", "reason": "webhook: the remote's own record", "verified": True},
                         fields={"handle": "interactions/x"}).ok


def build(conn: Any, cfg: Config, clock: ManualClock, sim: Simulator) -> None:
    """The known ledger (times from T0; the report's window is [T0, T0 + 3 h)):

    A held 0 s (timeout), reconciled on evidence at 600 s; B held 100 s (HTTP 503), alice's finding, released by bob
    at 1100 s and accepted at 1200 s; C held 200 s (dead worker), rejected at 3800 s; D held 300 s, remediated at
    2100 s; E held 400 s, reconciled by bob (unverified) at 700 s; F held 500 s, queried by alice (Gemini cannot be
    asked without a handle), open; H held 5000 s, rejected after the window's end (open in the report); S on the
    http remote held 600 s (HTTP 502), open; G held two days before the window and rejected inside it (not a hold
    of this window)."""
    b = Builder(conn, cfg, clock)
    g = b.held("G", -2 * 86_400)
    a = b.held("A", 0)
    bb = b.held("B", 100, cause="HTTP 503")
    c = b.held("C", 200, orphan=True)
    d = b.held("D", 300)
    e = b.held("E", 400)
    f = b.held("F", 500)
    b.held("S", 600, cause="HTTP 502", op=HTTP_OP)
    h = b.held("H", 5000)
    b.at(50)
    triage.reject(conn, cfg, g, actor="bob", clock=clock, reason="checked: not needed any more")
    b.by_evidence(a, 600)
    b.at(200)
    triage.record_finding(conn, cfg, bb, "not_received", "nothing in the remote's logs for this idem key",
                          actor="alice", clock=clock)
    b.at(1100)
    triage.release(conn, cfg, bb, actor="bob", clock=clock, reason="not received: send again")
    b.at(1200)
    claim = claim_for_send(conn, cfg, bb, owner="worker-1", now=clock.now())
    assert claim is not None
    outcome = remote_for(cfg, OP).send(claim.job.payload, claim.job.idem_key, claim.job.attempt)
    assert outcome.kind == "accepted"
    assert record_send_outcome(conn, cfg, claim, outcome, now=clock.now()).ok
    b.at(3800)
    triage.reject(conn, cfg, c, actor="bob", clock=clock, reason="the clean-up was done by hand")
    b.at(2100)
    triage.remediate(conn, cfg, d, "regenerated by the editor", actor="bob", clock=clock)
    b.at(700)
    triage.reconcile(conn, cfg, e, "interactions/e-found", actor="bob", clock=clock, reason="found in AI Studio",
                     unverified=True)
    b.at(900)
    calls = sim.count()
    triage.query_job(conn, cfg, f, remote_for(cfg, OP), actor="alice", clock=clock)
    assert sim.count() == calls  # no handle: Gemini cannot be asked
    b.at(UNTIL - T0 + 200)
    triage.reject(conn, cfg, h, actor="bob", clock=clock, reason="after the window")


@pytest.fixture
def known(sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
          ledger_path: Path, clock: ManualClock) -> Path:
    config, cfg = _config(make_config, write_config, sim)
    conn = connect(ledger_path)
    try:
        build(conn, cfg, clock, sim)
    finally:
        conn.close()
    return config


WINDOW = ("--since", "2026-12-01T12:00:00Z", "--until", "2026-12-01T15:00:00Z")


def test_the_reports_numbers_are_the_known_ledgers(
    known: Path, ledger_path: Path, run_cli: Callable[..., Any], sim: Simulator, fingerprint: Callable[..., str],
) -> None:
    before, calls = fingerprint(ledger_path), sim.count()
    done = run_cli("report", *WINDOW, "--json", config=known, now=T0 + 86_400)
    assert done.rc == 0, done.stderr
    r = json.loads(done.stdout)
    op = {f["name"]: f for f in r["operations"]}[OP]
    assert op["holds"] == 7  # A B C D E F H; G began before the window
    assert op["causes"] == {f"send outcome unknown: {TIMEOUT}": 5, "send outcome unknown: HTTP 503": 1,
                            "worker died mid-send": 1}
    assert op["endings"] == {"evidence": 1, "reconciled": 1, "released": 1, "rejected": 1, "remediated": 1, "open": 2}
    # decided after 600 (A), 1000 (B), 3600 (C), 1800 (D), 300 (E) seconds: nearest-rank p50 1000, p90 3600
    assert op["time_to_decision_seconds"] == {"decided": 5, "p50": 1000.0, "p90": 3600.0, "max": 3600.0}
    assert op["releases"] == 1 and op["release_outcomes"] == {"accepted": 1, "failed": 0, "held again": 0,
                                                              "not sent yet": 0}
    assert op["queries"] == 1 and op["answers"] == {"could not be asked": 1}
    assert op["quota"] == {"limit": 100, "used_per_day": {"2026-12-01": 8}}  # 7 reservations and B's release
    remotes = {f["name"]: f for f in r["remotes"]}
    assert remotes["gemini"]["holds"] == 7 and remotes["gemini"]["endings"]["open"] == 2
    store = remotes["store"]
    assert store["holds"] == 1 and store["causes"] == {"send outcome unknown: HTTP 502": 1}
    assert store["endings"]["open"] == 1 and store["time_to_decision_seconds"]["decided"] == 0
    assert r["total"]["holds"] == 8 and r["total"]["endings"]["open"] == 3
    assert r["days"] == [{"day": "2026-12-01", "held": 8, "decided": 5}]
    assert fingerprint(ledger_path) == before and sim.count() == calls  # read-only, no remote asked

    rows = list(csv.DictReader(io.StringIO(run_cli("report", *WINDOW, "--csv", config=known).stdout)))
    got = {(x["scope"], x["name"], x["figure"], x["key"]): x["value"] for x in rows}
    assert got[("operation", OP, "endings", "evidence")] == "1"
    assert got[("remote", "store", "holds", "")] == "1"
    assert got[("operation", OP, "time_to_decision_seconds", "p90")] == "3600.0"
    assert got[("operation", OP, "quota_used", "2026-12-01")] == "8"

    text = run_cli("report", *WINDOW, config=known)
    assert text.rc == 0, text.stderr
    assert "worker died mid-send" in text.stdout and "16m" in text.stdout  # p50: 1000 s


def test_a_decision_after_the_window_leaves_the_hold_open_and_a_later_window_sees_it(
    known: Path, run_cli: Callable[..., Any],
) -> None:
    done = run_cli("report", "--since", "2026-12-01T13:00:00Z", "--until", "2026-12-02T00:00:00Z", "--json",
                   config=known)
    op = {f["name"]: f for f in json.loads(done.stdout)["operations"]}[OP]
    assert op["holds"] == 1 and op["endings"]["rejected"] == 1  # H, decided at 3 h 03 m 20 s
    assert op["time_to_decision_seconds"]["max"] == UNTIL - T0 + 200 - 5000


@pytest.mark.parametrize(("args", "words"), [
    (("--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"), "is not before --until"),
    (("--since", "800d"), "at most 366 days"),
    (("--since", "yesterday"), "--since"),
    (("--json", "--csv"), "not both"),
    (("--force",), "--force only applies to --to"),
])
def test_bad_windows_are_refused_in_one_line(
    known: Path, ledger_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[..., str], args: tuple[str, ...],
    words: str,
) -> None:
    before = fingerprint(ledger_path)
    done = run_cli("report", *args, config=known)
    assert done.rc == 2 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert fingerprint(ledger_path) == before


def test_the_history_file_holds_every_job_event_hold_and_decision(
    known: Path, ledger_path: Path, run_cli: Callable[..., Any], tmp_path: Path, fingerprint: Callable[..., str],
) -> None:
    import sqlite_utils

    before = fingerprint(ledger_path)
    dest = tmp_path / "history.db"
    done = run_cli("report", "--to", str(dest), "--json", config=known)
    assert done.rc == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"] == {"jobs": 9, "events": summary["events_in_ledger"], "holds": 9, "decisions": 7,
                               "findings": 1}
    assert fingerprint(ledger_path) == before
    db = sqlite_utils.Database(dest, execute_plugins=False)
    assert db["jobs"].count == 9 and db["holds"].count == 9 and db["decisions"].count == 7
    assert db["events"].count == summary["events_in_ledger"]
    fks = {(fk.table, fk.column, fk.other_table, fk.other_column) for t in ("events", "holds", "decisions", "findings")
           for fk in db[t].foreign_keys}
    assert ("holds", "decided_event", "events", "id") in fks and ("events", "job", "jobs", "id") in fks
    assert ("decisions", "hold", "holds", "id") in fks
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert db["jobs"].columns_dict["created_at"] is float and db["holds"].columns_dict["job"] is int
    hits = list(db["findings"].search("logs idem"))
    assert [h["note"] for h in hits] == ["nothing in the remote's logs for this idem key"]
    b_hold = next(db["holds"].rows_where("job = (SELECT id FROM jobs WHERE job_id = 'B')"))
    assert (b_hold["how"], b_hold["decided_by"], b_hold["time_to_decision_seconds"]) == ("released", "bob", 1000.0)
    a_hold = next(db["holds"].rows_where("job = (SELECT id FROM jobs WHERE job_id = 'A')"))
    assert (a_hold["how"], a_hold["decided_by"]) == ("evidence", "reclaim")
    assert [r["reason"] for r in db["decisions"].search("hand")] == ["the clean-up was done by hand"]
    assert len(list(db["holds"].search("died"))) == 1

    again = run_cli("report", "--to", str(dest), config=known)
    assert again.rc == 2 and "already exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    windowed = run_cli("report", "--to", str(dest), "--force", *WINDOW, "--json", config=known)
    assert windowed.rc == 0, windowed.stderr
    rows = json.loads(windowed.stdout)["rows"]
    assert rows["holds"] == 8 and rows["jobs"] == 9  # G's reject is in the window, its hold is not
    db = sqlite_utils.Database(dest, execute_plugins=False)
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    assert next(db["holds"].rows_where("job = (SELECT id FROM jobs WHERE job_id = 'H')"))["how"] == "open"


def test_the_history_file_of_a_ledger_reclaim_init_made_holds_its_policy_event_and_its_jobs(
    tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    import sqlite_utils

    fresh = tmp_path / "fresh.db"
    assert run_cli("init", ledger=fresh).rc == 0
    empty = tmp_path / "empty-history.db"
    done = run_cli("report", "--to", str(empty), "--json", ledger=fresh)
    assert done.rc == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == {"jobs": 0, "events": 1, "holds": 0, "decisions": 0, "findings": 0}

    submitted = run_cli("submit", OP, "--payload", json.dumps({"input": "x"}), "--job-id", "j1", ledger=fresh)
    assert submitted.rc == 0, submitted.stderr
    dest = tmp_path / "history.db"
    done = run_cli("report", "--to", str(dest), "--json", ledger=fresh)
    assert done.rc == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["rows"]["jobs"] == 1 and summary["rows"]["events"] == summary["events_in_ledger"] >= 3
    db = sqlite_utils.Database(dest, execute_plugins=False)
    assert db["events"].count == summary["events_in_ledger"]
    policy = list(db["events"].rows_where("kind = 'policy_set'"))
    assert [(e["job"], e["job_id"], e["operation"]) for e in policy] == [(None, "(ledger)", "(policy)")]
    j1 = next(db["jobs"].rows_where("job_id = 'j1'"))["id"]
    assert {e["job"] for e in db["events"].rows_where("kind != 'policy_set'")} == {j1}
    assert db.execute("PRAGMA foreign_key_check").fetchall() == []
