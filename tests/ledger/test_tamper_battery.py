"""The tamper battery: every edit the trust review made by hand to a ledger, and `verify` names each one.

A small ledger is worked through the real rules (the SDK against the simulator, a signed webhook through
the receiver, a fenced outcome) by processes holding the audit key, except the triage account's finding,
written without it. Then each edit is applied as an attacker who can write the file (or owns the
database) would: straight SQL, guarding triggers dropped first where they would refuse it, a forged
event given a correct sha256 chain. Each edit runs inside a transaction that `verify` reads and that is
rolled back afterwards, so every edit meets the same untouched ledger; the last ones run for real and go
through `reclaim verify` (exit 11) with `--expect-head`. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook
from tamper import is_pg as _is_pg
from tamper import raw as _raw
from tamper import restore_guards

from ledger import audit, receiver, seal, triage
from ledger.clock import SystemClock
from ledger.config import Config, parse_config
from ledger.db import connect, write_tx
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.transitions import apply
from ledger.worker import RemoteCache, submit_now, tick

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")
KEY = secrets.token_bytes(32)
WHSEC = "whsec_" + __import__("base64").b64encode(secrets.token_bytes(24)).decode()


@pytest.fixture
def keyed() -> Iterator[None]:
    """This test process holds the audit key (as the sending and approving processes do)."""
    seal.use_key(KEY)
    try:
        yield
    finally:
        seal.use_key(None)


def _signed(event_type: str, handle: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"type": event_type, "version": "v1", "timestamp": datetime.now(UTC).isoformat(),
                       "data": {"id": handle, "status": "completed"}}).encode()
    webhook_id = f"wh-{secrets.token_hex(6)}"
    now = datetime.now(UTC)
    signature = Webhook(WHSEC).sign(webhook_id, now, body.decode())
    return body, {"webhook-id": webhook_id, "webhook-timestamp": str(int(now.timestamp())),
                  "webhook-signature": signature}


@pytest.fixture
def worked(sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], tmp_path: Path, keyed: None) -> Config:
    """j0 held, found (by alice, without the key), queried, assigned, released; j1 done and consumed, then a
    signed webhook about it; a fenced accepted outcome on j0; j2 held and assigned; j3 rate limited, its next try
    a fraction of a second ahead."""
    config_dict["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    config_dict["notify"] = {"oncall": {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["held"]}}
    cfg = parse_config(config_dict, base_dir=tmp_path)
    clock = SystemClock()
    conn = connect(ledger_path)
    try:
        remotes = RemoteCache(cfg)
        j1 = submit_now(conn, cfg, OP, {"input": "j1"}, clock=clock, job_id="j1", remotes=remotes)
        assert j1.state == "submitted", j1
        tick(conn, cfg, clock=clock, remotes=remotes, owner="w1")
        for job_id in ("j0", "j2"):
            sim.add_fault("status", status=503)  # one 503 in reply to the create: outcome unknown, held
            assert submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=remotes).state == "held"
        sim.add_fault("rate_limited", retry_after_ms=1250.5)  # a 429: not delivered, tried again later
        j3 = submit_now(conn, cfg, OP, {"input": "j3"}, clock=clock, job_id="j3", remotes=remotes)
        assert j3.state == "reserving", j3
        j0, j2 = JobKey("j0", OP), JobKey("j2", OP)
        seal.use_key(None)  # alice, a triage account, cannot read the key
        triage.record_finding(conn, cfg, j0, "not_received", "nothing there", actor="alice", clock=clock)
        seal.use_key(KEY)
        triage.assign(conn, cfg, j2, "carol", clock.now() + 3600, actor="bob", clock=clock, reason="r")
        triage.release(conn, cfg, j0, actor="bob", clock=clock, reason="not received")
        epoch = triage.get_job(conn, j0).epoch
        with write_tx(conn):  # a worker whose lease was taken over reports an accepted send: fenced
            fenced = apply(conn, j0, "accepted", actor="w-old", now=clock.now(), expected_state="reserving",
                           expected_epoch=epoch - 1, fields={"handle": "interactions/fenced-1"})
        assert not fenced.ok and fenced.refusal == "fenced"
        handle = triage.get_job(conn, JobKey("j1", OP)).handle
        body, headers = _signed("interaction.completed", handle)
        answer = receiver.receive(conn, cfg, {"gemini": WHSEC}, body, headers, clock=clock)
        assert answer.status in (200, 202), answer
        verdict = audit.verify(conn, key=KEY)
        assert verdict.ok and verdict.mac_checked and verdict.unauthenticated == 1, verdict
        counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("evidence", "fenced_writes", "webhook_deliveries", "outbox")}
        assert all(counts.values()), counts
        assert triage.get_job(conn, JobKey("j1", OP)).result is not None
        waiting = triage.get_job(conn, JobKey("j3", OP))
        assert waiting.tries == 1 and waiting.last_error and waiting.next_try_at is not None, waiting
        assert waiting.next_try_at != int(waiting.next_try_at), waiting  # a fraction: the REAL read back is sealed
        assert triage.get_job(conn, j2).held_reason
    finally:
        conn.close()
    return cfg


def _forged_finding_and_release(conn: Any) -> list[str]:
    """Append a finding by nobody and a release by bob with a correct sha256 chain and seal, no MAC (the
    attacker has no key), and move the job as the release would."""
    out: list[str] = []
    job = conn.execute("SELECT * FROM jobs WHERE job_id = 'j2'").fetchone()
    for kind, actor, to_state in (("finding", "nobody", "held"), ("release", "bob", "reserving")):
        prev, seq, ev_head, fw_head = conn.execute(
            "SELECT (SELECT hash FROM events ORDER BY id DESC LIMIT 1), "
            "(SELECT MAX(seq) + 1 FROM events WHERE job_id = 'j2'), "
            "(SELECT hash FROM evidence ORDER BY id DESC LIMIT 1), "
            "(SELECT hash FROM fenced_writes ORDER BY id DESC LIMIT 1)").fetchone()
        columns = dict(zip(job.keys(), job, strict=True)) if hasattr(job, "keys") else None
        assert columns is not None
        columns["payload"], columns["result"] = json.loads(columns["payload"]), None
        sealed = seal.seal_text(seal.row_digest(columns), ev_head, fw_head)
        at, epoch = 1.0e9 + seq, int(job["epoch"]) + (kind == "release")
        detail = json.dumps({"category": "not_received", "note": "forged"} if kind == "finding" else {"reason": "x"})
        digest = audit.event_hash(prev, at, "j2", OP, seq, actor, kind, "held", to_state, epoch, detail, sealed)
        conn.execute(
            "INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
            "prev_hash, hash, seal) VALUES (?, 'j2', ?, ?, ?, ?, 'held', ?, ?, ?, ?, ?, ?)",
            (at, OP, seq, actor, kind, to_state, epoch, detail, prev, digest, sealed))
        out.append(kind)
    conn.execute("UPDATE jobs SET state = 'reserving', attempt = attempt + 1, epoch = epoch + 1 WHERE job_id = 'j2'")
    return out


def _rehash_all(conn: Any) -> None:
    """Rewrite bob's release as carol's and recompute every hash (seals and MACs kept: no key to redo them)."""
    prev = None
    for row in conn.execute("SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, "
                            "detail, seal FROM events ORDER BY id").fetchall():
        actor = "carol" if row[6] == "release" else row[5]
        digest = audit.event_hash(prev, row[1], row[2], row[3], row[4], actor, *row[6:11], row[11])
        conn.execute("UPDATE events SET actor = ?, prev_hash = ?, hash = ? WHERE id = ?",
                     (actor, prev, digest, row[0]))
        prev = digest


SQLITE_GUARDS = tuple(f"DROP TRIGGER IF EXISTS {t}" for t in (
    "events_no_update", "events_no_delete", "events_no_replace", "events_chain", "evidence_no_update",
    "evidence_no_delete", "fenced_writes_no_update", "fenced_writes_no_delete", "webhook_deliveries_no_update",
    "webhook_deliveries_no_delete"))
PG_GUARDS = tuple(f"ALTER TABLE {t} DISABLE TRIGGER USER" for t in (
    "events", "evidence", "fenced_writes", "webhook_deliveries"))

# (name, what verify must say, the edit: SQL statements or a function of the connection)
EDITS: list[tuple[str, str, Any]] = [
    ("forged finding and release", "release by bob): not authenticated", _forged_finding_and_release),
    ("payload", "its payload differ", ["UPDATE jobs SET payload = '{\"input\": \"evil\"}' WHERE job_id = 'j2'"]),
    ("handle", "its handle differ", ["UPDATE jobs SET handle = 'interactions/other' WHERE job_id = 'j1'"]),
    ("idem key", "its idem_key differ", ["UPDATE jobs SET idem_key = 'k-other' WHERE job_id = 'j2'"]),
    ("result", "its result differ", ["UPDATE jobs SET result = '{\"text\": \"forged\"}' WHERE job_id = 'j1'"]),
    ("owner", "its owner differ", ["UPDATE jobs SET owner = 'mallory' WHERE job_id = 'j2'"]),
    ("due", "its due_at differ", ["UPDATE jobs SET due_at = 1 WHERE job_id = 'j2'"]),
    ("held reason", "its held_reason differ",
     ["UPDATE jobs SET held_reason = 'remote confirmed: never received' WHERE job_id = 'j2'"]),
    ("last error", "its last_error differ", ["UPDATE jobs SET last_error = 'HTTP 400: bad input' WHERE job_id = 'j3'"]),
    ("next try in 2100", "its next_try_at differ",
     ["UPDATE jobs SET next_try_at = 4102444800 WHERE job_id = 'j3'"]),
    ("next try set on a job without one", "its next_try_at differ",
     ["UPDATE jobs SET next_try_at = 4102444800 WHERE job_id = 'j0'"]),
    ("tries", "its tries differ", ["UPDATE jobs SET tries = 0 WHERE job_id = 'j3'"]),
    ("lease taken by hand", "its lease_owner, lease_until differ",
     ["UPDATE jobs SET lease_owner = 'mallory', lease_until = 4102444800 WHERE job_id = 'j2'"]),
    ("send start forged", "its send_started_at differ", ["UPDATE jobs SET send_started_at = 1 WHERE job_id = 'j2'"]),
    # The guards left off after the edit: verify names the edit behind them, not only the missing triggers.
    ("guards left off: events re-hashed", "its MAC does not match", _rehash_all),
    ("guards left off: evidence deleted", "does not chain to the row before it",
     ["DELETE FROM evidence WHERE source = 'fenced_outcome'"]),
    ("re-hashed chain", "its MAC does not match", _rehash_all),
    ("evidence row deleted", "does not chain to the row before it",
     ["DELETE FROM evidence WHERE source = 'fenced_outcome'"]),
    ("evidence tail deleted", "evidence: the newest row the last event sealed is gone",
     ["DELETE FROM evidence WHERE id = (SELECT MAX(id) FROM evidence)"]),
    ("quota_usage edited", "quota_usage for article.generate", ["UPDATE quota_usage SET used = 0"]),
    ("fenced_writes deleted", "fenced_writes: the newest row the last event sealed is gone",
     ["DELETE FROM fenced_writes"]),
    ("webhook_deliveries deleted", "webhook_deliveries: no row for webhook", ["DELETE FROM webhook_deliveries"]),
    ("pending notifications deleted", "is gone from the outbox", ["DELETE FROM outbox"]),
    ("job counts edited", "job_counts says", ["UPDATE job_counts SET n = n + 5"]),
    ("event tallies edited", "event_tallies says", ["UPDATE event_tallies SET n = n + 1"]),
]
SQLITE_ONLY: list[tuple[str, str, Any]] = [
    ("trigger dropped", "triggers missing or disabled: events_no_delete", ["DROP TRIGGER events_no_delete"]),
]
PG_ONLY: list[tuple[str, str, Any]] = [
    ("trigger dropped", "triggers missing or disabled: events_chain", ["DROP TRIGGER events_chain ON events"]),
]


def test_every_tampering_is_named_by_verify(worked: Config, ledger_path: Path, run_cli: Callable[..., Any],
                                            tmp_path: Path) -> None:
    pg = _is_pg(ledger_path)
    missed: list[str] = []
    for name, expected, edit in EDITS + (PG_ONLY if pg else SQLITE_ONLY):
        conn = _raw(ledger_path)
        try:
            conn.execute("BEGIN")
            if not pg:
                conn.row_factory = sqlite3.Row
            dropping = name == "trigger dropped"
            if not dropping:  # the guards off for the edit, and back on after it, as an attacker would
                for stmt in PG_GUARDS if pg else SQLITE_GUARDS:
                    conn.execute(stmt)
            if callable(edit):
                edit(conn)
            elif not dropping:
                for stmt in edit:
                    conn.execute(stmt)
            left_off = name.startswith("guards left off")
            wanted = [expected, "triggers missing or disabled"] if left_off else [expected]
            if not dropping and not left_off:
                if pg:
                    for stmt in PG_GUARDS:
                        conn.execute(stmt.replace("DISABLE", "ENABLE"))
                else:
                    restore_guards(conn)
            elif dropping:
                for stmt in edit:
                    conn.execute(stmt)
            verdict = audit.verify(conn, key=KEY)
            said = " | ".join(p for p in (verdict.chain_break, verdict.job_mismatch, *verdict.problems) if p)
            if verdict.ok or any(w not in said for w in wanted):
                missed.append(f"{name}: ok={verdict.ok}, said {said!r}")
        finally:
            conn.execute("ROLLBACK")
            conn.close()
    assert not missed, "\n".join(missed)
    # The untouched ledger still verifies, through the CLI with the key in the config's folder.
    key_file = tmp_path / "audit.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    env = {"RECLAIM_AUDIT_KEY_FILE": str(key_file)}
    out = run_cli("verify", "--json", env=env)
    assert out.rc == 0, out
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["mac_checked"], doc
    head = f"{doc['events']}:{doc['head_hash']}"
    # For real: the tail of the chain deleted; then (on a ledger with nothing left to compare) everything.
    conn = _raw(ledger_path)
    try:
        if pg:
            conn.execute("DROP TRIGGER events_no_change ON events")
            conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id DESC LIMIT 2)")
        else:
            conn.execute("DROP TRIGGER events_no_delete")
            conn.execute("DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id DESC LIMIT 2)")
            conn.execute("CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
                         "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END")
    finally:
        conn.close()
    out = run_cli("verify", "--expect-head", head, env=env)
    assert out.rc == 11 and "events were deleted from the end of the chain" in out.stdout, out
    if pg:  # the database's owner empties the ledger: nothing left to disagree, but the head kept outside
        conn = _raw(ledger_path)
        try:
            conn.execute("DROP TRIGGER events_no_truncate ON events")
            conn.execute("TRUNCATE events, jobs, quota_usage, job_counts, event_tallies")
        finally:
            conn.close()
        out = run_cli("verify", "--expect-head", head, env=env)
        assert out.rc == 11 and f"holds 0 events but the head you kept says {doc['events']}" in out.stdout, out
    out = run_cli("verify", "--expect-head", "12:nothex", env=env)
    assert out.rc == 2 and "--expect-head" in out.stderr and "COUNT:HASH" in out.stderr, out


OLDER_ROW_COLUMNS = ("idem_key", "target", "payload", "handle", "result", "owner", "due_at", "quota_day")
"""What an event sealed of its job's row before the held reason, last error, next try and tries were sealed."""


