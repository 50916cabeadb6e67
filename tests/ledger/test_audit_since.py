"""`reclaim verify --since COUNT:HASH`: only what was appended after a head an earlier verify printed, checked as a
full verify checks it; and the walk's own pieces (the merge of events and rows by job, the bounded list of failing
events). Runs on SQLite and on PostgreSQL.

Each edit is made as an attacker who can write the ledger would (straight SQL, the guarding triggers dropped and put
back), inside a transaction that `verify` reads and that is rolled back after, so every edit meets the same ledger.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tamper import is_pg as _is_pg
from tamper import raw as _raw
from tamper import restore_guards

from ledger import audit
from ledger.db import connect
from ledger.simulator import Simulator

OP = "article.generate"
BACKENDS = ("sqlite", "postgresql")  # each test that takes a ledger runs on each (tests/conftest.py)
SQLITE_GUARDS = ("events_no_update", "events_no_delete", "events_no_replace", "events_chain")


def _head(run_cli: Callable[..., Any], *args: str) -> tuple[int, dict[str, Any]]:
    out = run_cli("verify", "--json", *args)
    return out.rc, json.loads(out.stdout)


@pytest.fixture
def appended(sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], write_config: Callable[..., Path],
             run_cli: Callable[..., Any]) -> tuple[Path, str]:
    """A worked ledger whose full verify printed a head, then more work appended after it (new jobs sent and held,
    notifying, one job from before the head released and sent again): (the ledger, the head kept)."""
    config_dict["notify"] = {"oncall": {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["held"]}}
    write_config(config_dict)
    sim.add_fault("status", status=503, match_idem=None)
    for i in range(3):
        assert run_cli("submit", OP, "--payload", json.dumps({"input": f"x{i}"}), "--job-id", f"j{i}").rc in (0, 4, 5)
    rc, doc = _head(run_cli)
    assert rc == 0 and doc["ok"] and doc["since"] is None and doc["pages_checked"], doc
    head = doc["head"]
    assert head == f"{doc['events']}:{doc['head_hash']}"
    assert run_cli("finding", "j0", "--category", "not_received", "--note", "nothing", operator="alice").rc == 0
    assert run_cli("release", "j0", "--reason", "not received", operator="bob").rc == 0
    for i in range(3, 6):
        sim.add_fault("status", status=503, match_idem=None)
        assert run_cli("submit", OP, "--payload", json.dumps({"input": f"x{i}"}), "--job-id", f"j{i}").rc in (0, 4, 5)
    return ledger_path, head


def _since_after(ledger: Path, since: str, edit: Callable[[Any], None] | None = None) -> audit.Verdict:
    """What verify --since says of the ledger with `edit` applied (the guards dropped for it and put back), the edit
    rolled back after."""
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        if edit is not None:
            if _is_pg(ledger):
                conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
            else:
                for trigger in SQLITE_GUARDS:
                    conn.execute(f"DROP TRIGGER {trigger}")
            edit(conn)
            if _is_pg(ledger):
                conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
            else:
                _restore_guards(conn)
        return audit.verify(conn, since=audit.parse_head(since))
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _restore_guards(conn: sqlite3.Connection) -> None:
    restore_guards(conn)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")} >= set(SQLITE_GUARDS)


def _said(v: audit.Verdict) -> str:
    return " | ".join(p for p in (v.chain_break, v.job_mismatch, *v.problems, *v.integrity) if p)


def _first_after(conn: Any, count: int) -> int:
    """The id of the first event after event number `count`."""
    return int(conn.execute(f"SELECT id FROM events ORDER BY id LIMIT 1 OFFSET {count}").fetchone()[0])


def test_since_checks_the_appended_events_and_prints_the_new_head(
    appended: tuple[Path, str], run_cli: Callable[..., Any],
) -> None:
    ledger, head = appended
    rc, full = _head(run_cli)
    assert rc == 0 and full["ok"], full
    rc, doc = _head(run_cli, "--since", head)
    count = int(head.split(":")[0])
    assert rc == 0 and doc["ok"] and doc["since"] == head and not doc["pages_checked"], doc
    assert doc["head"] == full["head"] and doc["events"] > count, (doc, full)
    conn = _raw(ledger)
    try:
        touched = {(r[0], r[1]) for r in conn.execute("SELECT job_id, operation FROM events ORDER BY id").fetchall()[
            count:]}
    finally:
        conn.close()
    assert ("j3", OP) in touched and len(touched) > 3 and doc["jobs_checked"] == len(touched), (doc, touched)
    out = run_cli("verify", "--since", head)
    assert out.rc == 0, out
    assert (f"checked since {head}: the {doc['events'] - count} events after it and the {len(touched)} jobs"
            in out.stdout), out
    assert "pages not checked: run a full verify" in out.stdout
    assert f"head to keep: {full['head']}" in out.stdout
    # each pass recorded under its own scope, through the head it read
    verified = json.loads(run_cli("status", "--json").stdout)["verified"]
    assert verified["since"]["events"] == doc["events"] == verified["full"]["events"], verified
    assert verified["since"]["head"] == doc["head_hash"], verified
    # the head it printed is the next one's start: nothing after it, nothing to check but the tables
    rc, again = _head(run_cli, "--since", doc["head"])
    assert rc == 0 and again["ok"] and again["jobs_checked"] == 0 and again["head"] == doc["head"], (again, run_cli("verify", "--since", doc["head"]).stdout)


# (name, what --since must say, the edit)
AFTER_HEAD: list[tuple[str, str, Callable[[Any, int], None]]] = [
    ("an event after the head rewritten", "its content does not match its hash (the event was rewritten)",
     lambda c, n: c.execute(f"UPDATE events SET actor = 'mallory' WHERE id = {_first_after(c, n)}")),
    ("a new job's row edited", "its payload differ",
     lambda c, n: c.execute("UPDATE jobs SET payload = '{\"input\": \"evil\"}' WHERE job_id = 'j4'")),
    ("a touched job moved by a bare update", "j0 / article.generate: the table says",
     lambda c, n: c.execute("UPDATE jobs SET state = 'held', attempt = 1 WHERE job_id = 'j0'")),
    ("a step before the head of a touched job rewritten", "is not allowed by the event table",
     lambda c, n: c.execute("UPDATE events SET kind = 'completed', to_state = 'done' WHERE job_id = 'j0' AND seq = 1")),
    ("the quota of the day edited", "quota_usage for article.generate", lambda c, n: c.execute(
        "UPDATE quota_usage SET used = used + 7")),
    ("the new events' notifications deleted", "is gone from the outbox",
     lambda c, n: c.execute("DELETE FROM outbox")),
]


@pytest.mark.parametrize(("name", "expected", "edit"), AFTER_HEAD, ids=[a[0] for a in AFTER_HEAD])
def test_since_names_what_was_done_after_the_head(
    appended: tuple[Path, str], name: str, expected: str, edit: Callable[[Any, int], None],
) -> None:
    ledger, head = appended
    count = int(head.split(":")[0])
    assert _since_after(ledger, head).ok
    verdict = _since_after(ledger, head, lambda c: edit(c, count))
    assert not verdict.ok and expected in _said(verdict), (name, _said(verdict))


def test_since_names_the_triggers_left_off(appended: tuple[Path, str]) -> None:
    ledger, head = appended
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        conn.execute("ALTER TABLE evidence DISABLE TRIGGER USER" if _is_pg(ledger)
                     else "DROP TRIGGER evidence_no_delete")
        said = _said(audit.verify(conn, since=audit.parse_head(head)))
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert "triggers missing or disabled: evidence_no_" in said, said


def test_since_does_not_read_the_rows_of_jobs_no_new_event_touched(appended: tuple[Path, str]) -> None:
    """What --since leaves to the full verify: a job row edited with no event after the head (j2: held before it)."""
    ledger, head = appended
    verdict = _since_after(ledger, head, lambda c: c.execute("UPDATE jobs SET owner = 'mallory' WHERE job_id = 'j2'"))
    assert verdict.ok, _said(verdict)
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        conn.execute("UPDATE jobs SET owner = 'mallory' WHERE job_id = 'j2'")
        assert "job j2 / article.generate: its owner differ" in _said(audit.verify(conn))
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_since_names_a_chain_rewritten_up_to_the_head(appended: tuple[Path, str], run_cli: Callable[..., Any]) -> None:
    ledger, head = appended
    count, digest = audit.parse_head(head)
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    out = run_cli("verify", "--since", f"{count}:{other}")
    assert out.rc == 11, out
    assert (f"is event number {count}, but its hash differs from the head --since names: the chain was rewritten"
            in out.stdout), out

    def rehash(conn: Any) -> None:  # an event before the head rewritten, and every hash after it recomputed
        prev = None
        for row in conn.execute("SELECT id, at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, "
                                "detail, seal FROM events ORDER BY id").fetchall():
            actor = "carol" if row[0] == 2 else row[5]
            digest = audit.event_hash(prev, row[1], row[2], row[3], row[4], actor, *row[6:11], row[11])
            conn.execute("UPDATE events SET actor = ?, prev_hash = ?, hash = ? WHERE id = ?", (actor, prev, digest,
                                                                                                 row[0]))
            prev = digest

    verdict = _since_after(ledger, head, rehash)
    assert verdict.chain_break is not None and "the chain was rewritten" in verdict.chain_break, _said(verdict)
    assert verdict.since == head and not verdict.pages_checked


@pytest.mark.parametrize("given", ["12:nothex", "abc", "-1:" + "0" * 64, "0:" + "0" * 64, "99999:" + "a" * 64])
def test_a_bad_since_is_refused_and_changes_nothing(
    appended: tuple[Path, str], run_cli: Callable[..., Any], fingerprint: Callable[[Path], str], given: str,
) -> None:
    ledger, _ = appended
    before = fingerprint(ledger)
    out = run_cli("verify", "--since", given)
    assert out.rc == 2 and "--since" in out.stderr, out
    assert ("COUNT:HASH" in out.stderr) or ("names event number" in out.stderr), out
    assert out.stdout == "", out
    assert fingerprint(ledger) == before
    with pytest.raises((ValueError, audit.HeadNotInLedger)):
        conn = connect(ledger)
        try:
            audit.verify(conn, since=audit.parse_head(given))
        finally:
            conn.close()


def test_a_verdict_lists_the_first_failing_events_and_counts_the_rest(
    appended: tuple[Path, str], run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, _ = appended
    monkeypatch.setattr(audit, "FAILING_LIMIT", 2)
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        victims = [r[0] for r in conn.execute("SELECT id FROM events WHERE kind = 'reserve' ORDER BY id").fetchall()]
        assert len(victims) == 6
        if _is_pg(ledger):
            conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        else:
            for trigger in SQLITE_GUARDS:
                conn.execute(f"DROP TRIGGER {trigger}")
        for victim in victims:
            conn.execute(f"UPDATE events SET actor = 'carol' WHERE id = {victim}")
        verdict = audit.verify(conn)
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    # the first rewritten event is the chain break; 5 more are failing: 2 listed, 3 counted
    assert verdict.chain_break is not None and f"event {victims[0]} " in verdict.chain_break
    listed = [p for p in verdict.problems if "its content does not match its hash" in p]
    assert [p.split(" ")[1] for p in listed] == [str(victims[1]), str(victims[2])], verdict.problems
    assert verdict.unlisted == 3 and verdict.to_dict()["unlisted"] == 3


def test_the_cli_says_how_many_failing_events_it_did_not_list(
    appended: tuple[Path, str], run_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger, _ = appended
    monkeypatch.setattr(audit, "FAILING_LIMIT", 1)
    conn = _raw(ledger)
    try:
        guards = (("DROP TRIGGER events_no_change ON events", "DROP TRIGGER events_chain ON events") if _is_pg(ledger)
                  else tuple(f"DROP TRIGGER {t}" for t in SQLITE_GUARDS))
        for stmt in guards:
            conn.execute(stmt)
        conn.execute("UPDATE events SET actor = 'carol' WHERE kind = 'reserve'")
    finally:
        conn.close()
    out = run_cli("verify")
    assert out.rc == 11, out
    assert out.stdout.count("its content does not match its hash") == 2, out.stdout  # the break, and one listed
    assert "BROKEN: 4 more failing events, not listed" in out.stdout, out.stdout


# The merge of the events (by job, then seq) with the job rows (by job), without a database.

def _ev(event_id: int, job: str, seq: int = 1, kind: str = "reserve") -> tuple[Any, ...]:
    return (event_id, job, OP, seq, kind, None, "reserving", 0, None)


def _row(job: str) -> tuple[Any, ...]:
    return (job, OP, "reserving", 0, 1)


def test_the_merge_pairs_each_job_with_its_events_and_its_row() -> None:
    events = [_ev(1, "a"), _ev(5, "a", 2, "send_started"), _ev(2, "b"), _ev(3, "d"), _ev(4, "e")]
    rows = [_row("a"), _row("c"), _row("d"), _row("f")]
    merged = list(audit.by_job(events, rows))
    assert [(key[0], [e[0] for e in group], row[0] if row else None) for key, group, row in merged] == [
        ("a", [1, 5], "a"),  # events and a row
        ("b", [2], None),  # events without a row
        ("c", [], "c"),  # a row without events
        ("d", [3], "d"),
        ("e", [4], None),
        ("f", [], "f"),  # the last job: a row after every event
    ]


def test_the_merge_handles_empty_sides_and_a_last_job_with_only_events() -> None:
    assert list(audit.by_job([], [])) == []
    assert [(k[0], r) for k, _, r in audit.by_job([], [_row("a")])] == [("a", _row("a"))]
    assert [(k[0], [e[0] for e in g], r) for k, g, r in audit.by_job([_ev(1, "a"), _ev(2, "z")], [_row("a")])] == [
        ("a", [1], _row("a")), ("z", [2], None)]
    # the same job id under two operations: two jobs
    other = ("a", "other.op", "reserving", 0, 1)
    assert [k for k, _, _ in audit.by_job([_ev(1, "a")], [_row("a"), other])] == [("a", OP), ("a", "other.op")]


def test_the_merge_orders_by_code_point_as_the_store_reads() -> None:
    """Upper case before lower, and a longer id after its prefix: Python's order of str, as TEXT_ORDER reads."""
    events = [_ev(1, "B"), _ev(2, "a"), _ev(3, "a-1"), _ev(4, "é")]
    rows = [_row("B"), _row("a-1"), _row("é")]
    assert [(k[0], r is not None) for k, _, r in audit.by_job(events, rows)] == [
        ("B", True), ("a", False), ("a-1", True), ("é", True)]


