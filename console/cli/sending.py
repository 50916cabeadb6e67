"""The scheduler's commands (the sender role): `submit`, `tick`, `worker`, `receiver`, `evidence`, `resume`."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from console import output
from console.payload_source import payload_text
from ledger import (
    EXIT_BLOCKED_BY_HOLD,
    EXIT_HELD,
    EXIT_QUOTA_EXCEEDED,
    EXIT_RESERVED_NOT_SENT,
    EXIT_SEND_TAKEN_OVER,
    BadInput,
    iso,
    process_clock,
)

if TYPE_CHECKING:
    from ledger import TickReport
from console.cli.common import (
    OperationOpt,
    Session,
    command,
    within,
)

PANEL = "Sending (the scheduler's account)"
"""Where `reclaim --help` lists this module's commands."""

ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (recorded with the action).")]


@command(PANEL)
def submit(
    s: Session,
    operation: Annotated[str, typer.Argument(help="A declared operation, e.g. article.generate.")],
    payload: Annotated[str, typer.Option("--payload", help=(
        "The job's JSON payload (an object): the JSON text itself, @FILE to read it from a UTF-8 file, or - to "
        "read it from stdin (at most 64 MiB either way). A JSON object starts with '{', so a value that starts "
        "with '@' or is '-' is never taken for JSON text."))],
    job_id: Annotated[str | None, typer.Option("--job-id", help="Your business key (default: hash of the spec).")] = None,
    target: Annotated[str | None, typer.Option("--target", help="What the job acts on (for hold blocking).")] = None,
) -> None:
    """Reserve a job (committed first), then send it once. A duplicate sends nothing.

    Exit codes: 0 sent or duplicate, 2 bad input (a payload that is not a valid one, or an @FILE or stdin
    that cannot be read: missing, a folder, empty, not UTF-8, over 64 MiB), 3 quota exceeded, 4 held,
    5 blocked by a held job on the target, 9 reserved but not sent by this command (the send was given up,
    or the remote is paused: a worker pass sends it), 10 this command's send was taken over (fenced) and
    the job moved on without it.
    """
    text = payload_text(payload)  # read before the ledger is opened: bad input there touches nothing
    opened = s.open_ledger()
    actor = s.sender(opened.config, "submit jobs")
    res = opened.submit(operation, text, job_id=job_id, target=target, actor=actor)
    doc: dict[str, Any] = {"outcome": res.outcome, "state": res.state, "job_id": res.key.job_id,
                           "operation": res.key.operation}
    if res.blocking:
        doc["blocking"] = {"job_id": res.blocking.job_id, "operation": res.blocking.operation}
    if res.outcome == "quota_exceeded":
        doc["quota"] = {"used": res.used, "limit": res.limit}
    if s.as_json:
        output.emit_json(doc)
    else:
        msg = f"{res.outcome}: {res.key.job_id} / {res.key.operation}"
        if res.state:
            msg += f" -> {res.state}"
        if res.send and res.send.error:
            msg += f" ({res.send.error})"
        if res.blocking:
            msg += f"; held job {res.blocking.job_id} / {res.blocking.operation} on this target must be resolved first"
        if res.outcome == "quota_exceeded":
            msg += f"; today's quota {res.used}/{res.limit} is used up"
        if res.fenced:
            msg += f"; this send was taken over by another worker or a person: the job is now {res.state}"
        elif res.send and res.send.kind in ("abandoned", "remote_unusable"):
            msg += "; not sent by this command: the next worker pass sends it"
        output.line(msg)
    code = {"quota_exceeded": EXIT_QUOTA_EXCEEDED, "blocked_by_hold": EXIT_BLOCKED_BY_HOLD}.get(res.outcome, 0)
    if res.outcome == "reserved" and res.fenced:
        code = EXIT_SEND_TAKEN_OVER
    elif res.outcome == "reserved" and res.send is not None and res.send.kind in ("abandoned", "remote_unusable"):
        code = EXIT_RESERVED_NOT_SENT
    elif res.outcome == "reserved" and res.state == "held":
        code = EXIT_HELD
    raise typer.Exit(code)


