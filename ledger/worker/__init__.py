"""The worker: passes that recover stale sends, send due jobs, poll submitted ones and deliver results, acting on
webhook evidence between them.

No network call happens inside a transaction: each step claims or reads in one short transaction, talks to the
remote with none open, then records the outcome in another, naming the epoch it holds.

    pass_state  what one pass carries: TickReport, RemoteCache, the worker's id
    outcomes    recording a send's outcome, or journaling it when the ledger refuses; replaying the journal
    send        stale sends recovered, due jobs picked and sent within their lease, submit_now
    poll        submitted jobs polled, done jobs' results delivered
    evidence    webhook deliveries attributed, and acted on
    loop        tick (one pass) and run_worker (passes until stopped)

This package's names below are the worker's interface; `ledger` re-exports the ones the console uses.
"""

from __future__ import annotations

from ledger.worker.loop import OUTAGE_BACKOFF_MAX, outage_backoff, run_worker, tick, wait_for_evidence
from ledger.worker.outcomes import OutcomeNotRecorded, commit_outcome, record_send_outcome, replay_journal
from ledger.worker.pass_state import Progress, RemoteCache, TickReport, worker_id
from ledger.worker.poll import deliver_done, poll_submitted, record_poll
from ledger.worker.send import SubmitResult, recover_stale, send_due, send_one, submit_now

__all__ = [
    "OUTAGE_BACKOFF_MAX",
    "OutcomeNotRecorded",
    "Progress",
    "RemoteCache",
    "SubmitResult",
    "TickReport",
    "commit_outcome",
    "deliver_done",
    "outage_backoff",
    "poll_submitted",
    "record_poll",
    "record_send_outcome",
    "recover_stale",
    "replay_journal",
    "run_worker",
    "send_due",
    "send_one",
    "submit_now",
    "tick",
    "wait_for_evidence",
    "worker_id",
]