def test_the_ledger_reads_jobs_and_events_in_the_merge_order(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    """Job ids whose order differs between a collation and code points are read in code point order on each
    backend, so every row meets its events."""
    for job_id in ("b", "B", "a-1", "a", "é", "A_2"):
        assert run_cli("submit", OP, "--payload", json.dumps({"input": job_id}), "--job-id", job_id).rc == 0
    conn = connect(ledger_path)
    try:
        from ledger.store import verify as verify_store

        with verify_store.snapshot(conn):
            keys = [k for k, group, row in audit.by_job(verify_store.job_events(conn), verify_store.jobs_checked(conn))
                    if group and row is not None]
        assert [k[0] for k in keys] == sorted(["b", "B", "a-1", "a", "é", "A_2"])
        assert audit.verify(conn).ok
    finally:
        conn.close()


def test_since_checks_signatures_under_a_policy_recorded_before_the_head(
    ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path, owner_signer: Any,
) -> None:
    """The policy that makes signatures count was recorded before the head: --since folds it, so an unsigned
    event after the head is named, as the full verify names it."""
    from ledger import policy
    from ledger.clock import SystemClock
    from ledger.config import parse_config
    from ledger.db import write_tx
    from ledger.reservation import reserve

    me = owner_signer.account
    doc = make_config(operators={me: ["sender", "triage", "approver"]})
    doc["identity"] = {"source": "os"}
    doc["public_keys"] = {me: owner_signer.public}
    cfg = parse_config(doc, base_dir=tmp_path)
    conn = connect(ledger_path)
    try:
        with write_tx(conn):
            assert policy.record(conn, cfg, actor=me, now=SystemClock().now(), how="test")
        reserve(conn, cfg, OP, {"input": "signed"}, clock=SystemClock(), job_id="s1", actor=me)
        before = audit.verify(conn)
        assert before.ok, _said(before)
        head = before.head
    finally:
        conn.close()

    def unsigned(c: Any) -> None:  # an event after the head that chains, written without any key
        prev, seq = c.execute("SELECT (SELECT hash FROM events ORDER BY id DESC LIMIT 1), "
                              "(SELECT MAX(seq) + 1 FROM events WHERE job_id = 's1')").fetchone()
        row = (1.0e9, "s1", OP, seq, me, "remote_query", None, None, None, "{}")
        c.execute("INSERT INTO events (at, job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail, "
                  "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  (*row, prev, audit.event_hash(prev, *row)))

    since = _since_after(ledger_path, head, unsigned)
    said = _said(since)
    assert not since.ok and f"(s1 / {OP} seq 2, remote_query by {me}): is not signed" in said, said
    # the same lines as the full verify's (an event's id aside: PostgreSQL does not reuse one rolled back)
    whole = {p.partition(" ")[2].partition(" ")[2] for p in _said_full(ledger_path, unsigned).split(" | ")}
    named = {p.partition(" ")[2].partition(" ")[2] for p in since.problems if p.startswith("event ")}
    assert len(named) == 3 and named <= whole, (named - whole, whole)


def _said_full(ledger: Path, edit: Callable[[Any], None]) -> str:
    """What the full verify says with `edit` applied (rolled back after)."""
    conn = _raw(ledger)
    try:
        conn.execute("BEGIN")
        edit(conn)
        return _said(audit.verify(conn))
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def test_since_recounts_a_quota_day_from_before_its_first_instant_in_any_time_zone() -> None:
    midnight = 1_796_601_600.0  # 2026-12-07T00:00:00Z
    assert audit._recount_from([(OP, "2026-12-07"), (OP, "2026-12-08")], midnight + 50_000) == midnight - 15 * 3600
    # a day that is not a date (an edited detail): three days before the earliest event counted after the head
    assert audit._recount_from([(OP, "someday")], midnight) == midnight - 3 * 86400
