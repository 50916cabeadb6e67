"""Decisions signed by the person who made them, tried as an adversary would with real OS accounts.

alice (triage) and bob (triage, approver) each make a signing key with `reclaim keys new`; root owns the
ledger, signs its policy, registers both public keys, and is the sending account. alice then fakes bob's uid
inside her own process (a `sitecustomize.py` replacing `os.geteuid`, no compiler needed) and releases a job she
triaged herself: the CLI believes her, but her release carries her signature, not bob's, so the worker holds the
job instead of sending it (counted at the simulator) and `verify`, with public keys only, names the event. A
policy event she appends through the library is ignored by every process, and the owner can set the policy again.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import secrets
import sqlite3
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gemini_deliveries import delivery
from ledger_reads import fresh
from os_accounts import OP, Seats, held_in, raw_config

from ledger import policy, receiver
from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import write_tx
from ledger.errors import EXIT_REFUSED, EXIT_VERIFY_FAILED
from ledger.identity import os_account
from ledger.service import Ledger
from ledger.signing import Signer, new_key, use_signer
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store import outbox as outbox_store
from ledger.worker import RemoteCache, submit_now

pytestmark = pytest.mark.slow


@pytest.fixture
def signed(seats: Seats, write_config: Callable[..., Path]) -> Iterator[Signer]:
    """Each account's key made and registered: alice's and bob's by `reclaim keys new` as themselves, root's (the
    owner and sending account) here; the shared config lists them and root records the policy. Root's signer."""
    publics: dict[str, str] = {}
    for who in (seats.alice, seats.bob):
        r = seats.run(who, "keys", "new", "--json")
        assert r.returncode == 0, r.stderr
        made = json.loads(r.stdout)
        assert made["account"] == who and Path(made["file"]).stat().st_mode & 0o777 == 0o600
        assert Path(made["file"]).stat().st_uid == pwd.getpwnam(who).pw_uid
        publics[who] = made["public_key"]
    root_keys = seats.key_file("root").parent
    root_keys.mkdir(parents=True)
    root_keys.chmod(0o700)
    owner = new_key(seats.key_file("root"), os_account())
    publics[owner.account] = owner.public
    doc = raw_config(seats.config)
    doc["operators"][owner.account] = ["sender"]
    doc["public_keys"] = publics
    doc["notify"] = {"oncall": {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["held"]}}
    write_config(doc, seats.config)
    use_signer(owner)
    with fresh(seats.ledger) as conn, write_tx(conn):
        assert policy.record(conn, load_config(seats.config), actor=owner.account, now=SystemClock().now(),
                             how="test")
    yield owner
    use_signer(None)


def _as_bob(seats: Seats) -> dict[str, str]:
    """The environment that makes alice's own process believe it runs as bob: a sitecustomize.py on PYTHONPATH."""
    fake = seats.ledger.parent.parent / "fake-bob"
    fake.mkdir(exist_ok=True)
    (fake / "sitecustomize.py").write_text(textwrap.dedent(f"""\
        import os
        os.geteuid = lambda: {pwd.getpwnam(seats.bob).pw_uid}
        os.getuid = lambda: {pwd.getpwnam(seats.bob).pw_uid}
    """), encoding="utf-8")
    fake.chmod(0o755)
    (fake / "sitecustomize.py").chmod(0o644)
    return {"PYTHONPATH": str(fake)}


def _tick(seats: Seats) -> None:
    """One worker pass as root, the sending account, with its own key."""
    with Ledger.open(seats.ledger, load_config(seats.config)) as ledger:
        ledger.tick()


def _verify(seats: Seats, who: str) -> tuple[int, dict[str, Any]]:
    r = seats.run(who, "verify", "--json")
    return r.returncode, json.loads(r.stdout)


def test_alice_claiming_bobs_uid_cannot_release_what_the_worker_sends(
    seats: Seats, signed: Signer, sim: Simulator,
) -> None:
    key = held_in(seats, sim, "held-signed")
    assert sim.count("create") == 1
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "absent remotely")
    assert r.returncode == 0, r.stderr
    # Her own process believes she is bob: the CLI cannot tell, and records a release "by bob".
    fake = _as_bob(seats)
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r", env=fake)
    assert r.returncode == 0, r.stderr
    # The worker checks the release's signature before the send: alice's key, not bob's. Held, not sent.
    _tick(seats)
    assert sim.count("create") == 1
    with fresh(seats.ledger) as conn:
        job = jobs_store.find_job(conn, key)
        events = events_store.job_events(conn, key)
        queued = outbox_store.listed(conn, 100)
    forged = next(e for e in events if e.kind == "release")
    assert forged.actor == seats.bob
    assert job is not None and job.state == "held", job
    assert f"event {forged.id}" in (job.held_reason or "") and "does not verify" in (job.held_reason or "")
    assert events[-1].kind == "decision_unverified" and events[-1].detail["event_id"] == forged.id
    assert any(row.key == key and row.kind == "held" for row in queued), queued
    # Pointing her process at bob's key file gains nothing: the kernel will not let her read it.
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "still absent")
    assert r.returncode == 0, r.stderr
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r",
                  env={**fake, "RECLAIM_SIGNING_KEY_FILE": str(seats.key_file(seats.bob))})
    assert r.returncode == 0, r.stderr
    _tick(seats)
    assert sim.count("create") == 1
    # verify, run by bob with public keys only, names both forged releases.
    rc, verdict = _verify(seats, seats.bob)
    assert rc == EXIT_VERIFY_FAILED and not verdict["ok"], verdict
    with fresh(seats.ledger) as conn:
        releases = [e for e in events_store.job_events(conn, key) if e.kind == "release"]
    assert len(releases) == 2
    for e in releases:
        assert any(f"event {e.id} " in p and "release" in p for p in verdict["problems"]), verdict["problems"]
    # bob, as himself, releases on alice's finding: his signature verifies, the worker sends the new attempt.
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "absent, third look")
    assert r.returncode == 0, r.stderr
    r = seats.run(seats.bob, "release", key.job_id, "--reason", "alice found nothing remotely")
    assert r.returncode == 0, r.stderr
    _tick(seats)
    assert sim.count("create") == 2
    with fresh(seats.ledger) as conn:
        assert jobs_store.state_of(conn, key) in ("submitted", "done", "consumed")


