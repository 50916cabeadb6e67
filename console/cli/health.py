"""How the ledger is doing: `status`, `verify`, `report` (the hold report) and `metrics` (Prometheus)."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Annotated, Any

import typer

from console import output
from console.cli.common import (
    Session,
    command,
)
from ledger import (
    EXIT_VERIFY_FAILED,
    JOURNAL_BYTES,
    BadInput,
    Config,
    JournalReport,
    LedgerCorrupt,
    LedgerError,
    Liveness,
    Status,
    Verdict,
    WorkerBoard,
    audit_key_path,
    current_audit_key,
    duration_text,
    is_url,
    iso,
    os_account,
    parse_when,
    process_clock,
    read_audit_key,
    shown_ledger,
    use_audit_key,
)

PANEL = "Health"
"""Where `reclaim --help` lists this module's commands."""


@command(PANEL)
def status(s: Session) -> None:
    """Jobs per state and per operation, today's quota, the audit head, whether workers are passing, and who
    you are acting as."""
    opened = s.open_ledger(readonly=True)
    st = opened.status(s.identity(opened.config))
    if s.as_json:
        output.emit_json(st.to_dict())
        return
    for warning in st.warnings:
        output.line(f"WARNING: {warning}")
    output.line(f"{st.identity.label}; roles: {', '.join(st.roles)}")
    output.table("jobs by state", ["state", "jobs"], [[s, n] for s, n in st.states.items()])
    output.table("today by operation", ["operation", "used", "limit", "remaining", "held"],
                 [[q.operation, q.used, q.limit, q.remaining, st.operations.get(q.operation, {}).get("held", 0)]
                  for q in st.quota_today])
    output.line(f"audit chain: {st.audit_events} events, head hash {st.audit_head or '-'} (keep a copy; "
                "'reclaim verify' checks it)")
    output.line(_verified_line(st))
    _print_workers(st.board, st.live, st.now)
    _print_journal(st.journal)
    if st.fenced_writes:
        output.line(f"fenced writes refused so far: {st.fenced_writes}")
    if st.duplicate_sends:
        output.line(f"DUPLICATE SENDS detected: {st.duplicate_sends} (a second remote interaction for one idem key; "
                    "see 'reclaim events' kind duplicate_send)")
    if st.webhook_counters:
        output.line("webhook deliveries refused or repeated: "
                    + ", ".join(f"{k} {v}" for k, v in st.webhook_counters.items()))
    foreigners = st.foreign
    if foreigners.interactions:
        output.line(f"foreign deliveries (other applications' interactions in the project, not alarming): "
                    f"{foreigners.deliveries} for {foreigners.interactions} interaction(s), last "
                    f"{iso(foreigners.last_seen) if foreigners.last_seen is not None else '-'}; each forgotten "
                    f"{st.foreign_retention_days:g} days after it was last seen")
    for name, p in st.paused_remotes.items():
        output.line(
            f"remote {name} is PAUSED since {iso(p.paused_at)} ({p.reason}; {p.refusals} refusal(s)); "
            f"next probe {iso(p.probe_at)}; 'reclaim resume {name} --reason ...' once it is fixed"
        )


def _verified_line(st: Status) -> str:
    """When `verify` last passed over the whole ledger (opening checks only the header, schema and newest event),
    and after it, over what was appended since."""
    full, since = st.verified.get("full"), st.verified.get("since")
    if full is None:
        text = ("full check: never passed on this ledger; run 'reclaim verify' (nightly: every page and event; "
                "opening checks only the header, schema and newest event)")
    else:
        text = (f"full check: passed {iso(full.at)} ({duration_text(st.now - full.at)} ago) over {full.events} "
                f"events, by {full.actor}")
    if since is not None and (full is None or since.at > full.at):
        text += f"; appended events checked up to {since.events} at {iso(since.at)} (verify --since)"
    return text


def _print_journal(report: JournalReport) -> None:
    """The outcome journal line: ready, or NOT preallocated (with what to do), and any records waiting."""
    path, records = report.path, report.records
    if report.preallocated:
        output.line(f"outcome journal: {JOURNAL_BYTES // 1024} KiB allocated in advance at {path}")
    else:
        have = "missing" if report.size is None else f"only {report.size} bytes"
        output.line(f"OUTCOME JOURNAL: not allocated in advance at {path} ({have}); run 'reclaim init' (after "
                    "freeing disk space if it is full) so an outcome the ledger refuses can still be kept")
    if records:
        output.table(f"OUTCOME JOURNAL: {len(records)} send outcome(s) waiting to be recorded",
                     ["job", "operation", "epoch", "outcome", "handle", "journaled", "waits because"],
                     [[r.job_id, r.operation, r.epoch, r.kind, r.handle or "-", iso(r.at), r.waits_because]
                      for r in records])


