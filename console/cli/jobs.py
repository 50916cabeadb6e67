"""Reading jobs and their history: `show`, `jobs`, `views`, `quota`, `events`, `export`, `notifications`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import closing
from typing import Annotated, Any

import typer

from console import output, sanitize
from console.cli.common import (
    OperationOpt,
    Session,
    command,
    within,
)
from ledger import (
    BadInput,
    Event,
    Job,
    JobFilter,
    Ledger,
    Redactor,
    arrival_words,
    candidate_choices,
    console_url_for,
    iso,
    parse_when,
    process_clock,
)

PANEL = "Jobs and their history"
"""Where `reclaim --help` lists this module's commands."""

FOLLOW_POLL_SECONDS = 0.1
"""How often `events --follow` looks at the ledger (one cheap pragma when nothing changed)."""
EXIT_BROKEN_PIPE = 141
"""`export` to a pipe whose reader left early: what a process killed by SIGPIPE reports to its shell."""


def job_row(job: Job, now: float) -> list[Any]:
    """One job as a row of `jobs` and `show`'s tables."""
    from console.live import age

    return [job.job_id, job.operation, job.state, job.target or "", job.attempt, age(now - job.created_at),
            job.owner or "", job.held_reason or job.last_error or ""]


@command(PANEL)
def show(
    s: Session,
    job_id: Annotated[str, typer.Argument(help="The job id.")],
    operation: OperationOpt = None,
) -> None:
    """Every field of one job, its event history and, when its remote has one, its remote-console URL (whole)."""
    cfg = s.protect()
    opened = s.read_ledger(cfg)
    key = opened.key_of(job_id, operation)
    job = opened.job(key)
    events = opened.history_of(key)
    found = opened.evidence_of(job)
    arrives = opened.may_arrive_until(job)
    candidates = opened.candidates(job) if cfg is not None else None
    url = console_url_for(cfg, job.operation, job.idem_key) if cfg is not None else None
    if s.as_json:
        output.emit_json({"job": job.to_dict(), "events": [e.to_dict() for e in events],
                          "evidence": [e.to_dict() for e in found], "console_url": url,
                          "may_arrive_until": iso(arrives) if arrives is not None else None,
                          "candidates": None if candidates is None else [
                              {**c.to_dict(), "arrived": iso(c.arrived),
                               "created": iso(c.created) if c.created is not None else None} for c in candidates]})
        return
    if arrives is not None:
        output.line(f"{arrival_words(job, arrives, cfg.timezone if cfg is not None else 'UTC')}: release, reject "
                    "and remediate wait until then; reconcile need not")
    if candidates:
        _print_candidates(job, candidates)
    elif candidates is None and job.state == "held" and not job.handle:
        output.line("orphan deliveries that could be this job's own: not checked (no usable config names its remote)")
    whole = ("job_id", "operation", "idem_key", "handle", "target", "owner")  # typed next: never cut
    output.table(f"job {job.job_id} / {job.operation}", ["field", "value"],
                 [[k, iso(v) if k.endswith("_at") or k.endswith("_until") else v if k in whole else output.cut(v)]
                  for k, v in job.to_dict().items() if k not in ("payload", "result")] +
                 [["payload", output.cut(job.payload)], ["result", output.cut(job.result)]], ids=("value",))
    if found:
        output.table("evidence: what the remote said (queries, signed webhooks, fenced accepted sends)",
                     ["at", "source", "attempt", "handle", "says", "ref"],
                     [[iso(e.at), e.source, e.attempt, e.handle or "", e.remote_state, e.ref or ""] for e in found],
                     ids=("handle",))
    _print_events(events)
    if url is not None:
        output.line(f"remote console (the remote's own records of this job): {url}")


def _print_candidates(job: Job, candidates: list[Any]) -> None:
    """The orphan deliveries that could be a held job's own, and the two ways to decide each, before its fields:
    a release waits for them."""
    output.table(f"CANDIDATES: {len(candidates)} orphan deliver{'y' if len(candidates) == 1 else 'ies'} could be this "
                 "job's own (same remote, within its send window); a release waits until each is decided",
                 ["evidence", "interaction", "says", "created", "arrived", "matched by"],
                 [[f"evidence:{c.evidence_id}", c.handle or "", c.remote_state,
                   iso(c.created) if c.created is not None else "unknown (not read)", iso(c.arrived),
                   "created time" + (f", model {c.model}" if c.model else "") if c.matched_by == "created"
                   else "arrival time (its record could not be read)"] for c in candidates],
                 ids=("evidence", "interaction"))
    output.line(candidate_choices(job, candidates))


