"""A handle is never only in memory: outcomes the ledger cannot take go to the journal, and back.

The worker is stopped right after its claim, the ledger is made unwritable (locked past the busy
timeout by another process, on PostgreSQL the job's row locked past lock_timeout, or its disk filled up:
a small tmpfs), and the worker resumed: its send is
accepted, the outcome cannot be committed, it is journaled and the worker exits non-zero. The next
pass replays the journal: the handle is attached, 1 POST in all, read back from a fresh connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from process_state import process_state

from ledger import journal, replay
from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect, create_ledger
from ledger.model import JobKey
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store

OP = "article.generate"




@pytest.fixture
def journal_config(make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path]) -> Path:
    return write_config(make_config(policy={"outcome_retry_seconds": 1}))


def _reserve(ledger: Path, config: Path, job_id: str) -> str:
    conn = connect(ledger)
    try:
        res = reserve(conn, load_config(config), OP, {"input": job_id}, clock=SystemClock(), job_id=job_id)
        assert res.outcome == "reserved" and res.job is not None
        return res.job.idem_key
    finally:
        conn.close()


def _stopped(start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], ledger: Path,
             *args: str, point: str = "after_send_claim") -> subprocess.Popen[str]:
    proc = start_cli(*args, ledger=ledger, env={"RECLAIM_PAUSE_AT": point})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what=f"the process to stop at {point}")
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def _journal_of(ledger: Any) -> Any:
    """The journal a connection to `ledger` names (for PostgreSQL: after the database's identity)."""
    conn = connect(ledger, readonly=True)
    try:
        return journal.of(conn)
    finally:
        conn.close()


def _another_spelling(url: str) -> str:
    """The same database by another URL: the other scheme, the user and the socket folder as parameters."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"postgres:///{parts.path.lstrip('/')}?user={parts.username}&{parts.query}&application_name=other"


def _job(ledger: Path, job_id: str) -> Any:
    conn = connect(ledger, readonly=True)
    try:
        return jobs_store.find_job(conn, JobKey(job_id, OP)), events_store.job_events(conn, JobKey(job_id, OP)), \
            replay.mismatches(conn)
    finally:
        conn.close()


def test_an_accepted_reply_while_the_ledger_is_locked_is_journaled_and_attached_by_the_next_pass(
    sim: Simulator, ledger_path: Path, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    idem = _reserve(ledger_path, journal_config, "locked-1")
    worker = _stopped(start_cli, wait_for, ledger_path, "tick")
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock past the busy timeout
    try:
        rc, out, err = _finish(worker)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert rc == 8, (out, err)
    assert "journaled" in err and "locked-1" in err and "Traceback" not in err
    assert sim.count("create", idem) == 1
    [record] = journal.pending(ledger_path)
    assert (record.job_id, record.kind) == ("locked-1", "accepted") and record.handle

    assert run_cli("tick", ledger=ledger_path).rc == 0
    job, events, mismatches = _job(ledger_path, "locked-1")
    assert job.handle == record.handle and job.state in ("submitted", "done", "consumed")
    accepted = [e for e in events if e.kind == "accepted"]
    assert len(accepted) == 1 and accepted[0].detail["journaled"]["owner"] == record.owner
    assert sim.count("create", idem) == 1
    assert journal.pending(ledger_path) == []
    assert mismatches == []


def test_on_postgresql_an_accepted_reply_while_its_row_is_locked_is_journaled_on_the_host_and_attached(
    sim: Simulator, pg_url: str, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same on a PostgreSQL ledger: another transaction holds the job's row past lock_timeout, so the
    worker's write gives up (exit 8, as SQLite's busy timeout); the handle goes to the journal on the worker's
    host ($RECLAIM_JOURNAL_DIR), and the next pass there attaches it once the row is free."""
    import psycopg

    create_ledger(pg_url)
    ledger: Any = pg_url  # the URL goes where a ledger's path goes
    env = {"RECLAIM_JOURNAL_DIR": str(tmp_path / "journal")}
    monkeypatch.setenv("RECLAIM_JOURNAL_DIR", env["RECLAIM_JOURNAL_DIR"])
    idem = _reserve(ledger, journal_config, "pg-locked-1")
    worker = start_cli("tick", ledger=ledger, env={"RECLAIM_PAUSE_AT": "after_send_claim", **env})
    wait_for(lambda: process_state(worker.pid) == "T", timeout=30, what="the worker to stop after its claim")
    with psycopg.connect(pg_url) as holder:  # one transaction, rolled back on leaving
        holder.execute("SELECT 1 FROM jobs WHERE job_id = 'pg-locked-1' FOR UPDATE")  # reads go on; its write waits
        rc, out, err = _finish(worker)
        holder.rollback()
    assert rc == 8, (out, err)
    assert "journaled" in err and "pg-locked-1" in err and "Traceback" not in err
    assert sim.count("create", idem) == 1
    [record] = journal.pending(_journal_of(ledger))
    assert (record.job_id, record.kind) == ("pg-locked-1", "accepted") and record.handle
    assert journal.journal_path(_journal_of(ledger)).parent == tmp_path / "journal"

    assert run_cli("tick", ledger=ledger, env=env).rc == 0
    job, events, mismatches = _job(ledger, "pg-locked-1")
    assert job.handle == record.handle and job.state in ("submitted", "done", "consumed")
    accepted = [e for e in events if e.kind == "accepted"]
    assert len(accepted) == 1 and accepted[0].detail["journaled"]["owner"] == record.owner
    assert sim.count("create", idem) == 1
    assert journal.pending(_journal_of(ledger)) == []
    assert mismatches == []


def test_on_postgresql_a_handle_journaled_under_one_spelling_of_the_url_is_recorded_under_another(
    sim: Simulator, pg_url: str, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's journal is named after the database, not the URL's text: a worker that reached the ledger by one
    URL journals a handle, and `status` and the next pass by another URL of the same database see and record it."""
    import json

    import psycopg

    create_ledger(pg_url)
    other: Any = _another_spelling(pg_url)
    assert other != pg_url and journal.journal_path(_journal_of(other)) == journal.journal_path(_journal_of(pg_url))
    env = {"RECLAIM_JOURNAL_DIR": str(tmp_path / "journal")}
    monkeypatch.setenv("RECLAIM_JOURNAL_DIR", env["RECLAIM_JOURNAL_DIR"])
    ledger: Any = pg_url
    idem = _reserve(ledger, journal_config, "pg-spelling-1")
    worker = start_cli("tick", ledger=ledger, env={"RECLAIM_PAUSE_AT": "after_send_claim", **env})
    wait_for(lambda: process_state(worker.pid) == "T", timeout=30, what="the worker to stop after its claim")
    with psycopg.connect(pg_url) as holder:
        holder.execute("SELECT 1 FROM jobs WHERE job_id = 'pg-spelling-1' FOR UPDATE")
        rc, out, err = _finish(worker)
        holder.rollback()
    assert rc == 8 and "journaled" in err, (out, err)

    status = json.loads(run_cli("status", "--json", ledger=other, env=env).stdout)["journal"]
    [waiting] = status["records"]  # `status` by the other URL reads the worker's journal
    assert waiting["job_id"] == "pg-spelling-1" and waiting["handle"]
    assert run_cli("tick", ledger=other, env=env).rc == 0
    job, events, mismatches = _job(other, "pg-spelling-1")
    accepted = [e for e in events if e.kind == "accepted"]
    assert len(accepted) == 1 and "journaled" in accepted[0].detail
    assert job.handle == waiting["handle"] == accepted[0].detail["handle"]
    assert sim.count("create", idem) == 1
    assert journal.pending(_journal_of(pg_url)) == []
    assert mismatches == []


def test_a_journal_named_after_the_url_by_an_older_version_is_read_and_replayed_with_the_database_named_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECLAIM_JOURNAL_DIR", str(tmp_path / "journal"))
    url = "postgresql://reclaim:***@db.example/ledger"
    host = journal.HostJournal("7312345678901234567-16384", url)
    old = journal.OutcomeRecord(job_id="old", operation=OP, epoch=1, owner="w", attempt=1, tries=1, kind="accepted",
                                handle="h-old", error=None, reason=None, retry_after=None, at=1.0, cause="locked")
    new = dataclasses.replace(old, job_id="new", handle="h-new")
    journal.append(url, old)  # where an older version put it: named after the URL's text
    journal.append(host, new)
    assert journal.journal_path(host) != journal.journal_path(url)
    assert journal.journal_path(host).name == "pg-7312345678901234567-16384.outcomes"
    assert sorted(r.job_id for r in journal.pending(host)) == ["new", "old"]
    assert [r.job_id for r in journal.state(host).records] == ["new", "old"]
    with journal.replaying(host) as records:
        assert sorted(r.job_id for r in records) == ["new", "old"]
        records.keep(old)
    assert journal.pending(url) == []  # the older file is cleared; what was kept now waits in the new one
    assert journal.pending(host) == [old]


@contextlib.contextmanager
def _small_disk(where: Path, size: str = "4m") -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test needs root, as CI has): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / f"filler-{uuid.uuid4().hex}"
    # Unbuffered: a partial last write leaves nothing in a buffer for close() to fail on (ENOSPC at close
    # would depend on how the free space divides by the chunk size).
    with open(filler, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
    return filler


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_an_accepted_reply_on_a_full_disk_is_journaled_and_attached_by_the_next_pass(
    sim: Simulator, tmp_path: Path, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        ledger = disk / "reclaim.db"
        create_ledger(ledger)
        assert journal.journal_path(ledger).stat().st_size == journal.JOURNAL_BYTES
        idem = _reserve(ledger, journal_config, "full-1")
        worker = _stopped(start_cli, wait_for, ledger, "tick")
        filler = _fill(disk)
        rc, out, err = _finish(worker)
        assert rc == 7, (out, err)
        assert "journaled" in err and "Traceback" not in err
        assert sim.count("create", idem) == 1
        [record] = journal.pending(ledger)
        assert record.kind == "accepted" and record.handle

        filler.unlink()
        assert run_cli("tick", ledger=ledger).rc == 0
        job, _, mismatches = _job(ledger, "full-1")
        assert job.handle == record.handle and job.state in ("submitted", "done", "consumed")
        assert sim.count("create", idem) == 1
        assert journal.pending(ledger) == [] and mismatches == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_submit_that_reserved_but_met_a_full_disk_says_the_job_is_reserved(
    sim: Simulator, tmp_path: Path, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        ledger = disk / "reclaim.db"
        create_ledger(ledger)
        proc = _stopped(start_cli, wait_for, ledger, "submit", OP, "--payload", '{"input": "x"}', "--job-id", "full-2",
                        point="after_reserve_commit")
        filler = _fill(disk)
        rc, out, err = _finish(proc)
        assert rc == 9, (out, err)
        assert "reserved full-2" in err and "next worker pass" in err and "Traceback" not in err
        assert sim.count("create") == 0
        filler.unlink()
        assert run_cli("tick", ledger=ledger).rc == 0
        job, _, _ = _job(ledger, "full-2")
        assert job.state in ("submitted", "done", "consumed") and sim.count("create") == 1


def test_journal_appends_survive_a_torn_tail_and_replay_clears_them(tmp_path: Path) -> None:
    ledger = tmp_path / "x.db"
    assert journal.reserve_space(ledger)
    rec = journal.OutcomeRecord(job_id="j", operation=OP, epoch=3, owner="w", attempt=1, tries=1, kind="accepted",
                                handle="h-1", error=None, reason=None, retry_after=None, at=1.0, cause="locked")
    journal.append(ledger, rec)
    path = journal.journal_path(ledger)
    with open(path, "r+b") as f:  # a crash mid-append leaves half a line
        data = f.read()
        f.seek(data.index(b"\0"))
        f.write(b"deadbeef {\"job_id\": \"tor")
    journal.append(ledger, rec)
    assert journal.pending(ledger) == [rec, rec]
    with journal.replaying(ledger) as records:
        assert len(records) == 2
    assert journal.pending(ledger) == []
    assert path.stat().st_size == journal.JOURNAL_BYTES  # the space stays allocated


@pytest.mark.slow
def test_when_even_the_journal_fails_one_stderr_line_carries_the_job_and_the_handle(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ledger.clock import ManualClock
    from ledger.config import parse_config
    from ledger.leases import claim_for_send
    from ledger.remotes.base import SendOutcome
    from ledger.worker import OutcomeNotRecorded, commit_outcome

    cfg = parse_config(make_config(base_url="http://127.0.0.1:9", policy={"outcome_retry_seconds": 0}),
                       base_dir=tmp_path)
    clock = ManualClock(1_796_126_400.0)
    conn = connect(ledger_path)
    res = reserve(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="nowhere")
    claim = claim_for_send(conn, cfg, res.key, owner="w", now=clock.now())
    assert claim is not None
    path = journal.journal_path(ledger_path)
    path.unlink()
    path.mkdir()  # the journal cannot be opened
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(OutcomeNotRecorded) as raised:
            commit_outcome(conn, cfg, claim, SendOutcome("accepted", handle="v1_keepme"), clock=clock)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        conn.close()
    assert raised.value.exit_code == 8 and "stderr only" in str(raised.value)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "UNRECORDED" in line and "'nowhere'" in line and "v1_keepme" in line


def test_on_postgresql_a_reply_accepted_while_the_server_is_down_is_journaled_by_the_process_clock(
    sim: Simulator, private_pg_server: Any, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server stops while the create's reply is in flight: a stopped server has no clock, so the journal
    record is timed by the process's own clock, and the handle is journaled (not "not sent")."""
    import time

    pg_server = private_pg_server  # this test stops it
    pg_url = str(pg_server.new_database())
    create_ledger(pg_url)
    ledger: Any = pg_url
    env = {"RECLAIM_JOURNAL_DIR": str(tmp_path / "journal")}
    monkeypatch.setenv("RECLAIM_JOURNAL_DIR", env["RECLAIM_JOURNAL_DIR"])
    proc = start_cli("submit", OP, "--payload", '{"input": "server down"}', "--job-id", "pg-down", ledger=ledger,
                     env={"RECLAIM_PAUSE_AT": "after_request_written", **env})
    wait_for(lambda: process_state(proc.pid) == "T", timeout=30, what="submit to stop after writing its create")
    wait_for(lambda: sim.interactions(), timeout=30, what="the remote to accept the create")
    before = time.time()
    pg_server.halt()
    try:
        rc, out, err = _finish(proc)
    finally:
        pg_server.resume()
    after = time.time()
    assert rc == 7, (out, err)
    assert "journaled" in out + err and "not sent" not in out + err, (out, err)
    [record] = journal.pending(_journal_of(ledger))
    assert (record.job_id, record.kind) == ("pg-down", "accepted") and record.handle == sim.interactions()[0]["id"]
    assert before <= record.at <= after

    assert run_cli("tick", ledger=ledger, env=env).rc == 0
    job, _, mismatches = _job(ledger, "pg-down")
    assert job.handle == record.handle and job.state in ("submitted", "done", "consumed")
    assert sim.count("create") == 1 and journal.pending(_journal_of(ledger)) == [] and mismatches == []


def _record(job_id: str, operation: str = OP) -> journal.OutcomeRecord:
    return journal.OutcomeRecord(job_id=job_id, operation=operation, epoch=1, owner="w", attempt=1, tries=1,
                                 kind="accepted", handle=f"h-{job_id}", error=None, reason=None, retry_after=None,
                                 at=1.0, cause="test")


def test_replay_keeps_and_reports_records_it_cannot_apply_and_applies_the_rest(
    sim: Simulator, ledger_path: Path, journal_config: Path, run_cli: Callable[..., Any],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any],
) -> None:
    import json

    # A real accepted send journaled (the ledger locked past the busy timeout), next to two records a replay
    # cannot apply: an operation this config does not declare, and a job the ledger does not hold.
    _reserve(ledger_path, journal_config, "real")
    worker = _stopped(start_cli, wait_for, ledger_path, "tick")
    holder = sqlite3.connect(ledger_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        rc, out, err = _finish(worker)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert rc == 8, (out, err)
    journal.append(ledger_path, _record("elsewhere", "other.operation"))
    journal.append(ledger_path, _record("missing-row"))

    res = run_cli("tick", "--json")
    assert res.rc == 0, res.stderr
    report = json.loads(res.stdout)
    assert (report["journal_replayed"], report["journal_kept"]) == (1, 2), report
    job, _, mismatches = _job(ledger_path, "real")
    assert job.handle and job.state in ("submitted", "done", "consumed") and mismatches == []
    assert [(r.job_id, r.operation) for r in journal.pending(ledger_path)] == [
        ("elsewhere", "other.operation"), ("missing-row", OP)]

    # Kept, not dropped, on every later pass too; and `status` lists them with why they wait.
    again = json.loads(run_cli("tick", "--json").stdout)
    assert (again["journal_replayed"], again["journal_kept"]) == (0, 2)
    status = json.loads(run_cli("status", "--json").stdout)["journal"]
    assert status["preallocated"] is True and status["bytes"] == journal.JOURNAL_BYTES
    waits = {r["job_id"]: r["waits_because"] for r in status["records"]}
    assert "not declared" in waits["elsewhere"] and "no such job" in waits["missing-row"]
    assert {r["handle"] for r in status["records"]} == {"h-elsewhere", "h-missing-row"}
    text = run_cli("status")
    assert "OUTCOME JOURNAL: 2 send outcome(s) waiting" in text.stdout and "h-missing-row" in text.stdout
    assert sim.count("create") == 1


def test_the_journal_is_allocated_after_deletion_and_migration_and_for_postgresql_and_status_checks_it(
    sim: Simulator, ledger_path: Path, journal_config: Path, run_cli: Callable[..., Any], pg_url: str,
    tmp_path: Path,
) -> None:
    import json

    path = journal.journal_path(ledger_path)
    assert path.stat().st_size == journal.JOURNAL_BYTES  # init of a new SQLite ledger
    path.unlink()
    status = run_cli("status")
    assert status.rc == 0 and "OUTCOME JOURNAL: not allocated in advance" in status.stdout
    assert json.loads(run_cli("status", "--json").stdout)["journal"]["preallocated"] is False
    assert not path.exists()  # status only reads
    assert run_cli("tick").rc == 0  # every pass allocates a missing journal
    assert path.stat().st_size == journal.JOURNAL_BYTES
    assert "outcome journal: 256 KiB allocated in advance" in run_cli("status").stdout

    path.unlink()
    assert run_cli("init").rc == 0  # an existing (or migrated) ledger: init allocates it too
    assert path.stat().st_size == journal.JOURNAL_BYTES

    env = {"RECLAIM_JOURNAL_DIR": str(tmp_path / "pg-journal")}
    assert run_cli("init", ledger=pg_url, env=env).rc == 0  # type: ignore[arg-type]
    status = json.loads(run_cli("status", "--json", ledger=pg_url, env=env).stdout)["journal"]  # type: ignore[arg-type]
    assert status["preallocated"] is True and status["path"].startswith(env["RECLAIM_JOURNAL_DIR"])