def test_a_forged_policy_event_is_ignored_by_every_process_and_the_owner_sets_policy_again(
    seats: Seats, signed: Signer, sim: Simulator, write_config: Callable[..., Path],
) -> None:
    key = held_in(seats, sim, "held-policy-forged")
    held_policy = json.loads(seats.run(seats.bob, "policy", "show", "--json").stdout)
    # alice writes the ledger file: she appends a policy making her an approver, four-eyes off, signed by her own
    # key and naming it as the owner's, through the library (the chain trigger accepts it).
    script = seats.ledger.parent.parent / "forge.py"
    script.write_text(textwrap.dedent(f"""\
        import json
        from pathlib import Path
        from ledger.db import connect, write_tx
        from ledger.identity import os_account
        from ledger.policy import POLICY_KEY
        from ledger.signing import read_key, use_signer
        from ledger.store import events
        signer = read_key(Path({str(seats.key_file(seats.alice))!r}), os_account())
        use_signer(signer)
        settings = json.loads({json.dumps(json.dumps(held_policy["policy"]))})
        settings["operators"][{seats.alice!r}] = ["approver", "triage", "viewer"]
        settings["policy.four_eyes"] = False
        conn = connect({str(seats.ledger)!r})
        with write_tx(conn):
            print(events.append(conn, POLICY_KEY, at=2e9, actor="root", kind="policy_set", from_state=None,
                                to_state=None, epoch=None,
                                detail={{"policy": settings, "changed": [], "how": "forged",
                                         "owner_key": signer.public}}))
    """), encoding="utf-8")
    script.chmod(0o644)
    out = seats.run_python(seats.alice, script)
    assert out.returncode == 0, out.stderr
    forged_id = int(out.stdout.strip())
    # Ignored by alice's own process and by bob's: the last valid policy stands, and the forged event is named.
    for who in (seats.alice, seats.bob):
        shown = json.loads(seats.run(who, "policy", "show", "--json").stdout)
        assert shown["event_id"] == held_policy["event_id"], shown
        assert [i["event_id"] for i in shown["ignored"]] == [forged_id], shown
        assert seats.run(who, "status").returncode == 0
    r = seats.run(seats.alice, "finding", key.job_id, "--category", "not_received", "--note", "absent remotely")
    assert r.returncode == 0, r.stderr
    r = seats.run(seats.alice, "release", key.job_id, "--reason", "r")
    assert r.returncode == EXIT_REFUSED and f"{seats.alice} lacks the approver role" in r.stderr, r.stderr
    rc, verdict = _verify(seats, seats.bob)
    assert rc == EXIT_VERIFY_FAILED and any(f"event {forged_id} " in p for p in verdict["problems"]), verdict
    # The owner sets the policy again (signed with the owner key): it is the ledger's.
    doc = raw_config(seats.config)
    doc["policy"]["release_requires_finding"] = False
    write_config(doc, seats.config)
    r = seats.run("root", "policy", "set", "--from-config", "--json")
    assert r.returncode == 0, r.stderr
    recorded = json.loads(r.stdout)["event_id"]
    assert recorded > forged_id
    shown = json.loads(seats.run(seats.alice, "policy", "show", "--json").stdout)
    assert shown["event_id"] == recorded and shown["policy"]["policy.release_requires_finding"] is False, shown
    assert os.path.exists(seats.key_file("root"))


def test_a_delivery_row_inserted_by_hand_does_not_make_the_real_delivery_a_replay(
    seats: Seats, signed: Signer, sim: Simulator, write_config: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", secret)
    doc = raw_config(seats.config)
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    write_config(doc, seats.config)
    cfg = load_config(seats.config)
    with fresh(seats.ledger) as conn:
        sent = submit_now(conn, cfg, OP, {"input": "wh"}, clock=SystemClock(), job_id="wh-1", remotes=RemoteCache(cfg))
        assert sent.state == "submitted", sent
        handle = jobs_store.find_job(conn, sent.key).handle
    # Someone who can write the file records, ahead of it, the id the remote's next delivery will carry.
    webhook_id = f"wh-{secrets.token_hex(6)}"
    raw = sqlite3.connect(seats.ledger)
    with raw:
        raw.execute("INSERT INTO webhook_deliveries (webhook_id, received_at, signature, type, evidence_id) "
                    "VALUES (?, ?, 'v1,forged', 'interaction.completed', NULL)", (webhook_id, SystemClock().now()))
    raw.close()
    body, headers = delivery(handle, secret, msg_id=webhook_id)  # the documented envelope, signed
    with fresh(seats.ledger) as conn:
        answer = receiver.receive(conn, cfg, {"gemini": secret}, body, headers, clock=SystemClock())
        assert answer.status == 202 and answer.message == "recorded", answer
        assert any(e.kind == "evidence" for e in events_store.job_events(conn, sent.key))
    seats.share_files()
    rc, verdict = _verify(seats, seats.bob)
    assert rc == EXIT_VERIFY_FAILED, verdict
    assert any(f"webhook delivery {webhook_id!r}" in p and "is not signed" in p for p in verdict["problems"]), verdict