def _said_after(ledger: Path, *edits: str) -> str:
    """What verify says of the ledger with `edits` applied ("" when it holds), the edits rolled back after."""
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        for stmt in edits:
            conn.execute(stmt)
        verdict = audit.verify(conn, key=KEY)
        said = " | ".join(p for p in (verdict.chain_break, verdict.job_mismatch, *verdict.problems) if p)
        assert verdict.ok == (said == ""), verdict
        return said
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_an_older_seal_is_compared_on_the_columns_it_names(
    sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], tmp_path: Path, keyed: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job whose last event sealed only the older columns verifies; an edit of a column that seal names is
    still named, one it does not name is not; the job's next event seals every column again."""
    cfg = parse_config(config_dict, base_dir=tmp_path)
    clock = SystemClock()
    conn = connect(ledger_path)
    try:
        with monkeypatch.context() as older:
            older.setattr(seal, "ROW_COLUMNS", OLDER_ROW_COLUMNS)
            sim.add_fault("status", status=503)
            held = submit_now(conn, cfg, OP, {"input": "old"}, clock=clock, job_id="old", remotes=RemoteCache(cfg))
        assert held.state == "held", held
        sealed = conn.execute("SELECT seal FROM events WHERE job_id = 'old' ORDER BY seq DESC LIMIT 1").fetchone()[0]
        assert set(json.loads(sealed)["row"]) == set(OLDER_ROW_COLUMNS)
    finally:
        conn.close()
    assert _said_after(ledger_path) == ""
    assert _said_after(ledger_path, "UPDATE jobs SET held_reason = 'rewritten', tries = 9 WHERE job_id = 'old'") == ""
    said = _said_after(ledger_path, "UPDATE jobs SET payload = '{\"input\": \"evil\"}' WHERE job_id = 'old'")
    assert "job old / article.generate: its payload differ" in said, said
    conn = connect(ledger_path)
    try:
        triage.assign(conn, cfg, JobKey("old", OP), "carol", clock.now() + 3600, actor="bob", clock=clock, reason="r")
    finally:
        conn.close()
    assert _said_after(ledger_path) == ""
    said = _said_after(ledger_path, "UPDATE jobs SET held_reason = 'rewritten' WHERE job_id = 'old'")
    assert "job old / article.generate: its held_reason differ" in said, said
