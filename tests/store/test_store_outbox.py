"""ledger.store.outbox on both backends: notifications queued, moved between states, listed, the due and the claimed
ones read, on an empty ledger and after writes read back on a fresh connection, in order and within limits; a
second queueing of one event id, a move from a state not allowed and a column that cannot be set are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ledger_reads import fresh

from ledger.db import write_tx
from ledger.errors import LedgerConflict
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import outbox as outbox_store
from ledger.store.outbox import OutboxRow

BACKENDS = ("sqlite", "postgresql")  # each test runs on each (tests/conftest.py)
T = 1_796_126_400.0  # 2026-12-01T12:00:00Z
OP = "article.generate"


def _queue(conn: Connection, event_id: str, now: float, channel: str = "ops") -> None:
    with write_tx(conn):
        outbox_store.insert(conn, event_id=event_id, channel=channel, key=JobKey("j1", OP), kind="held",
                            body=json.dumps({"event_id": event_id}), now=now)


def test_an_empty_outbox(conn: Connection) -> None:
    assert outbox_store.listed(conn, 100) == []
    assert outbox_store.due(conn, T, 100) == []
    assert outbox_store.sending(conn) == []
    assert outbox_store.get(conn, "evt-1-ops") is None
    with write_tx(conn):
        assert outbox_store.move(conn, "evt-1-ops", to_state="sending", from_states=["pending"], now=T) is None


def test_a_queued_notification_reads_back_pending_and_due(conn: Connection, ledger_path: Path) -> None:
    _queue(conn, "evt-1-ops", T)
    expected = OutboxRow(event_id="evt-1-ops", channel="ops", job_id="j1", operation=OP, kind="held",
                         body='{"event_id": "evt-1-ops"}', state="pending", created_at=T, updated_at=T, next_try_at=T,
                         tries=0, last_error=None)
    with fresh(ledger_path) as c:
        assert outbox_store.get(c, "evt-1-ops") == expected
        assert expected.key == JobKey("j1", OP)
        assert outbox_store.listed(c, 100) == [expected]
        assert outbox_store.due(c, T, 100) == [("evt-1-ops", "ops", '{"event_id": "evt-1-ops"}')]
        assert outbox_store.due(c, T - 1, 100) == []  # not due before its next try
        assert outbox_store.sending(c) == []


def test_a_move_claims_counts_a_try_and_sets_its_fields(conn: Connection, ledger_path: Path) -> None:
    _queue(conn, "evt-1-ops", T)
    with write_tx(conn):
        claimed = outbox_store.move(conn, "evt-1-ops", to_state="sending", from_states=["pending"], now=T + 1,
                                    count_try=True)
    assert claimed is not None and (claimed.state, claimed.tries, claimed.updated_at) == ("sending", 1, T + 1)
    with fresh(ledger_path) as c:
        assert outbox_store.sending(c) == [("evt-1-ops", "ops", T + 1)]
        assert outbox_store.due(c, T + 100, 100) == []
    with write_tx(conn):
        assert outbox_store.move(conn, "evt-1-ops", to_state="sending", from_states=["pending"], now=T + 2) is None
        back = outbox_store.move(conn, "evt-1-ops", to_state="pending", from_states=["sending"], now=T + 3,
                                 fields={"last_error": "HTTP 429", "next_try_at": T + 60})
    assert back is not None and (back.state, back.tries, back.last_error, back.next_try_at) == (
        "pending", 1, "HTTP 429", T + 60)
    with write_tx(conn):
        outbox_store.move(conn, "evt-1-ops", to_state="sent", from_states=["pending"], now=T + 4,
                          fields={"last_error": None})
    with fresh(ledger_path) as c:
        row = outbox_store.get(c, "evt-1-ops")
        assert row is not None and (row.state, row.last_error, row.tries) == ("sent", None, 1)


def test_listed_puts_uncertain_first_then_sending_then_pending_newest_first(
    conn: Connection, ledger_path: Path,
) -> None:
    for n, event_id in enumerate(("a", "b", "c", "d", "e", "f")):
        _queue(conn, event_id, T + n)
    with write_tx(conn):
        outbox_store.move(conn, "a", to_state="sent", from_states=["pending"], now=T + 10)
        outbox_store.move(conn, "b", to_state="uncertain", from_states=["pending"], now=T + 10)
        outbox_store.move(conn, "c", to_state="sending", from_states=["pending"], now=T + 10)
        outbox_store.move(conn, "d", to_state="uncertain", from_states=["pending"], now=T + 10)
    with fresh(ledger_path) as c:
        assert [r.event_id for r in outbox_store.listed(c, 100)] == ["d", "b", "c", "f", "e", "a"]
        assert [r.event_id for r in outbox_store.listed(c, 2)] == ["d", "b"]
        assert [e for e, _, _ in outbox_store.due(c, T + 100, 100)] == ["e", "f"]  # oldest first
        assert [e for e, _, _ in outbox_store.due(c, T + 100, 1)] == ["e"]
        assert sorted(e for e, _, _ in outbox_store.sending(c)) == ["c"]


def test_refusals(conn: Connection, ledger_path: Path) -> None:
    _queue(conn, "evt-1-ops", T)
    with pytest.raises(LedgerConflict):
        _queue(conn, "evt-1-ops", T + 1)
    with pytest.raises(ValueError, match="cannot set outbox columns"), write_tx(conn):
        outbox_store.move(conn, "evt-1-ops", to_state="sent", from_states=["pending"], now=T, fields={"state": "x"})
    with pytest.raises(ValueError, match="the states it may start from"), write_tx(conn):
        outbox_store.move(conn, "evt-1-ops", to_state="sent", from_states=[], now=T)
    with fresh(ledger_path) as c:
        row = outbox_store.get(c, "evt-1-ops")
        assert row is not None and (row.state, row.created_at) == ("pending", T)


def test_a_queueing_is_part_of_the_callers_transaction(conn: Connection, ledger_path: Path) -> None:
    with pytest.raises(RuntimeError), write_tx(conn):
        outbox_store.insert(conn, event_id="evt-1-ops", channel="ops", key=JobKey("j1", OP), kind="held", body="{}",
                            now=T)
        raise RuntimeError("the caller fails")
    with fresh(ledger_path) as c:
        assert outbox_store.listed(c, 100) == []
