"""Who did it: identity from the OS account, declared names only where the config allows them, four-eyes
over everyone who looked at the current attempt, a sender role for what sends, and no clock moved from
the environment.

The OS-account tests create two real accounts (`useradd`) and run the CLI as each with `runuser`, from a
venv made of the system `/usr/bin/python3` (the default interpreter may live where other accounts cannot
enter). They need root, which CI has.
"""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from os_accounts import Seats, held_in, raw_config

from ledger import triage
from ledger.clock import ManualClock, SystemClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.errors import BadInput, Refused
from ledger.identity import Identity, os_account, resolve
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
ROOT = Path(__file__).resolve().parents[2]


def _held(sim: Simulator, conn: sqlite3.Connection, cfg: Config, clock: Any, job_id: str = "held-1") -> JobKey:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def _actors(path: Path, key: JobKey) -> list[tuple[str, str]]:
    conn = connect(path, readonly=True)
    try:
        return [(e.kind, e.actor) for e in events_store.job_events(conn, key)]
    finally:
        conn.close()


# -- four-eyes: any finding or query of the current attempt -------------------------------------------------
def test_an_approver_who_wrote_any_finding_of_the_attempt_cannot_release(
    sim: Simulator, conn: sqlite3.Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    """bob writes the substantive finding, alice adds `cannot_determine "."`, bob tries to release."""
    key = _held(sim, conn, cfg, clock)
    triage.record_finding(conn, cfg, key, "not_received", "not in the remote console", actor="bob", clock=clock)
    triage.record_finding(conn, cfg, key, "cannot_determine", ".", actor="alice", clock=clock)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="four-eyes: bob wrote a finding for this attempt"):
        triage.release(conn, cfg, key, actor="bob", clock=clock, reason="looks fine")
    assert fingerprint(ledger_path) == before
    triage.release(conn, cfg, key, actor="carol", clock=clock, reason="bob's finding holds")
    assert ("release", "carol") in _actors(ledger_path, key)


def test_an_approver_who_queried_the_remote_cannot_release(
    sim: Simulator, conn: sqlite3.Connection, cfg: Config, clock: ManualClock, ledger_path: Path,
    fingerprint: Callable[[Path], str],
) -> None:
    key = _held(sim, conn, cfg, clock)
    sim.clear_faults()
    triage.query_job(conn, cfg, key, RemoteCache(cfg).for_operation(OP), actor="bob", clock=clock)
    triage.record_finding(conn, cfg, key, "not_received", "nothing there", actor="alice", clock=clock)
    before = fingerprint(ledger_path)
    with pytest.raises(Refused, match="four-eyes: bob queried the remote for this attempt"):
        triage.release(conn, cfg, key, actor="bob", clock=clock, reason="r")
    assert fingerprint(ledger_path) == before
    assert triage.preview(conn, cfg, key, "release", "bob", clock).allowed is False
    assert triage.preview(conn, cfg, key, "release", "carol", clock).allowed is True


def test_what_happened_in_an_earlier_attempt_does_not_count(
    sim: Simulator, conn: sqlite3.Connection, cfg: Config, clock: ManualClock,
) -> None:
    """A release starts a new attempt: bob's finding on the first one does not bar him on the second."""
    key = _held(sim, conn, cfg, clock)
    triage.record_finding(conn, cfg, key, "not_received", "first look", actor="bob", clock=clock)
    triage.release(conn, cfg, key, actor="carol", clock=clock, reason="r")
    assert triage.attempt_authors(conn, key) == {}


# -- identity from the config's source ----------------------------------------------------------------------
def _cfg(raw: dict[str, Any], tmp_path: Path, source: str | None) -> Config:
    doc = dict(raw)
    doc.pop("identity", None)
    if source is not None:
        doc["identity"] = {"source": source}
    return parse_config(doc, base_dir=tmp_path)


