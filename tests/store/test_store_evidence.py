"""ledger.store.evidence on both backends: what each operation returns on an empty ledger, after writes (read back on
a fresh connection), its order and limit, and what it refuses. The tables: evidence, evidence_handled,
webhook_deliveries, webhook_refusals, foreign_interactions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ledger_reads import QmarkSql, fresh

from ledger import seal
from ledger.db import write_tx
from ledger.errors import LedgerConflict
from ledger.model import Evidence, Job, JobKey, idem_key
from ledger.signing import Proof, signer_of
from ledger.store import Connection
from ledger.store import evidence as ev_store

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
OP = "article.generate"
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z
KEY = JobKey("j1", OP)
IDEM = idem_key("j1", OP)


def _job(attempt: int = 1) -> Job:
    """A Job as for_job reads it: only its idem key and attempt matter there."""
    return Job(job_id=KEY.job_id, operation=OP, idem_key=IDEM, target=None, payload={}, state="held",
               attempt=attempt, epoch=1, lease_owner=None, lease_until=None, handle=None, quota_day="2026-12-01",
               created_at=T, updated_at=T, next_try_at=None, send_started_at=None, tries=0, last_error=None,
               held_reason=None, held_at=None, owner=None, due_at=None, result=None, result_at=None)


def _record(conn: Connection, **kw: Any) -> int:
    """One piece of evidence in its own write transaction; the defaults: webhook evidence for j1, attempt 1."""
    args: dict[str, Any] = {"at": T, "source": "webhook", "idem_key": IDEM, "attempt": 1, "handle": "h1",
                            "remote_state": "completed", "job": KEY, "ref": None, "detail": {"remote": "gemini"}}
    args.update(kw)
    with write_tx(conn):
        return ev_store.record(conn, **args)


def _orphan(conn: Connection, handle: str, at: float = T, **kw: Any) -> int:
    return _record(conn, at=at, idem_key="", attempt=None, handle=handle, job=None, **kw)


def _handled(conn: Connection, evidence_id: int, outcome: str, record: dict[str, Any] | None = None) -> None:
    with write_tx(conn):
        ev_store.mark_handled(conn, evidence_id, outcome, T + 1, record)


def test_an_empty_ledger_holds_no_evidence(conn: Connection) -> None:
    assert ev_store.latest_id(conn) == 0
    assert ev_store.get(conn, 1) is None
    assert ev_store.for_job(conn, _job()) == [] and ev_store.for_job(conn, _job(), attempt=1) == []
    assert ev_store.for_handle(conn, "h1") == [] and ev_store.for_handle(conn, "h1", source="webhook") == []
    assert list(ev_store.unhandled(conn)) == []
    assert ev_store.unattributed(conn) == [] and ev_store.unattributed(conn, newest=True) == []
    assert ev_store.orphans(conn) == []
    assert ev_store.orphans_since(conn, 0.0) == []
    assert ev_store.delivery(conn, "wh-1") is None
    assert ev_store.refusal_counts(conn) == {}
    assert ev_store.foreign_oldest_seen(conn) is None
    assert ev_store.foreign_tally(conn) == ev_store.ForeignTally(0, 0, None)
    assert ev_store.count_foreign_delivery(conn, "i-1", T) is False
    assert ev_store.prune_foreign(conn, T) == 0


def test_recorded_evidence_reads_back_chained_in_order(conn: Connection, ledger_path: Path) -> None:
    first = _record(conn, detail={"remote": "gemini", "type": "interaction.completed", "ü": [1, 2]}, ref="wh-1")
    second = _record(conn, at=T + 5, source="query", attempt=2, handle="h2", remote_state="running")
    third = _record(conn, at=T + 9, source="fenced_outcome", handle="h1", remote_state="running")
    assert first < second < third
    with fresh(ledger_path) as c:
        assert ev_store.latest_id(c) == third
        got = ev_store.get(c, first)
        assert got == Evidence(id=first, at=T, source="webhook", idem_key=IDEM, attempt=1, handle="h1",
                               remote_state="completed", job=KEY, ref="wh-1",
                               detail={"remote": "gemini", "type": "interaction.completed", "ü": [1, 2]})
        assert [e.id for e in ev_store.for_job(c, _job())] == [first, second, third]
        assert [e.id for e in ev_store.for_job(c, _job(), attempt=1)] == [first, third]
        assert [e.id for e in ev_store.for_job(c, _job(), attempt=2)] == [second]
        assert [e.id for e in ev_store.for_handle(c, "h1")] == [first, third]
        assert [e.id for e in ev_store.for_handle(c, "h1", source="fenced_outcome")] == [third]
        assert ev_store.for_handle(c, "h3") == []
        chain = c.execute("SELECT prev_hash, hash FROM evidence ORDER BY id").fetchall()
    assert chain[0][0] is None and chain[1][0] == chain[0][1] and chain[2][0] == chain[1][1]
    assert all(len(h) == 64 for _, h in chain)
    values = [T, "webhook", IDEM, 1, "h1", "completed", KEY.job_id, OP, "wh-1",
              '{"remote": "gemini", "type": "interaction.completed", "ü": [1, 2]}']
    assert chain[0][1] == seal.side_hash(None, values)


def test_a_write_is_part_of_the_callers_transaction(conn: Connection, ledger_path: Path) -> None:
    with pytest.raises(RuntimeError), write_tx(conn):
        ev_store.record(conn, at=T, source="webhook", idem_key=IDEM, attempt=1, handle="h1", remote_state="completed",
                        job=KEY)
        ev_store.count_refusal(conn, "unsigned")
        ev_store.record_delivery(conn, webhook_id="wh-1", received_at=T, signature="s", kind="t", evidence_id=None)
        ev_store.register_foreign(conn, interaction_id="i-1", remote="gemini", labels="{}", evidence_id=None,
                                  seen_at=T)
        raise RuntimeError("the caller fails")
    with fresh(ledger_path) as c:
        assert ev_store.latest_id(c) == 0 and ev_store.refusal_counts(c) == {}
        assert ev_store.delivery(c, "wh-1") is None and ev_store.foreign_tally(c).interactions == 0


def test_unhandled_lists_webhook_evidence_for_a_job_oldest_first_until_handled(
    conn: Connection, ledger_path: Path,
) -> None:
    a = _record(conn)
    _record(conn, source="query")  # not a webhook
    _orphan(conn, "h-orphan")  # names no job
    b = _record(conn, handle="h2")
    c_ = _record(conn, handle="h3")
    assert [e.id for e in ev_store.unhandled(conn)] == [a, b, c_]
    assert [e.id for e in ev_store.unhandled(conn, limit=2)] == [a, b]
    _handled(conn, b, "polled: completed")
    _handled(conn, b, "a second outcome is ignored")
    with fresh(ledger_path) as c:
        assert [e.id for e in ev_store.unhandled(c)] == [a, c_]
        outcome = QmarkSql(c).execute("SELECT outcome, record FROM evidence_handled WHERE evidence_id = ?", (b,)).fetchone()
    assert tuple(outcome) == ("polled: completed", None)


def test_unattributed_lists_unhandled_webhook_orphans_oldest_or_newest(conn: Connection, ledger_path: Path) -> None:
    ids = [_orphan(conn, f"i-{n}", at=T + n) for n in range(4)]
    _orphan(conn, "i-query", source="query")  # not a webhook
    _record(conn)  # names a job
    _handled(conn, ids[1], "orphan: the remote no longer knows i-1", {})
    with fresh(ledger_path) as c:
        assert [e.id for e in ev_store.unattributed(c)] == [ids[0], ids[2], ids[3]]
        assert [e.id for e in ev_store.unattributed(c, limit=2)] == [ids[0], ids[2]]
        assert [e.id for e in ev_store.unattributed(c, newest=True)] == [ids[3], ids[2], ids[0]]
        assert [e.id for e in ev_store.unattributed(c, limit=1, newest=True)] == [ids[3]]
        assert all(e.job is None and e.outcome is None for e in ev_store.unattributed(c))


def test_orphans_leave_out_attributed_and_foreign_newest_first(conn: Connection, ledger_path: Path) -> None:
    waiting = _orphan(conn, "i-waiting")
    attributed = _orphan(conn, "i-attributed")
    foreign = _orphan(conn, "i-foreign")
    unread = _orphan(conn, "i-unread")
    _record(conn)  # names a job: never an orphan
    _handled(conn, attributed, "attributed to j1 / article.generate (evidence 9, by labels)")
    _handled(conn, foreign, "foreign: its labels name no idem key")
    _handled(conn, unread, "orphan: the remote no longer knows i-unread", {})
    with fresh(ledger_path) as c:
        found = ev_store.orphans(c)
        assert [(e.id, e.outcome) for e in found] == [
            (unread, "orphan: the remote no longer knows i-unread"), (waiting, None)]
        assert [e.id for e in ev_store.orphans(c, limit=1)] == [unread]


def test_orphans_since_keep_what_the_pass_read_of_the_record(conn: Connection, ledger_path: Path) -> None:
    before = _orphan(conn, "i-before", at=T - 10)
    unread = _orphan(conn, "i-unread", at=T)
    labelless = _orphan(conn, "i-labelless", at=T + 1)
    gone_old = _orphan(conn, "i-gone", at=T + 2)  # an older ledger kept only the outcome, no record
    foreign = _orphan(conn, "i-foreign", at=T + 3)
    queried = _orphan(conn, "i-query", at=T + 4, source="query")
    _handled(conn, labelless, ev_store.UNOWNED_OUTCOMES[0] + " (its labels were not echoed)",
             {"created": T - 30, "model": "gemini-sim"})
    _handled(conn, gone_old, ev_store.UNOWNED_OUTCOMES[1] + " i-gone")
    _handled(conn, foreign, "foreign: idem key x is not in this ledger")
    with fresh(ledger_path) as c:
        found = ev_store.orphans_since(c, T)
        assert [(u.evidence.id, u.created, u.model) for u in found] == [
            (unread, None, None), (labelless, T - 30, "gemini-sim"), (gone_old, None, None)]
        assert found[1].evidence.outcome is not None and found[0].evidence.outcome is None
        assert [u.evidence.id for u in ev_store.orphans_since(c, T, limit=1)] == [unread]
        assert before in [u.evidence.id for u in ev_store.orphans_since(c, 0.0)]
        assert queried not in [u.evidence.id for u in ev_store.orphans_since(c, 0.0)]


def test_orphans_since_ignore_a_record_that_is_not_a_time_or_a_model(conn: Connection, ledger_path: Path) -> None:
    odd = _orphan(conn, "i-odd")
    _handled(conn, odd, ev_store.UNOWNED_OUTCOMES[0], {"created": True, "model": ""})
    with fresh(ledger_path) as c:
        [u] = ev_store.orphans_since(c, 0.0)
    assert (u.evidence.id, u.created, u.model) == (odd, None, None)


def test_a_delivery_is_recorded_once(conn: Connection, ledger_path: Path) -> None:
    evidence_id = _record(conn)
    with write_tx(conn):
        ev_store.record_delivery(conn, webhook_id="wh-1", received_at=T, signature="v1,abc", kind="interaction.done",
                                 evidence_id=evidence_id)
        ev_store.record_delivery(conn, webhook_id="wh-2", received_at=T, signature="v1,def", kind="other",
                                 evidence_id=None)
    with pytest.raises(LedgerConflict), write_tx(conn):
        ev_store.record_delivery(conn, webhook_id="wh-1", received_at=T + 1, signature="v1,zzz", kind="x",
                                 evidence_id=None)
    with fresh(ledger_path) as c:
        assert (got := ev_store.delivery(c, "wh-1")) is not None and got.signature == "v1,abc"
        assert (got := ev_store.delivery(c, "wh-2")) is not None and got.signature == "v1,def"
        assert ev_store.delivery(c, "wh-3") is None
        rows = c.execute("SELECT webhook_id, evidence_id FROM webhook_deliveries ORDER BY webhook_id").fetchall()
    assert [tuple(r) for r in rows] == [("wh-1", evidence_id), ("wh-2", None)]


def test_a_delivery_carries_its_receivers_signature_over_its_content(
    conn: Connection, ledger_path: Path, owner_signer: Any,
) -> None:
    with write_tx(conn):
        ev_store.record_delivery(conn, webhook_id="wh-s", received_at=T + 0.25, signature="v1,abc", kind="x",
                                 evidence_id=None)
    with fresh(ledger_path) as c:
        got = ev_store.delivery(c, "wh-s")
    assert got is not None and got.proof is not None
    keys = {owner_signer.account: owner_signer.public}
    assert signer_of(Proof.parse(got.proof), got.digest, keys) == owner_signer.account
    # The same proof over a row that says otherwise (another time) does not verify.
    moved = ev_store.delivery_digest(got.webhook_id, got.received_at + 1, got.signature, got.type, got.evidence_id)
    assert signer_of(Proof.parse(got.proof), moved, keys) is None


def test_refusals_are_counted_by_reason(conn: Connection, ledger_path: Path) -> None:
    with write_tx(conn):
        ev_store.count_refusal(conn, "unsigned")
        ev_store.count_refusal(conn, "malformed", 3)
    with write_tx(conn):
        ev_store.count_refusal(conn, "unsigned", 2)
    with fresh(ledger_path) as c:
        counts = ev_store.refusal_counts(c)
    assert counts == {"malformed": 3, "unsigned": 3} and list(counts) == ["malformed", "unsigned"]


def test_the_foreign_register_counts_prunes_and_tallies(conn: Connection, ledger_path: Path) -> None:
    first = _orphan(conn, "i-1")
    with write_tx(conn):
        ev_store.register_foreign(conn, interaction_id="i-1", remote="gemini", labels='{"app": "other"}',
                                  evidence_id=first, seen_at=T)
        ev_store.register_foreign(conn, interaction_id="i-2", remote="gemini", labels="{}", evidence_id=None,
                                  seen_at=T + 10)
    with write_tx(conn):
        ev_store.register_foreign(conn, interaction_id="i-1", remote="gemini", labels="{}", evidence_id=None,
                                  seen_at=T + 20)
        assert ev_store.count_foreign_delivery(conn, "i-2", T + 30) is True
        assert ev_store.count_foreign_delivery(conn, "i-3", T + 30) is False
    with fresh(ledger_path) as c:
        assert ev_store.foreign_tally(c) == ev_store.ForeignTally(interactions=2, deliveries=4, last_seen=T + 30)
        assert ev_store.foreign_oldest_seen(c) == T + 20
        row = QmarkSql(c).execute("SELECT first_seen, labels, evidence_id FROM foreign_interactions WHERE interaction_id = ?",
                        ("i-1",)).fetchone()
    assert tuple(row) == (T, '{"app": "other"}', first)  # the first delivery's labels and evidence stay
    with write_tx(conn):
        assert ev_store.prune_foreign(conn, T + 20) == 0  # last seen at T + 20: not before it
        assert ev_store.prune_foreign(conn, T + 25) == 1
    with fresh(ledger_path) as c:
        assert ev_store.foreign_tally(c) == ev_store.ForeignTally(1, 2, T + 30)
        assert ev_store.count_foreign_delivery(c, "i-1", T + 40) is False  # forgotten: a delivery starts over
        assert ev_store.get(c, first) is not None  # the evidence chain keeps its row


def test_foreign_tally_to_dict() -> None:
    assert ev_store.ForeignTally(1, 2, None).to_dict() == {"interactions": 1, "deliveries": 2, "last_seen": None}


def test_evidence_and_deliveries_refuse_change(conn: Connection, ledger_path: Path) -> None:
    evidence_id = _record(conn)
    with write_tx(conn):
        ev_store.record_delivery(conn, webhook_id="wh", received_at=T, signature="s", kind="t", evidence_id=None)
    with pytest.raises(LedgerConflict), write_tx(conn):
        QmarkSql(conn).execute("UPDATE evidence SET remote_state = 'failed' WHERE id = ?", (evidence_id,))
    with pytest.raises(LedgerConflict), write_tx(conn):
        conn.execute("DELETE FROM webhook_deliveries")
    with fresh(ledger_path) as c:
        assert ev_store.get(c, evidence_id) is not None and (got := ev_store.delivery(c, "wh")) is not None and got.signature == "s"
