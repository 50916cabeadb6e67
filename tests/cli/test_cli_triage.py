"""The CLI's triage commands are built from the action table: the same refusals as the ledger and the console,
every write refused without its reason (one line naming the option, exit 2), `--dry-run` printing the console's
preview text and writing nothing, `--due` spans and `tomorrow 09:00`, the common options on every command, and
tables that never cut an id a person types next.

Every refusal is checked against the ledger's fingerprint; every action against the simulator's create count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from console.cli import app
from ledger import actions, read_job_detail, triage
from ledger.clock import ManualClock, parse_time
from ledger.config import Config, load_config, parse_config
from ledger.db import connect
from ledger.model import JobKey, idem_key
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
T0 = parse_time("2026-12-01T12:00:00Z")
VALUES = {"category": "not_received", "note": "nothing labelled with the idem key", "reason": "the finding says so",
          "handle": "v1_some-handle", "owner": "alice", "due": "2h", "evidence": "1"}


def args_for(action: str, *, skip: str | None = None) -> list[str]:
    """Every option the table requires for `action`, with a good value (except `skip`)."""
    out: list[str] = []
    for f in actions.ACTIONS[action].fields:
        if f.name != skip:
            out += [f.option, VALUES[f.name]]
    return out + (["--unverified"] if action == "reconcile" else [])


def _held(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, job_id: str = "held-1") -> JobKey:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _one_error_line(r: Any, rc: int) -> str:
    assert r.rc == rc, (r.rc, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reclaim: error: "), r.stderr
    return lines[0]


# -- refusals: the CLI says exactly what the ledger's refusal() says ------------------------------------------------
@pytest.mark.slow
def test_each_commands_refusal_is_the_ledgers(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    held = _held(sim, conn, cfg, clock)
    sent = submit_now(conn, cfg, OP, {"input": "ok"}, clock=clock, job_id="sent-1", remotes=RemoteCache(cfg))
    assert sent.state == "submitted"
    before, creates = fingerprint(ledger_path), sim.count("create")
    cases = [(name, held, "dave") for name in actions.JOB_ACTIONS]  # a viewer: the role refusal
    cases += [(name, sent.key, "bob") for name in actions.JOB_ACTIONS if actions.ACTIONS[name].states]  # the state
    for name, key, who in cases:
        why = triage.refusal(conn, cfg, triage.get_job(conn, key), name, who, clock.now())
        assert why is not None
        r = run_cli(name, key.job_id, *args_for(name), operator=who, now=clock.now())
        assert _one_error_line(r, 6) == f"reclaim: error: {name} refused for {key.job_id} / {OP}: {why}"
        dry = run_cli(name, key.job_id, *args_for(name), "--dry-run", "--json", operator=who, now=clock.now())
        assert dry.rc == 6, dry
        doc = json.loads(dry.stdout)
        assert (doc["allowed"], doc["refusal"], doc["dry_run"]) == (False, why, True)
    assert fingerprint(ledger_path) == before
    assert sim.count("create") == creates


def test_four_eyes_refusal_is_the_same_in_cli_and_console(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    triage.record_finding(conn, cfg, key, "not_received", "absent", actor="bob", clock=clock)
    before = fingerprint(ledger_path)
    why = triage.refusal(conn, cfg, triage.get_job(conn, key), "release", "bob", clock.now())
    assert why is not None and why.startswith("four-eyes")
    detail = read_job_detail(conn, cfg, key, operator="bob", clock=clock, with_previews=True)
    assert detail is not None and detail.previews["release"].reason == why  # what the console shows disabled
    r = run_cli("release", key.job_id, "--reason", "r", operator="bob", now=clock.now())
    assert why in _one_error_line(r, 6)
    assert fingerprint(ledger_path) == before


# -- a missing reason (or any required field) --------------------------------------------------------------------
@pytest.mark.parametrize("name", [a for a in actions.JOB_ACTIONS if actions.ACTIONS[a].fields])
def test_a_missing_field_is_refused_naming_its_option(
    name: str, sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for field in actions.ACTIONS[name].fields:
        for extra in ([], ["--dry-run"]):
            r = run_cli(name, key.job_id, *args_for(name, skip=field.name), *extra, operator="carol", now=clock.now())
            line = _one_error_line(r, 2)
            assert line == f"reclaim: error: {name}: {field.missing_text()}"
            assert field.option in line
    assert fingerprint(ledger_path) == before


def test_release_reconcile_and_assign_record_their_reason(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    a = _held(sim, conn, cfg, clock, "a")
    _held(sim, conn, cfg, clock, "b")
    triage.record_finding(conn, cfg, a, "not_received", "absent", actor="bob", clock=clock)
    assert run_cli("assign", "a", "--owner", "alice", "--due", "2h", "--reason", "alice is on call",
                   operator="bob", now=clock.now()).rc == 0
    assert run_cli("release", "a", "--reason", "bob saw nothing", operator="carol", now=clock.now()).rc == 0
    assert run_cli("reconcile", "b", "--handle", "v1_b", "--unverified", "--reason", "seen in AI Studio",
                   operator="carol", now=clock.now()).rc == 0
    fresh = connect(ledger_path, readonly=True)
    try:
        said = {(e.job_id, e.kind): e.detail.get("reason") for e in events_store.events_after(fresh, 0, limit=100)}
    finally:
        fresh.close()
    assert said[("a", "assign")] == "alice is on call"
    assert said[("a", "release")] == "bob saw nothing"
    assert said[("b", "reconcile")] == "seen in AI Studio"


# -- --dry-run ---------------------------------------------------------------------------------------------------
def test_dry_run_prints_the_consoles_preview_and_writes_nothing(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str], read_job: Callable[..., Any],
) -> None:
    key = _held(sim, conn, cfg, clock)
    triage.record_finding(conn, cfg, key, "not_received", "absent", actor="bob", clock=clock)
    detail = read_job_detail(conn, cfg, key, operator="carol", clock=clock, with_previews=True)
    assert detail is not None
    before, creates = fingerprint(ledger_path), sim.count("create")
    for name in ("release", "reconcile", "reject", "remediate", "assign", "finding", "query"):
        r = run_cli(name, key.job_id, *args_for(name), "--dry-run", operator="carol", now=clock.now())
        assert r.rc == (6 if name in ("assign", "finding", "query") else 0), (name, r)  # carol is no triager
        lines = r.stdout.splitlines()
        assert lines[0] == f"dry run: {name} held-1 / {OP} (held); nothing was written"
        said = actions.ACTIONS[name].unverified or detail.previews[name].summary  # args_for: reconcile --unverified
        assert lines[1] == f"would: {said}"  # the console's confirmation text, or the one unverified path
        assert lines[-1] == ("allowed" if detail.previews[name].allowed else f"refused: {detail.previews[name].reason}")
        doc = json.loads(run_cli(name, key.job_id, *args_for(name), "--dry-run", "--json", operator="carol",
                                 now=clock.now()).stdout)
        assert doc["would"] == said and doc["allowed"] == detail.previews[name].allowed
    assert "sends 1 new request to gemini (attempt 2, same idem key); article.generate quota today 1/100 -> 2/100" \
        == detail.previews["release"].summary
    assert fingerprint(ledger_path) == before
    assert sim.count("create") == creates and read_job(ledger_path, "held-1").state == "held"
    # And without --dry-run the same command does what the preview said.
    assert run_cli("release", key.job_id, "--reason", "r", operator="carol", now=clock.now()).rc == 0
    assert read_job(ledger_path, "held-1").attempt == 2


@pytest.mark.slow
def test_dry_run_reconcile_verifies_the_handle_with_the_remote(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str], make_config: Callable[..., dict[str, Any]],
    tmp_path: Path,
) -> None:
    impatient = parse_config(make_config(timeout_seconds=0.5), base_dir=tmp_path)
    sim.add_fault("accept_then_hang")
    res = submit_now(conn, impatient, OP, {"input": "slow"}, clock=clock, job_id="hung",
                     remotes=RemoteCache(impatient))
    assert res.state == "held"
    (found,) = sim.find_by_idem(idem_key("hung", OP))
    assert submit_now(conn, cfg, OP, {"input": "other"}, clock=clock, job_id="other",
                      remotes=RemoteCache(cfg)).state == "submitted"
    taken = triage.get_job(conn, JobKey("other", OP)).handle
    assert taken
    before = fingerprint(ledger_path)
    good = run_cli("reconcile", "hung", "--handle", found["id"], "--reason", "in the console", "--dry-run",
                   operator="carol", now=clock.now())
    assert good.rc == 0 and good.stdout.splitlines()[-1] == "allowed", good
    assert f"  handle: {found['id']}" in good.stdout.splitlines()
    wrong = run_cli("reconcile", "hung", "--handle", taken, "--reason", "in the console", "--dry-run",
                    operator="carol", now=clock.now())
    assert wrong.rc == 6 and "is already attached to job other" in wrong.stdout, wrong
    assert fingerprint(ledger_path) == before


# -- --due -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("due", "tz", "expected"), [
    ("2h", "UTC", "2026-12-01T14:00:00Z"),
    ("30m", "UTC", "2026-12-01T12:30:00Z"),
    ("tomorrow 09:00", "UTC", "2026-12-02T09:00:00Z"),
    ("tomorrow 09:00", "Asia/Tokyo", "2026-12-02T00:00:00Z"),  # T0 is 21:00 in Tokyo
    ("2026-12-03T09:00Z", "Asia/Tokyo", "2026-12-03T09:00:00Z"),
])
@pytest.mark.slow
def test_due_takes_spans_and_tomorrow_in_the_configs_zone(
    due: str, tz: str, expected: str, sim: Simulator, conn: Any, cfg: Config, clock: ManualClock,
    ledger_path: Path, config_dict: dict[str, Any], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    assert clock.now() == T0
    write_config({**config_dict, "timezone": tz})
    _held(sim, conn, cfg, clock, "one")
    _held(sim, conn, cfg, clock, "two")
    r = run_cli("assign", "one", "--owner", "alice", "--due", due, "--reason", "r", operator="bob", now=T0)
    assert r.rc == 0, r
    assert read_job(ledger_path, "one").due_at == parse_time(expected)
    bulk = run_cli("bulk-assign", "--owner", "alice", "--due", due, "--filter", "two", "--reason", "r", "--yes",
                   "--json", operator="bob", now=T0)
    assert bulk.rc == 0 and json.loads(bulk.stdout)["due"] == expected, bulk
    assert read_job(ledger_path, "two").due_at == parse_time(expected)


def test_a_due_that_is_not_a_time_names_the_option(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for due in ("tomorrow", "in a bit", "tomorrow 25:00", "1e20"):
        r = run_cli("assign", "held-1", "--owner", "alice", "--due", due, "--reason", "r", operator="bob", now=T0)
        assert f"--due {due!r}" in _one_error_line(r, 2)
    assert fingerprint(ledger_path) == before


# -- the common options ------------------------------------------------------------------------------------------
EXEMPT = {"simulator": {"--ledger", "--config", "--operator", "--json"},  # no ledger: a loopback server
          "demo": {"--ledger", "--config", "--json"},  # its own folder (--dir) and seat (--operator)
          "console": {"--json"},  # a full-screen UI, nothing to print
          "serve": {"--operator", "--json"}}  # a server; its operators are the proxy's users, one per connection


def test_every_command_takes_the_common_options() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        if isinstance(command, typer.core.TyperGroup):  # a group (`policy`): its subcommands take the options
            continue
        opts = {o for p in command.params for o in getattr(p, "opts", [])}
        missing = {"--ledger", "--config", "--operator", "--json"} - opts - EXEMPT.get(name, set())
        assert not missing, f"reclaim {name} lacks {sorted(missing)}"
    for name in ("release", "reconcile", "reject", "remediate", "assign", "finding", "query"):
        opts = {o for p in group.commands[name].params for o in getattr(p, "opts", [])}
        assert "--dry-run" in opts
        assert {f.option for f in actions.ACTIONS[name].fields} <= opts


def test_read_commands_accept_operator_and_config(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any],
) -> None:
    _held(sim, conn, cfg, clock)
    for args in (["events"], ["notifications"], ["evidence"], ["show", "held-1"], ["quota"], ["verify"],
                 ["jobs"], ["views"], ["status"]):
        r = run_cli(*args, "--operator", "bob", "--config", str(config_path), "--json")
        assert r.rc == 0, (args, r)
        json.loads(r.stdout.splitlines()[0])


# -- ids are never cut -------------------------------------------------------------------------------------------
def _first_column(stdout: str) -> str:
    """The first column's cells joined back (a narrow terminal folds them over lines)."""
    return "".join(line.split("│")[1].strip() for line in stdout.splitlines() if line.startswith("│"))