def _progress_for(as_json: bool) -> tuple[Callable[[str, int, int], None] | None, Callable[[], None]]:
    if as_json:
        return None, lambda: None
    if sys.stdout.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=output.stdout, transient=True)
        tasks: dict[str, Any] = {}
        bar.start()

        def update(step: str, done: int, total: int) -> None:
            if step not in tasks:
                tasks[step] = bar.add_task(step, total=total)
            bar.update(tasks[step], completed=done, total=total)

        return update, bar.stop
    last: dict[str, float] = {}

    def plain(step: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last.get(step, 0.0) >= 1.0:
            last[step] = now
            output.line(f"{step}: {done}/{total}")

    return plain, lambda: None


def _print_report(report: TickReport, as_json: bool) -> None:
    if as_json:
        output.emit_json(report.as_dict())
        return
    from console.words import tick_line

    output.line(tick_line(report.as_dict()))


@command(PANEL, name="tick")
def tick_cmd(s: Session) -> None:
    """Run one worker pass and exit: recover stale sends, send due jobs, poll, deliver, notify."""
    progress, finish = _progress_for(s.as_json)
    try:
        opened = s.open_ledger()
        s.sender(opened.config, "run a worker pass (it sends)")
        report = opened.tick(progress=progress)
    finally:
        finish()
    _print_report(report, s.as_json)
    raise typer.Exit(EXIT_HELD if report.held or report.orphans_held else 0)


@command(PANEL)
def worker(
    s: Session,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between passes.")] = 1.0,
) -> None:
    """Run passes until SIGINT/SIGTERM; the job under way is finished and recorded first (sender role)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            # Second signal: leave at once; what was not written is found by the next recovery pass.
            os._exit(128 + signum)
        stop.set()
        output.notice("stopping after the job under way (signal again to leave at once)")

    within("--interval", interval, 0.01, 86400)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    opened = s.open_ledger()
    s.sender(opened.config, "run a worker (it sends)")

    def on_outage(error: BaseException, wait: float) -> None:
        output.notice(f"the ledger is not usable now ({error}); the worker waits {wait:.3g} s and tries again")

    passes = opened.run_worker(stop, interval=interval,
                               on_pass=(lambda r: _print_report(r, s.as_json)) if s.as_json else None,
                               on_outage=on_outage)
    if not s.as_json:
        output.line(f"worker stopped after {passes} passes")


@command(PANEL)
def receiver(
    s: Session,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (put TLS in front for the internet).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free one).")] = 8766,
) -> None:
    """Serve the webhook endpoint: verified deliveries become evidence; the rest get a 4xx and a counter.

    Runs as the scheduler's account (sender role): it writes to the ledger on the remote's word.
    """
    import errno

    from ledger import make_webhook_server as make_server

    within("--port", port, 0, 65535)
    cfg = s.load()
    s.sender(cfg, "run the webhook receiver (it writes evidence)")
    s.connect().close()
    try:
        server = make_server(s.ledger, cfg, clock=process_clock(), host=host, port=port)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise BadInput(f"receiver: port {port} on {host} is in use; pick another with --port") from None
        raise BadInput(f"receiver: cannot listen on {host}:{port} ({e.strerror})") from None

    def on_signal(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    url = f"http://{host}:{server.server_address[1]}/"
    if s.as_json:
        output.emit_json({"listening": url})
    else:
        output.line(f"receiver listening on {url}")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.2)
    server.server_close()


@command(PANEL, name="evidence")
def evidence_cmd(
    s: Session,
    job_id: Annotated[str | None, typer.Argument(help="A job id (or --orphans).")] = None,
    orphans: Annotated[bool, typer.Option("--orphans", help="Evidence that names no job of this ledger, and why.")] = False,
    operation: OperationOpt = None,
) -> None:
    """What the remote said about a job (queries, webhooks, fenced outcomes), or the orphan evidence."""
    with s.read_ledger(s.protect()) as reading:
        if orphans or job_id is None:
            items = reading.orphan_evidence()
        else:
            items = reading.evidence_of(reading.job(reading.key_of(job_id, operation)))
    if s.as_json:
        output.emit_json({"evidence": [e.to_dict() for e in items]})
        return
    if orphans or job_id is None:
        output.table("orphan evidence (no job of this ledger; reconcile a held job with --handle evidence:ID)",
                     ["id", "at", "source", "handle", "says", "ref", "why"],
                     [[e.id, iso(e.at), e.source, e.handle or "", e.remote_state, e.ref or "",
                       e.outcome or "awaiting attribution by the next worker pass"] for e in items],
                     ids=("id", "handle"), empty="orphan evidence: none")
        return
    output.table(f"evidence for {job_id}", ["id", "at", "source", "idem key", "attempt", "handle", "says", "ref"],
                 [[e.id, iso(e.at), e.source, e.idem_key, e.attempt, e.handle or "", e.remote_state, e.ref or ""]
                  for e in items], ids=("id", "idem key", "handle"),
                 empty=f"evidence for {job_id}: none (no query answer, webhook or fenced outcome recorded)")


@command(PANEL)
def resume(
    s: Session,
    remote: Annotated[str, typer.Argument(help="The paused remote, as named under [remotes].")],
    reason: ReasonOpt = "",
) -> None:
    """Lift a remote's pause (approver): its due jobs are sent again from the next pass."""
    opened = s.open_ledger()
    opened.resume_remote(remote, actor=s.actor(opened.config), reason=reason)
    if s.as_json:
        output.emit_json({"remote": remote, "paused": False})
    else:
        output.line(f"remote {remote} resumed: its due jobs are sent from the next worker pass")