def _print_workers(board: WorkerBoard, live: Liveness, now: float) -> None:
    """The workers line (flagged when no pass within policy.worker_silence_seconds) and the newest heartbeats."""
    if live.silent:
        output.line(f"WORKERS: {live.summary()} (policy.worker_silence_seconds = {live.silence_seconds:g} s): "
                    "nothing is sending, polling or delivering; start 'reclaim worker' or check the cron 'reclaim tick'")
    else:
        output.line(f"workers: {live.summary()}")
    if board.recent:
        output.table("worker heartbeats", ["worker", "kind", "version", "state", "last pass", "passes", "error"], [
            [h.worker_id, h.kind, h.version, h.state(now, live.silence_seconds),
             f"{duration_text(now - h.last_pass_at)} ago" if h.last_pass_at is not None else "-", h.passes,
             h.error or ""]
            for h in board.recent
        ])


@command(PANEL)
def verify(
    s: Session,
    expect_head: Annotated[str | None, typer.Option(
        "--expect-head", help="COUNT:HASH, the head kept outside the ledger (status shows it, notifications carry "
                              "it): a deleted tail or a re-hashed chain no longer matches.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="COUNT:HASH, the head an earlier verify printed: check only what was appended after it (the "
                        "chain from there, the jobs those events touched, the small tables, the triggers; not the "
                        "file's pages), after checking that event COUNT still has that hash.")] = None,
) -> None:
    """Check the audit chain and (with the audit key) every event's MAC, every job against the replay of its
    events, the quota, counts, evidence, fenced writes, webhook deliveries, the triggers, and the database's
    integrity.

    Exit 0 with the head and counts, or 11 naming each kind of break found; either way the head verified through is
    printed as COUNT:HASH, for the next --since or --expect-head. A malformed --since, or one naming an event the
    ledger does not hold, exits 2 having checked nothing.
    """
    from ledger import parse_audit_head

    cfg = s.protect()
    verdict = None
    env_key = audit_key_path(None)
    if cfg is None and env_key is not None:  # no usable config: the key file RECLAIM_AUDIT_KEY_FILE names
        use_audit_key(read_audit_key(env_key))
    try:
        head = parse_audit_head(expect_head) if expect_head is not None else None
    except ValueError as e:
        raise BadInput(f"--expect-head {e}") from None
    try:
        start = parse_audit_head(since) if since is not None else None
    except ValueError as e:
        raise BadInput(f"--since {e}") from None
    try:
        reading = s.read_ledger(cfg)
    except LedgerCorrupt as e:  # damage SQLite meets on opening (the schema) is a failed check too
        damage = e.damage
    else:
        try:
            verdict = reading.verify(key=current_audit_key(), expect_head=head, since=start)
        except BadInput as e:  # --since names an event this ledger does not hold
            raise BadInput(f"--since {e}") from None
        except LedgerCorrupt as e:  # damage met while reading: a failed check (locked: exit 8 as anywhere)
            damage = e.damage
        finally:
            reading.close()
    engine = "PostgreSQL" if is_url(str(s.ledger)) else "SQLite"
    if verdict is None:
        output.error(f"ledger {shown_ledger(s.ledger)}: {engine} cannot read it ({damage}); restore it from a backup",
                     as_json=s.as_json, code=EXIT_VERIFY_FAILED)
        raise typer.Exit(EXIT_VERIFY_FAILED)
    not_recorded = _record_pass(s, cfg, verdict) if verdict.ok else None
    if s.as_json:
        output.emit_json({**verdict.to_dict(), "recorded": not_recorded is None and verdict.ok})
    else:
        output.line(f"events {verdict.events}, jobs {verdict.jobs}, head {verdict.head}")
        if verdict.since is not None:
            checked = verdict.events - int(verdict.since.partition(":")[0])
            output.line(f"checked since {verdict.since}: the {checked} events after it and the {verdict.jobs_checked} "
                        "jobs they touched, the small tables and the triggers; pages not checked: run a full verify "
                        "(it also recounts the kept counters)")
        for problem in (verdict.chain_break, verdict.job_mismatch, *verdict.problems, *verdict.integrity[:5]):
            if problem:
                output.line(f"BROKEN: {problem}")
        if verdict.unlisted:
            output.line(f"BROKEN: {verdict.unlisted} more failing events, not listed")
        if not verdict.mac_checked:
            output.line("not checked: the events' MACs (this account cannot read the audit key; run verify as an "
                        "account that holds it, see [audit] key_file)")
        if verdict.ok:
            # SQLite checks its pages (PRAGMA integrity_check); on PostgreSQL the server's own reads of every
            # row are the check, so say only that.
            damage_check = "SQLite finds no damage" if engine == "SQLite" else "every row read back"
            macs = "every event's MAC checks, " if verdict.mac_checked else ""
            if verdict.since is None:
                output.line(f"ok: the chain holds, {macs}every job equals the replay of its events, {damage_check}")
            else:
                output.line(f"ok: the chain holds from the head you kept, {macs}every job those events touched "
                            "equals the replay of its events")
            if not_recorded is not None:
                output.line(f"not recorded as the last pass ('reclaim status' and the metrics say when verify last "
                            f"passed): {not_recorded}")
            output.line(f"head to keep: {verdict.head}")
    raise typer.Exit(0 if verdict.ok else EXIT_VERIFY_FAILED)


def _record_pass(s: Session, cfg: Config | None, verdict: Verdict) -> str | None:
    """Record a passing verify in the ledger, as the account that ran it; None when recorded, else why not (no
    usable config `cfg`, a ledger this account may not write)."""
    if cfg is None:
        return "no usable config"
    try:
        with s.open_ledger(config=cfg) as opened:
            opened.record_verify_pass(verdict, scope="full" if verdict.since is None else "since",
                                      actor=os_account())
    except LedgerError as e:
        return str(e)
    return None


REPORT_SINCE = "7d"
"""The report's window when --since is not given."""


@command(PANEL, name="report")
def report_cmd(
    s: Session,
    since: Annotated[str | None, typer.Option(
        "--since", help="The window's start: ISO time, epoch seconds, or 7d, 12h back (default: 7d).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="The window's end (same forms; default: now).")] = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the figures as CSV rows (scope, name, figure, key, "
                                         "value).")] = False,
    to: Annotated[str | None, typer.Option(
        "--to", help="Write the history (jobs, events, holds, decisions, findings) to this new SQLite file instead; "
        "the whole history unless --since/--until are given.")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --to: replace the file when it exists.")] = False,
) -> None:
    """How holds came about and ended over a window, per operation and per remote (read-only).

    For the holds begun in the window: their cause, how each ended by the window's end (on the remote's evidence,
    reconciled / released / rejected / remediated by a person, still open) and the time to decision (p50, p90,
    max); releases authorised and what their next attempt came to; remote queries and what they could answer;
    quota used per day. --to FILE writes the history as a SQLite file to explore instead."""
    from ledger import REPORT_CSV_COLUMNS, history_destination

    if s.as_json and as_csv:
        raise BadInput("report: give --json or --csv, not both")
    if to is None and force:
        raise BadInput("report: --force only applies to --to FILE")
    opened = s.open_ledger(readonly=True)
    try:
        now = opened.clock.now()
        start = parse_when(since or REPORT_SINCE, now, name="--since")
        end = parse_when(until, now, name="--until") if until is not None else now
        if to is not None:
            windowed = since is not None or until is not None
            if windowed and start >= end:
                raise BadInput(f"--since {iso(start)} is not before --until {iso(end)}; give an earlier --since")
            dest = history_destination(to, force=force, ledger=s.ledger)
            window = (start, end) if windowed else (None, None)
            written = opened.write_history(dest, since=window[0], until=window[1], replace=force)
        else:
            built = opened.report(start, end)
    finally:
        opened.close()
    if to is not None:
        summary = {"to": str(written.path), "rows": written.rows, "events_in_ledger": written.events_in_ledger,
                   "head_hash": written.head_hash}
        if s.as_json:
            output.emit_json(summary)
        else:
            counts = ", ".join(f"{n:,} {t}" for t, n in written.rows.items())
            output.line(f"history written to {written.path}: {counts}")
        return
    if s.as_json:
        output.emit_json(built.to_dict())
    elif as_csv:
        from console.export import write_rows

        write_rows(sys.stdout, "csv", REPORT_CSV_COLUMNS, built.csv_rows(), terminal=sys.stdout.isatty())
    else:
        _print_hold_report(built)


def _print_hold_report(r: Any) -> None:
    """The report as tables: holds and how they ended, causes, releases, queries, quota per day."""
    from ledger import RELEASE_OUTCOMES, span
    from ledger import REPORT_ENDINGS as ENDINGS

    def took(v: float | None) -> str:
        return "-" if v is None else span(v, parts=2)

    scopes = [r.total, *r.remotes, *r.operations]

    def who(f: Any) -> str:
        return "all" if f.scope == "all" else f"{'op' if f.scope == 'operation' else f.scope} {f.name}"

    output.line(f"report {iso(r.since)} .. {iso(r.until)} ({r.timezone}): holds begun in the window, "
                "and how each had ended by its end")
    output.table("holds and how they ended", ["for", "holds", *ENDINGS], [
        [who(f), f.holds, *[f.endings.get(e, 0) for e in ENDINGS]] for f in scopes], ids=["for"])
    output.table("time from hold to decision", ["for", "decided", "p50", "p90", "max"], [
        [who(f), f.time_to_decision.count, took(f.time_to_decision.p50), took(f.time_to_decision.p90),
         took(f.time_to_decision.max)] for f in scopes], ids=["for"])
    output.table("holds by cause", ["for", "cause", "holds"], [
        [who(f), cause, n] for f in scopes for cause, n in sorted(f.causes.items())] or [["-", "none", 0]])
    output.table("releases authorised and what the next attempt came to", ["for", "releases", *RELEASE_OUTCOMES], [
        [who(f), f.releases, *[f.release_outcomes.get(o, 0) for o in RELEASE_OUTCOMES]] for f in scopes])
    output.table("remote queries and what they could answer", ["for", "queries", "answer", "count"], [
        [who(f), f.queries, answer, n] for f in scopes for answer, n in sorted(f.answers.items())]
        or [["-", 0, "none", 0]])
    ops = [f for f in r.operations if f.quota_used]
    output.table("quota used per day", ["day", *[f"{f.name} (of {f.quota_limit})" for f in ops], "held", "decided"], [
        [d.day, *[f.quota_used.get(d.day, 0) for f in ops], d.held, d.decided] for d in r.days])


@command(PANEL, name="metrics")
def metrics_cmd(
    s: Session,
    listen: Annotated[str | None, typer.Option(
        "--listen", help="Serve /metrics on this loopback HOST:PORT (port 0: a free one) instead of printing once.")] = None,
) -> None:
    """The ledger's figures in the Prometheus text format: printed once, or served at /metrics (read-only).

    --json prints the samples once as {"samples": [{"name", "labels", "value"}]}, or {"listening": URL}."""
    import errno

    from ledger import (
        LedgerCollector,
        metrics_exposition,
        metrics_listen_address,
        metrics_registry,
        metrics_samples,
        metrics_server,
    )

    address = metrics_listen_address(listen) if listen is not None else None
    cfg = s.load()
    s.connect(readonly=True).close()  # a missing or unusable ledger is refused before anything else
    collector = LedgerCollector(lambda: s.connect(readonly=True, check_same_thread=False), cfg, process_clock(),
                                journal_of=str(s.ledger), strict=True)
    registry = metrics_registry(collector)
    if address is None:
        try:
            if s.as_json:
                output.emit_json({"samples": metrics_samples(registry)})
            else:
                sys.stdout.buffer.write(metrics_exposition(registry))
                sys.stdout.flush()
        finally:
            collector.close()
        return
    host, port = address
    try:
        server = metrics_server(registry, host, port)
    except OSError as e:
        collector.close()
        if e.errno == errno.EADDRINUSE:
            raise BadInput(f"metrics: port {port} on {host} is in use; pick another with --listen") from None
        raise BadInput(f"metrics: cannot listen on {listen} ({e.strerror})") from None
    try:
        metrics_exposition(registry)  # the first read counts every event once, before Prometheus's first scrape
    except BaseException:
        server.server_close()
        collector.close()
        raise
    collector.strict = False  # from now on a failed read is reclaim_ledger_up 0, not the end of the server

    def on_signal(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.server_address[1]}/metrics"
    if s.as_json:
        output.emit_json({"listening": url})
    else:
        output.line(f"metrics listening on {url}")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    collector.close()