def test_tables_never_cut_an_id_to_type_next(
    sim: Simulator, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path], tmp_path: Path,
    ledger_path: Path, run_cli: Callable[..., Any], free_port: Callable[[], int],
) -> None:
    channel = "oncall-pager-for-the-storage-team-in-eu-west"
    doc = make_config()
    doc["notify"] = {channel: {"kind": "webhook", "url": f"http://127.0.0.1:{free_port()}/hook",
                               "events": ["held"]}}
    write_config(doc)
    cfg = load_config(tmp_path / "reclaim.toml")
    conn = connect(ledger_path)
    clock = ManualClock(T0)
    try:
        long_id = "retention-check-2026-12-01-" + "bucket-" * 20  # 167 characters: past the 120 a cell shows
        sim.add_fault("status", status=503)
        assert submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id=long_id,
                          remotes=RemoteCache(cfg)).state == "held"
    finally:
        conn.close()
    narrow = {"COLUMNS": "70"}
    notes = run_cli("notifications", env=narrow)
    assert notes.rc == 0, notes
    event_id = json.loads(run_cli("notifications", "--json").stdout)[0]["event_id"]
    assert event_id.endswith(channel) and "…" not in _first_column(notes.stdout)
    assert _first_column(notes.stdout) == event_id
    held = run_cli("jobs", "held", env=narrow)
    assert held.rc == 0 and _first_column(held.stdout) == long_id, held.stdout


def test_receiver_json_says_where_it_listens(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    start_cli: Callable[..., Any],
) -> None:
    doc = make_config()
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    write_config(doc)
    proc = start_cli("receiver", "--port", "0", "--json", env={"RECLAIM_TEST_WHSEC": "whsec_" + "A" * 32})
    try:
        line = proc.stdout.readline()
        assert json.loads(line)["listening"].startswith("http://127.0.0.1:"), line
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
