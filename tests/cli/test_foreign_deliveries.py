"""Another application's interactions, delivered by the project's webhook: registered foreign once, counted,
never an orphan or a held job's candidate, forgotten after the configured retention; a flood of them costs one
GET each at most and does not keep a fresh delivery of reclaim's own waiting.

The project webhook delivers every interaction of the project. Here the other application's interactions are
created at the simulator directly (labels that are not reclaim's), their deliveries built and signed in the
documented envelope and POSTed to the receiver's server; GETs are counted at the simulator and the ledger is read
back from a fresh connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
import test_documented_webhooks as documented
from gemini_deliveries import delivery
from test_documented_webhooks import ENV, SECRET, Receiver, _held_lost_reply

from ledger import candidates
from ledger.clock import ManualClock
from ledger.db import connect
from ledger.model import Evidence
from ledger.simulator import DEFAULT_API_KEY, Simulator
from ledger.store import evidence as evidence_store
from ledger.worker import evidence as worker_evidence

rx = documented.rx  # the receiver fixtures of the documented-webhooks tests
start_receiver = documented.start_receiver


def _create_elsewhere(sim: Simulator, labels: dict[str, str]) -> str:
    """An interaction another application of the project creates (not through reclaim); its id."""
    reply = httpx2.post(f"{sim.url}/v1/interactions", headers={"x-goog-api-key": DEFAULT_API_KEY}, timeout=10,
                        json={"model": "gemini-other", "input": "their work", "background": True, "labels": labels})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["id"])


def _tally(rx: Receiver) -> evidence_store.ForeignTally:
    conn = connect(rx.ledger, readonly=True)
    try:
        return evidence_store.foreign_tally(conn)
    finally:
        conn.close()


def _orphans(rx: Receiver) -> list[Evidence]:
    conn = connect(rx.ledger, readonly=True)
    try:
        return evidence_store.orphans(conn)
    finally:
        conn.close()


@pytest.mark.parametrize("labels", [{"app": "billing"}, {"idem": "probe-0123abcd", "attempt": "1"}],
                         ids=["no-idem", "another-ledgers-idem"])
def test_another_applications_interaction_is_registered_foreign_once_and_later_deliveries_are_only_counted(
    sim: Simulator, rx: Receiver, run_cli: Callable[..., Any], labels: dict[str, str],
) -> None:
    job, _ = _held_lost_reply(sim, rx, "ours")  # a held job with no handle: an orphan could be its candidate
    theirs = _create_elsewhere(sim, labels)
    assert rx.post(*delivery(theirs, SECRET, "interaction.requires_action")) == 202
    report = rx.tick()
    assert report.foreign == 1 and report.evidence_attributed == 0
    gets = sim.count("get")
    assert gets == 1  # one GET for it
    assert _orphans(rx) == []  # never an orphan, never alarming
    conn = connect(rx.ledger, readonly=True)
    try:
        held = rx.job("ours")[0]
        assert candidates.candidates(conn, rx.cfg, held) == []  # nor a held job's candidate
        evidence_rows = conn.execute("SELECT COUNT(*) FROM evidence").fetchone()[0]
    finally:
        conn.close()
    # Its next event (and a redelivery of it) are only counted: no evidence, no GET, nothing for a pass.
    assert rx.post(*delivery(theirs, SECRET, "interaction.completed")) == 200
    assert rx.post(*delivery(theirs, SECRET, "interaction.completed")) == 200
    assert rx.rows()[2] == evidence_rows
    again = rx.tick()
    assert again.foreign == 0 and sim.count("get") == gets
    assert (_tally(rx).interactions, _tally(rx).deliveries) == (1, 3)
    status = run_cli("status", "--json", env=ENV)
    assert status.rc == 0, status.stderr
    counted = json.loads(status.stdout)["foreign_deliveries"]
    assert (counted["interactions"], counted["deliveries"], counted["retention_days"]) == (1, 3, 7)
    words = run_cli("status", env=ENV)
    assert "foreign deliveries (other applications' interactions in the project, not alarming): 3 for 1" in words.stdout
    held, events = rx.job("ours")
    assert held.state == "held" and sim.count("create", job.idem_key) == 1
    assert not {"reconcile", "release", "duplicate_send"} & {e.kind for e in events}


def test_a_foreign_interaction_is_forgotten_after_the_retention_and_a_later_delivery_starts_over(
    sim: Simulator, rx: Receiver,
) -> None:
    theirs = _create_elsewhere(sim, {"app": "billing"})
    assert rx.post(*delivery(theirs, SECRET)) == 202
    assert rx.tick().foreign == 1
    seen = _tally(rx).last_seen
    assert seen is not None
    rx.tick(ManualClock(seen + 6.9 * 86_400))  # within the 7 days: kept
    assert _tally(rx).interactions == 1
    rx.tick(ManualClock(seen + 7.1 * 86_400))  # past them: forgotten (the evidence chain keeps its first row)
    assert _tally(rx).interactions == 0
    assert rx.post(*delivery(theirs, SECRET, "interaction.cancelled")) == 202  # recorded again, GET again
    assert rx.tick().foreign == 1 and sim.count("get") == 2


def test_labels_not_echoed_is_never_called_foreign(sim: Simulator, rx: Receiver) -> None:
    sim.configure(echo_labels=False)  # the record cannot say whose it is: it may be reclaim's own
    theirs = _create_elsewhere(sim, {"app": "billing"})
    assert rx.post(*delivery(theirs, SECRET)) == 202
    assert rx.tick().foreign == 0
    [orphan] = _orphans(rx)
    assert orphan.handle == theirs and "labels were not echoed" in (orphan.outcome or "")
    assert _tally(rx).interactions == 0


def test_a_flood_of_foreign_deliveries_costs_one_get_each_and_a_fresh_one_of_ours_is_attributed_in_the_next_pass(
    sim: Simulator, rx: Receiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_evidence, "ATTRIBUTION_BATCH", 10)  # a pass takes the 5 oldest and the 5 newest
    job, ours = _held_lost_reply(sim, rx, "ours")
    flood = [_create_elsewhere(sim, {"app": f"batch-{i}"}) for i in range(30)]
    for theirs in flood:
        assert rx.post(*delivery(theirs, SECRET)) == 202
    gets_before = sim.count("get")
    assert rx.post(*delivery(ours, SECRET)) == 202  # ours arrives last, behind the flood
    first = rx.tick()
    assert first.evidence_attributed == 1 and first.reconciled_by_evidence == 1  # not kept waiting
    assert first.foreign == 9
    while rx.tick().foreign:  # the rest of the flood, ten a pass
        pass
    assert _tally(rx).interactions == 30
    # one GET for each of theirs (ours is read more: attributed, verified, then polled as a submitted job)
    assert sim.count("get") - gets_before - sim.count("get", job.idem_key) == 30
    assert rx.job("ours")[0].handle == ours and sim.count("create", job.idem_key) == 1


def test_two_deliveries_of_one_interaction_before_a_pass_cost_one_get(sim: Simulator, rx: Receiver) -> None:
    theirs = _create_elsewhere(sim, {"app": "billing"})
    assert rx.post(*delivery(theirs, SECRET, "interaction.requires_action")) == 202
    assert rx.post(*delivery(theirs, SECRET, "interaction.completed")) == 202  # not registered yet: recorded
    assert rx.tick().foreign == 2
    assert sim.count("get") == 1
    assert (_tally(rx).interactions, _tally(rx).deliveries) == (1, 2)
    assert _orphans(rx) == []