def test_os_identity_is_the_effective_account_whatever_user_and_logname_say(
    config_dict: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = _cfg(config_dict, tmp_path, None)  # the default is "os"
    account = pwd.getpwuid(os.geteuid()).pw_name
    monkeypatch.setenv("USER", "bob")
    monkeypatch.setenv("LOGNAME", "bob")
    assert os_account() == account
    assert resolve(cfg, None) == Identity(account, "os")
    assert resolve(cfg, account) == Identity(account, "os")  # naming yourself is not a claim
    with pytest.raises(BadInput, match=r"operator 'bob': this ledger takes identity from the OS account"):
        resolve(cfg, "bob")


def test_declared_identity_counts_only_when_the_config_says_so(config_dict: dict[str, Any], tmp_path: Path) -> None:
    declared = resolve(_cfg(config_dict, tmp_path, "declared"), "bob")
    assert declared == Identity("bob", "declared") and not declared.verified
    assert declared.label == "identity: declared, not verified (bob)"
    with pytest.raises(BadInput, match="empty name"):
        resolve(_cfg(config_dict, tmp_path, "declared"), " ")


@pytest.mark.parametrize("source", ["PROXY", "ldap", ""])
def test_an_unknown_identity_source_is_refused_naming_the_key(
    source: str, config_dict: dict[str, Any], write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config_dict["identity"] = {"source": source}
    path = write_config(config_dict)
    before = fingerprint(ledger_path)
    r = run_cli("status", config=path)
    assert r.rc == 2 and "identity.source" in r.stderr, r
    assert fingerprint(ledger_path) == before


def test_in_os_mode_a_declared_other_name_is_refused_and_writes_nothing(
    sim: Simulator, conn: sqlite3.Connection, config_dict: dict[str, Any], write_config: Callable[..., Path],
    tmp_path: Path, clock: ManualClock, ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    config_dict.pop("identity")
    config_dict["operators"][os_account()] = ["triage"]
    path = write_config(config_dict)
    cfg = parse_config(config_dict, base_dir=tmp_path)
    key = _held(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for how in ({"operator": "bob"}, {"operator": "bob", "env": {"USER": "bob", "LOGNAME": "bob"}}):
        r = run_cli("release", key.job_id, "--reason", "r", config=path, **how)
        assert r.rc == 2 and "takes identity from the OS account" in r.stderr, r
    r = run_cli("release", key.job_id, "--operator", "bob", "--reason", "r", config=path)
    assert r.rc == 2, r
    assert fingerprint(ledger_path) == before
    # Unset, the OS account acts; status says which and that it is verified.
    r = run_cli("status", "--json", config=path, env={"RECLAIM_OPERATOR": ""})
    doc = json.loads(r.stdout)
    assert doc["identity"] == {"operator": os_account(), "source": "os", "verified": True, "roles": ["triage", "viewer"]}


def test_status_says_a_declared_identity_is_not_verified(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    r = run_cli("status", operator="bob")
    assert r.rc == 0, r
    assert "identity: declared, not verified (bob); roles: approver, triage, viewer" in r.stdout


# -- the sender role ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ["submit", OP, "--payload", '{"input": "x"}', "--job-id", "by-a-viewer"],
    ["tick"],
    ["worker", "--interval", "1"],
], ids=["submit", "tick", "worker"])
@pytest.mark.parametrize("who", ["vic", "bob"])
def test_sending_commands_need_the_sender_role(
    args: list[str], who: str, sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    """A viewer (an unknown name) and an approver alike may not send, nor append blocked_new_job events."""
    before = fingerprint(ledger_path)
    r = run_cli(*args, operator=who, timeout=30)
    assert r.rc == 6, r
    assert f"{who} lacks the sender role" in r.stderr, r.stderr
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


def test_the_scheduler_account_submits(sim: Simulator, ledger_path: Path, config_path: Path,
                                       run_cli: Callable[..., Any]) -> None:
    r = run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", "by-the-scheduler")
    assert r.rc == 0, r
    assert _actors(ledger_path, JobKey("by-the-scheduler", OP))[0] == ("reserve", "scheduler")


# -- no environment variable moves the shipped CLI's clock -------------------------------------------------
def test_the_shipped_cli_ignores_clock_variables(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    for i, var in enumerate([{"RECLAIM_NOW": "2020-01-01T00:00:00Z"}, {"RECLAIM_CLOCK_OFFSET": "-86400000"}]):
        r = run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", f"clock-{i}", env=var)
        assert r.rc == 0, r
    conn = connect(ledger_path, readonly=True)
    try:
        days = {row[0] for row in conn.execute("SELECT day FROM quota_usage")}
        reserved = [jobs_store.find_job(conn, JobKey(f"clock-{i}", OP)) for i in range(2)]
    finally:
        conn.close()
    assert days <= {today, datetime.fromtimestamp(SystemClock().now() - 5, UTC).strftime("%Y-%m-%d")}, days
    assert all(j is not None and j.created_at > datetime(2026, 1, 1, tzinfo=UTC).timestamp() for j in reserved)


# -- two real OS accounts (tests/support/os_accounts.py, the `seats` fixture of tests/cli/conftest.py) ------
@pytest.mark.slow
def test_alice_cannot_act_as_bob_in_os_mode(
    seats: Seats, sim: Simulator, fingerprint: Callable[[Path], str],
) -> None:
    key = held_in(seats, sim)
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "absent remotely")
    assert r.returncode == 0, r.stderr
    before = fingerprint(seats.ledger)
    # A flag, the environment variable, and $USER/$LOGNAME: none makes alice bob.
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", "--operator", seats.bob)
    assert r.returncode == 2 and f"OS account ({seats.alice})" in r.stderr, r.stderr
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", env={"RECLAIM_OPERATOR": seats.bob})
    assert r.returncode == 2 and "takes identity from the OS account" in r.stderr, r.stderr
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", env={"USER": seats.bob, "LOGNAME": seats.bob})
    assert r.returncode == 6 and f"{seats.alice} lacks the approver role" in r.stderr, r.stderr
    assert fingerprint(seats.ledger) == before
    # status, run as alice, says who she is and that it is verified.
    r = seats.run(seats.alice, "status", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["identity"]["operator"] == seats.alice
    assert json.loads(r.stdout)["identity"]["verified"] is True
    # bob, as himself, releases on alice's finding; the ledger records both accounts.
    r = seats.run(seats.bob, "release", key.job_id, "--reason", "alice found nothing remotely")
    assert r.returncode == 0, r.stderr
    acted = _actors(seats.ledger, key)
    assert ("finding", seats.alice) in acted and ("release", seats.bob) in acted


def test_four_eyes_between_real_accounts(seats: Seats, sim: Simulator, fingerprint: Callable[[Path], str]) -> None:
    """bob writes the finding, alice adds one; bob may not release: he looked at this attempt."""
    key = held_in(seats, sim, "held-four-eyes")
    for who, category in ((seats.bob, "not_received"), (seats.alice, "cannot_determine")):
        r = seats.run(who, "finding", key.job_id, "--category", category, "--note", ".")
        assert r.returncode == 0, r.stderr
    before = fingerprint(seats.ledger)
    r = seats.run(seats.bob, "release", key.job_id, "--reason", "r")
    assert r.returncode == 6 and f"four-eyes: {seats.bob} wrote a finding" in r.stderr, r.stderr
    assert fingerprint(seats.ledger) == before


# -- the policy is the ledger's: a config of one's own changes nothing of who one is --------------------------
def _seed_policy(seats: Seats) -> None:
    """The ledger's owner (root, who made it) records the shared config's policy, as `reclaim init` does."""
    from ledger import policy
    from ledger.config import load_config
    from ledger.db import write_tx
    from ledger.signing import current_signer, key_path, new_key, use_signer

    if current_signer() is None:
        use_signer(new_key(key_path(), os_account()))
    conn = connect(seats.ledger)
    try:
        with write_tx(conn):
            assert policy.record(conn, load_config(seats.config), actor="root", now=SystemClock().now(), how="test")
    finally:
        conn.close()


@pytest.mark.slow
def test_a_config_of_her_own_makes_alice_neither_bob_nor_an_approver(
    seats: Seats, sim: Simulator, fingerprint: Callable[[Path], str], write_config: Callable[..., Path],
) -> None:
    key = held_in(seats, sim, "held-policy")
    _seed_policy(seats)
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "absent remotely")
    assert r.returncode == 0, r.stderr
    before = fingerprint(seats.ledger)
    shared = raw_config(seats.config)

    def own(change: Callable[[dict[str, Any]], None], name: str) -> Path:
        doc = json.loads(json.dumps(shared))
        change(doc)
        path = write_config(doc, seats.ledger.parent / f"{name}.toml")
        path.chmod(0o644)
        return path

    declared = own(lambda d: d.__setitem__("identity", {"source": "declared"}), "declared")
    proxy = own(lambda d: (d.__setitem__("identity", {"source": "proxy"}),
                           d.__setitem__("serve", {"account": seats.alice})), "proxy")
    self_approver = own(lambda d: (d["operators"].__setitem__(seats.alice, ["triage", "approver"]),
                                   d.setdefault("policy", {}).__setitem__("four_eyes", False)), "self-approver")
    no_four_eyes = own(lambda d: d.setdefault("policy", {}).__setitem__("four_eyes", False), "no-four-eyes")
    cases = [
        (declared, {"RECLAIM_OPERATOR": seats.bob}, "config key identity.source: differs from the ledger's policy"),
        (proxy, {"RECLAIM_SEAT_OPERATOR": seats.bob}, "config key identity.source: differs from the ledger's policy"),
        (self_approver, {}, "config key operators: differs from the ledger's policy"),
        (no_four_eyes, {}, "config key policy.four_eyes: differs from the ledger's policy"),
    ]
    for path, env, said in cases:
        r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", env={"RECLAIM_CONFIG": str(path), **env})
        assert r.returncode == 2 and said in r.stderr and "reclaim policy" in r.stderr, (path.name, r.stderr)
    # A config that leaves identity and rights out (presentation and connection only): the ledger's policy.
    quiet = own(lambda d: [d.pop(k, None) for k in ("identity", "operators", "policy")], "quiet")
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", env={"RECLAIM_CONFIG": str(quiet)})
    assert r.returncode == 6 and f"{seats.alice} lacks the approver role" in r.stderr, r.stderr
    # Only the ledger's owner may change the policy.
    r = seats.run(seats.alice, "policy", "set", "--from-config", env={"RECLAIM_CONFIG": str(self_approver)})
    assert r.returncode == 6 and "only the ledger's owner (root)" in r.stderr, r.stderr
    assert fingerprint(seats.ledger) == before
    # status, as alice: the ledger file is writable by others here, and status says so.
    r = seats.run(seats.alice, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["policy"]["held_by_ledger"] and any("writable by" in w and "chmod go-w" in w for w in doc["warnings"])
    # bob, as himself under the ledger's policy, releases; the decision records how his name was established.
    r = seats.run(seats.bob, "release", key.job_id, "--reason", "alice found nothing remotely")
    assert r.returncode == 0, r.stderr
    conn = connect(seats.ledger, readonly=True)
    try:
        decisions = {e.kind: e for e in events_store.job_events(conn, key) if e.kind in ("finding", "release")}
    finally:
        conn.close()
    assert decisions["release"].actor == seats.bob and decisions["release"].detail["identity_source"] == "os"
    assert decisions["finding"].detail["identity_source"] == "os"
