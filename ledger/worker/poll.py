"""Polling the submitted jobs and delivering the done ones' results."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ledger.clock import Clock
from ledger.config import Config
from ledger.crashpoints import crashpoint
from ledger.db import write_tx
from ledger.model import Job
from ledger.redaction import Redactor
from ledger.remotes.base import RemoteStatus, redact_status
from ledger.sink import deliver_to_folder
from ledger.store import Connection
from ledger.store import jobs as jobs_store
from ledger.transitions import Applied, apply
from ledger.worker.pass_state import (
    Progress,
    RemoteCache,
    TickReport,
)


def record_poll(conn: Connection, config: Config, job: Job, status: RemoteStatus, *, actor: str, now: float) -> Applied | None:
    """Record a poll's answer for a submitted job (inside the caller's transaction); None if nothing to write.

    Every secret the config names is replaced in the answer (result, snapshot, error) before it is written.
    """
    status = redact_status(status, Redactor.from_config(config))
    base = {"handle": job.handle}
    if status.state == "completed":
        detail: dict[str, object] = dict(base)
        if isinstance(status.result, dict) and status.result.get("text_missing"):
            detail["text_missing"] = True  # completed, but the reply carried no text: said, not hidden
        return apply(
            conn, job.key, "completed", actor=actor, now=now, expected_state="submitted", expected_epoch=job.epoch,
            detail=detail, fields={"result": status.result, "result_at": now}, notify=config.notify,
        )
    if status.state == "failed":
        fields: dict[str, object] = {"last_error": status.error}
        if status.result is not None:
            fields.update(result=status.result, result_at=now)  # e.g. an incomplete interaction's partial text
        return apply(
            conn, job.key, "remote_failed", actor=actor, now=now, expected_state="submitted",
            expected_epoch=job.epoch, detail={**base, "error": status.error, "snapshot": status.snapshot},
            fields=fields, notify=config.notify,
        )
    if status.state in ("not_found", "needs_person"):
        if status.state == "not_found":
            event, reason = "handle_unknown", "the remote does not know the recorded handle"
        else:
            event, reason = "remote_needs_person", status.error or "the remote answered something only a person can judge"
        return apply(
            conn, job.key, event, actor=actor, now=now, expected_state="submitted",
            expected_epoch=job.epoch, detail={**base, "held_reason": reason, "snapshot": status.snapshot},
            fields={"held_reason": reason}, notify=config.notify,
        )
    return None


def poll_submitted(
    conn: Connection,
    config: Config,
    remotes: RemoteCache,
    *,
    clock: Clock,
    owner: str,
    report: TickReport,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
    batch: int = 200,
) -> None:
    """Look up every submitted job (bounded concurrency) and record completions and failures."""
    total = jobs_store.count_submitted(conn)
    done_count = 0
    last_key: tuple[float, str, str] = (float("-inf"), "", "")
    with ThreadPoolExecutor(max_workers=config.policy.poll_concurrency) as pool:
        while not (stop is not None and stop.is_set()):
            page = jobs_store.submitted_with_handle(conn, last_key, batch)
            if not page:
                break
            jobs = [j for j in page if j.operation in config.operations]
            last_key = (page[-1].created_at, page[-1].job_id, page[-1].operation)
            statuses = list(
                pool.map(lambda j: remotes.for_operation(j.operation).lookup(j.handle or ""), jobs)
            )
            report.polled += len(jobs)
            with write_tx(conn):
                for job, status in zip(jobs, statuses, strict=True):
                    applied = record_poll(conn, config, job, status, actor=owner, now=clock.now())
                    if applied is None:
                        continue
                    if not applied.ok:
                        report.fenced += applied.refusal == "fenced"
                    elif status.state == "completed":
                        report.completed += 1
                    elif status.state == "failed":
                        report.failed += 1
                    else:
                        report.held += 1
            crashpoint("after_done")
            done_count += len(page)
            if progress:
                progress("poll", done_count, total)


def deliver_done(
    conn: Connection,
    config: Config,
    *,
    clock: Clock,
    owner: str,
    report: TickReport,
    stop: threading.Event | None = None,
) -> None:
    """Deliver every done job to its sink, then mark it consumed (redelivery after a crash is harmless)."""
    redactor = Redactor.from_config(config)
    for job in jobs_store.done_jobs(conn):
        if stop is not None and stop.is_set():
            break
        if job.operation not in config.operations:
            continue
        path = deliver_to_folder(config.sink_dir(job.operation), job, redactor)
        crashpoint("after_deliver")
        with write_tx(conn):
            applied = apply(
                conn, job.key, "delivered", actor=owner, now=clock.now(), expected_state="done",
                expected_epoch=job.epoch, detail={"sink": str(path)}, notify=config.notify,
            )
        report.delivered += applied.ok
        report.fenced += not applied.ok and applied.refusal == "fenced"