def _print_events(events: list[Event]) -> None:
    output.table("events", ["id", "at", "job", "seq", "actor", "kind", "from", "to", "epoch", "detail"],
                 [[e.id, iso(e.at), f"{e.job_id} / {e.operation}", e.seq, e.actor, e.kind, e.from_state,
                   e.to_state, e.epoch, e.detail] for e in events], ids=("job",))


@command(PANEL)
def jobs(
    s: Session,
    group: Annotated[str, typer.Argument(help="held, reserving, submitted, done, consumed, failed or resolved.")] = "held",
    filter_text: Annotated[str, typer.Option(
        "--filter", help="Keys owner:, op:, target:, reason: (why held / last error), text:; other words match id, "
                         "operation, target and why held. E.g. 'owner:me op:article.* reason:timeout bucket'.")] = "",
    view: Annotated[str | None, typer.Option("--view", help="Use a saved view (see 'reclaim views').")] = None,
    newest_first: Annotated[bool, typer.Option("--newest-first", help="Newest first (default oldest).")] = False,
    sort: Annotated[str, typer.Option(
        "--sort", help="Order by age, job, operation, state, target, owner, attempt or reason (why held / last "
                       "error / handle), ascending; COLUMN:desc descending. Default: age (oldest first).")] = "age",
    limit: Annotated[int, typer.Option("--limit", help="Rows per page.")] = 50,
    page: Annotated[int, typer.Option("--page", help="Page number, from 1.")] = 1,
) -> None:
    """One page of a group's jobs, by age or --sort, filtered by typed terms or a saved view."""

    s.protect()
    within("--limit", limit, 1, 1000)
    within("--page", page, 1, 1_000_000)
    # Who you are matters only for a saved view or `owner:me`: a plain listing needs no config.
    needs_me = view is not None or "owner:me" in filter_text.split()
    me = s.actor(s.governed_config()) if needs_me else None
    opened = s.read_ledger(None)
    if view is not None:
        assert me is not None
        saved = opened.view(me, view)
        group, filter_text = saved.group, saved.filter
    column, _, direction = sort.partition(":")
    if direction not in ("", "asc", "desc"):
        raise BadInput(f"--sort {sort!r}: the direction is asc or desc (e.g. --sort owner:desc)")
    rows = opened.jobs(group, limit=limit, offset=(page - 1) * limit,
                       oldest_first=(direction != "desc") != newest_first, sort=column or "age",
                       flt=JobFilter.parse(filter_text, me=me, now=opened.clock.now()))
    now = process_clock().now()
    if s.as_json:
        output.emit_json({"group": group, "page": page, "jobs": [j.to_dict() for j in rows]})
        return
    output.table(f"{group} jobs (page {page})", ["job", "operation", "state", "target", "attempt", "age", "owner",
                                                  "reason / last error"], [job_row(j, now) for j in rows],
                 ids=("job", "operation"), prose=("reason / last error",), empty=f"{group} jobs (page {page}): none"
                 + (" match the filter" if filter_text.strip() else ""))


@command(PANEL)
def views(
    s: Session,
    save: Annotated[str | None, typer.Option("--save", help="Save a view under this name.")] = None,
    group: Annotated[str, typer.Option("--group", help="The view's group.")] = "held",
    filter_text: Annotated[str, typer.Option("--filter", help="The view's filter.")] = "",
    delete: Annotated[str | None, typer.Option("--delete", help="Delete the view with this name.")] = None,
) -> None:
    """List your saved views, or save / delete one (kept in the ledger, per operator)."""

    opened = s.open_ledger(readonly=save is None and delete is None)
    me = s.actor(opened.config)
    if save is not None:
        opened.save_view(me, save, group, filter_text)
    if delete is not None:
        opened.delete_view(me, delete)
    saved = opened.saved_views(me)
    if s.as_json:
        output.emit_json([{"name": v.name, "group": v.group, "filter": v.filter} for v in saved])
        return
    if save is not None:
        output.line(f"saved view {save} for {me}: {group} jobs" + (f" matching {filter_text!r}" if filter_text else ""))
    if delete is not None:
        output.line(f"deleted view {delete} of {me}")
    output.table(f"saved views of {me}", ["name", "group", "filter"], [[v.name, v.group, v.filter] for v in saved],
                 ids=("name", "filter"), empty=f"saved views of {me}: none")


@command(PANEL)
def quota(
    s: Session,
    days: Annotated[int, typer.Option("--days", help="How many days back.")] = 1,
) -> None:
    """Daily operation quotas: used, limit, remaining."""
    within("--days", days, 1, 366)
    with s.open_ledger(readonly=True) as opened:
        hist = opened.quotas(days=days).history
    if s.as_json:
        output.emit_json({op: [{"day": d.day, "used": d.used, "limit": d.limit, "remaining": d.remaining}
                               for d in ds] for op, ds in hist.items()})
        return
    output.table("quota", ["operation", "day", "used", "limit", "remaining"],
                 [[d.operation, d.day, d.used, d.limit, d.remaining] for ds in hist.values() for d in ds])


@command(PANEL)
def events(
    s: Session,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")] = False,
    after: Annotated[int, typer.Option("--after", help="Start after this event id.")] = -1,
    limit: Annotated[int, typer.Option("--limit", help="How many recent events without --after.")] = 20,
) -> None:
    """Print the event log (newest `limit`, or after an id), and follow it with --follow.

    Following prints every event committed later exactly once, in id order, within about 0.1 s (see
    ledger.follow: the wake-up never depends on a later commit).
    """
    s.protect()
    within("--after", after, -1, 2**63 - 1)
    within("--limit", limit, 1, 10_000)
    opened = s.read_ledger(None)
    opened.check_opening()
    events = opened.events(after=max(after, 0))
    batch = events.poll(limit=10_000) if after >= 0 else events.tail(limit)

    def show_batch(evs: list[Event]) -> None:
        for e in evs:
            if s.as_json:
                output.emit_json(e.to_dict())
            else:
                output.line(f"{e.id} {iso(e.at)} {e.job_id} / {e.operation} #{e.seq} {e.actor} {e.kind} "
                            f"{e.from_state or '-'} -> {e.to_state or '-'} epoch={e.epoch} {e.detail}")

    show_batch(batch)
    if not follow:
        return
    try:
        while True:
            if not events.behind:
                opened.wait_for_change(FOLLOW_POLL_SECONDS)  # PostgreSQL: woken at once by NOTIFY
            batch = events.poll(limit=10_000)
            show_batch(batch)
    except KeyboardInterrupt:
        return


@command(PANEL, name="export", options=("ledger", "config", "operator"))
def export_cmd(
    s: Session,
    what: Annotated[str, typer.Argument(
        help="jobs (the projection: one row per job) or events (the append-only log, with prev_hash and hash).")],
    fmt: Annotated[str | None, typer.Option(
        "--format", help="csv, jsonl or json (default: from the --output suffix, else jsonl).")] = None,
    output_to: Annotated[str, typer.Option("--output", help="A file to create, or - for stdout.")] = "-",
    force: Annotated[bool, typer.Option("--force", help="Replace --output when it exists.")] = False,
    state: Annotated[list[str] | None, typer.Option(
        "--state", help="The job's current state or group (held, resolved, ...); repeat or comma-separate.")] = None,
    operation: Annotated[str | None, typer.Option(
        "--operation", "-o", help="The operation (* is a wildcard), as op: in --filter.")] = None,
    target: Annotated[str | None, typer.Option("--target", help="The job's target (* is a wildcard).")] = None,
    job: Annotated[str | None, typer.Option("--job", help="One job id (with --operation: one job key).")] = None,
    filter_text: Annotated[str, typer.Option(
        "--filter", help="A typed filter as 'reclaim jobs --filter' takes it: owner:, op:, target:, reason:, words.")] = "",
    since: Annotated[str | None, typer.Option(
        "--since", help="Jobs created / events recorded at or after: ISO time, epoch seconds, or 2h, 3d back.")] = None,
    until: Annotated[str | None, typer.Option("--until", help="... and before this time (same forms).")] = None,
    after: Annotated[int | None, typer.Option(
        "--after", help="Events only: ids after this one (continue an earlier export).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="The summary on stderr as one JSON object (stdout holds only the export).")] = False,
) -> None:
    """Export jobs or events as CSV, JSON lines or JSON, for a remote's support, an auditor or a spreadsheet.

    Read-only: one read snapshot, no write lock, works for a viewer and on a read-only ledger file. Rows come
    in a stable order (jobs by id and operation, events by id) and are streamed; payload, result and detail are
    the JSON text as stored. A file is made whole or not at all and never replaced without --force. Every
    secret the config names is always replaced by \\[redacted:NAME] (no role may see raw values). On stderr:
    the rows written and the audit head hash at the export, which 'reclaim verify' reports too.
    """
    from console.export import check_target, choose_format, opened, write_rows
    from ledger import (
        EXPORT_TABLES,
        ExportFilter,
        check_export_filter,
        export_redacted,
        parse_export_states,
    )

    cfg = s.protect()
    redactor = Redactor.from_config(cfg) if cfg is not None else Redactor()
    chosen = choose_format(fmt, output_to)
    me = s.actor(s.governed_config()) if "owner:me" in filter_text.split() else None
    now = process_clock().now()
    flt = ExportFilter(
        states=parse_export_states(state or []), operation=operation, target=target, job_id=job,
        since=parse_when(since, now, name="--since") if since is not None else None,
        until=parse_when(until, now, name="--until") if until is not None else None,
        after_id=after, typed=JobFilter.parse(filter_text, me=me, now=now) if filter_text.strip() else None,
    )
    check_export_filter(what, flt)
    dest = check_target(output_to, force=force, ledger=s.ledger)
    terminal = dest.path is None and sys.stdout.isatty()
    redactions = 0

    def source(reading: Ledger) -> Iterator[dict[str, Any]]:
        nonlocal redactions
        for row in reading.export_rows(what, flt):
            row, changed = export_redacted(row, redactor)
            redactions += changed
            yield row

    reading = s.read_ledger(cfg)
    try:
        with reading.export_snapshot() as anchor, opened(dest) as out, closing(source(reading)) as rows:
            written = write_rows(out, chosen, EXPORT_TABLES[what], rows, terminal=terminal)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        output.notice(f"export stopped: the reader closed the pipe before the end ({what})")
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except OSError as e:  # the output's disk is full, or the file system failed: nothing is left behind
        raise BadInput(f"--output {dest.shown}: cannot write ({e.strerror or e}); nothing was written "
                       "under that name") from None
    except KeyboardInterrupt:
        output.notice(f"export interrupted; nothing was written under {dest.shown}" if dest.path is not None
                      else "export interrupted")
        raise typer.Exit(130) from None
    finally:
        reading.close()
    if as_json:
        sys.stderr.write(sanitize.json_text({
            "exported": written, "what": what, "format": chosen, "output": dest.shown, "redacted_rows": redactions,
            "secrets_checked": cfg is not None, "terminal_escaped": terminal and chosen == "csv",
            "audit": {"events": anchor.events, "head_hash": anchor.head_hash}}) + "\n")
        return
    note = "" if not redactions else (
        f"; secrets replaced in {redactions} row(s)" + (" (those events no longer match their hash)"
                                                         if what == "events" else ""))
    if cfg is None:
        note += f"; config {s.config} not read, so no secret was looked for (the ledger's text was redacted when written)"
    if terminal and chosen == "csv":
        note += "; control characters shown escaped for the terminal"
    output.notice(f"exported {written} {what if written != 1 else what[:-1]} as {chosen} to {dest.shown}; audit head at export: "
                  f"{anchor.events} events, hash {anchor.head_hash or '-'}{note}")


@command(PANEL)
def notifications(s: Session) -> None:
    """The notification outbox, uncertain ones first."""

    with s.read_ledger(s.protect()) as reading:
        rows = reading.outbox()
    if s.as_json:
        output.emit_json(rows)
        return
    output.table("notifications", ["event id", "channel", "job", "kind", "state", "tries", "last error"],
                 [[r["event_id"], r["channel"], f"{r['job_id']} / {r['operation']}", r["kind"], r["state"],
                   r["tries"], r["last_error"]] for r in rows], ids=("event id", "job"), prose=("last error",),
                 empty="notifications: none (the outbox is empty)")


@command(PANEL, name="notification")
def notification_cmd(
    s: Session,
    event_id: Annotated[str, typer.Argument(help="The notification's event id.")],
    decision: Annotated[str, typer.Option("--mark", help="confirmed (triage) or resend (approver).")],
    note: Annotated[str, typer.Option("--note")] = "",
) -> None:
    """Settle an uncertain notification: confirmed received, or sent again by another route."""

    opened = s.open_ledger()
    actor = s.actor(opened.config)
    opened.settle_notification(event_id, decision, actor=actor, note=note)
    if s.as_json:
        output.emit_json({"event_id": event_id, "decision": decision, "actor": actor, "note": note})
    else:
        said = {"confirmed": "confirmed received", "resend": "sent again by another route"}.get(decision, decision)
        output.line(f"notification {event_id} marked {said} as {actor}" + (f": \"{note}\"" if note else "")
                    + "; nothing was sent")
