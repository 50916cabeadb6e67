"""The `reclaim` command line. Every command calls ledger functions; none holds SQL of its own."""

from __future__ import annotations

import inspect
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

try:  # typer vendors click as typer._click (0.2x); before that it used click itself
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import get_current_context

from console import output, sanitize
from console.job_link import check_link_part
from console.payload_source import payload_text
from ledger import (
    ACTION_TABLE,
    EXIT_BLOCKED_BY_HOLD,
    EXIT_HELD,
    EXIT_PROBE_FAILED,
    EXIT_QUOTA_EXCEEDED,
    EXIT_REFUSED,
    EXIT_RESERVED_NOT_SENT,
    EXIT_SEND_TAKEN_OVER,
    EXIT_VERIFY_FAILED,
    JOURNAL_BYTES,
    POLICY_SETTINGS,
    PROBE_WAIT_SECONDS,
    SEAT_ENV,
    BadInput,
    Clock,
    Config,
    Connection,
    Event,
    EventCursor,
    Identity,
    Job,
    JobFilter,
    JobKey,
    JournalReport,
    LedgerCorrupt,
    LedgerError,
    Liveness,
    Preview,
    Redactor,
    WorkerBoard,
    apply_policy,
    arrival_words,
    audit_key_path,
    candidate_choices,
    check_action_input,
    check_pages,
    connect,
    console_url_for,
    create_audit_key,
    create_ledger,
    current_audit_key,
    dry_run_action,
    duration_text,
    evidence_for_job,
    get_job,
    held_candidates,
    is_url,
    iso,
    job_events,
    ledger_clock,
    list_jobs,
    load_config,
    loose_permissions,
    may_arrive_until,
    operations_of,
    orphan_evidence,
    os_account,
    parse_when,
    policy_owner,
    process_clock,
    quota_history,
    read_audit_key,
    read_policy,
    read_status,
    record_policy,
    require_policy_owner,
    require_role,
    resolve_identity,
    resume_remote,
    shown_ledger,
    take,
    use_audit_key,
    wait_for_change,
    write_tx,
)
from ledger import ActionField as Field
from ledger import (
    bulk_assign as assign_jobs,
)

if TYPE_CHECKING:
    from ledger import TickReport

app = typer.Typer(
    name="reclaim",
    help="A reservation ledger for operations that must never be sent twice, and its operator console.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _ledger_arg(value: str | Path) -> Path | str:
    """A ledger file's path, or a PostgreSQL ledger's `postgresql://` URL kept as written."""
    return str(value) if is_url(str(value)) else Path(value)


LedgerOpt = Annotated[
    str,  # not Path: typer would turn the parsed URL into a Path (collapsing its '//'); `_ledger_arg` decides
    typer.Option("--ledger", envvar="RECLAIM_LEDGER", help="Ledger file, or a postgresql:// URL.",
                 show_default=True, parser=_ledger_arg),
]
ConfigOpt = Annotated[
    Path, typer.Option("--config", envvar="RECLAIM_CONFIG", help="Config file (TOML).", show_default=True)
]
OperatorOpt = Annotated[
    str | None,
    typer.Option("--operator", envvar="RECLAIM_OPERATOR",
                 help="Who you are; honoured only with [identity] source = \"declared\" (default: the OS account)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
OperationOpt = Annotated[
    str | None, typer.Option("--operation", "-o", help="The job's operation (needed when the id is ambiguous).")
]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (recorded with the action).")]

STARTER_CONFIG = """\
# reclaim config (written by `reclaim init`). See the README for every key.
timezone = "UTC"

[identity]
source = "os"   # the acting operator is the OS account running the command ("declared": --operator, demos only;
                #  "proxy": the browser seat, `reclaim serve`; see the README)

[policy]
four_eyes = true
release_requires_finding = true
stale_reserving_seconds = 120
lease_seconds = 60

[operators]                # OS account = roles: viewer, triage, approver, sender
{account} = ["sender"]   # the scheduler's account (wrote this file): only a sender may submit, tick, run workers
alice = ["triage"]
bob = ["triage", "approver"]

[remotes.gemini]
kind = "gemini"
model = "gemini-flash-latest"
api_key_env = "GEMINI_API_KEY"
base_url = "http://127.0.0.1:8765"   # the bundled simulator (`reclaim simulator`); remove for Google
timeout_seconds = 30

[operations."article.generate"]
remote = "gemini"
daily_quota = 200
sink = "results"
"""

FOLLOW_POLL_SECONDS = 0.1
"""How often `events --follow` looks at the ledger (one cheap pragma when nothing changed)."""

DEFAULT_LEDGER = Path("reclaim.db")
PAGE_CHECK_SECONDS = 1.0  # status and events check the ledger's pages for damage for at most this long
CONSOLE_PAGE_CHECK_SECONDS = 0.5  # ... and the console, before its first paint
DEFAULT_CONFIG = Path("reclaim.toml")
EXIT_BROKEN_PIPE = 141
"""`export` to a pipe whose reader left early: what a process killed by SIGPIPE reports to its shell."""


def _identity(cfg: Config, name: str | None) -> Identity:
    """Who acts: the config's identity source applied to --operator and a browser seat's name (if any)."""
    return resolve_identity(cfg, name, os.environ.get(SEAT_ENV) or None)


def _operator(cfg: Config, name: str | None) -> str:
    return _identity(cfg, name).name


def _sender(cfg: Config, name: str | None, what: str) -> str:
    """The acting identity's name, after checking it holds the sender role `what` needs."""
    who = _identity(cfg, name)
    require_role(cfg, who, "sender", what)
    return who.name


def _fail(e: LedgerError, as_json: bool) -> typer.Exit:
    output.error(str(e), as_json=as_json, code=e.exit_code)
    return typer.Exit(e.exit_code)


def _check_text_params() -> None:
    """Refuse (BadInput) any argument or option of the running command that is not valid UTF-8.

    Python decodes undecodable argv bytes (and environment values) as lone surrogates; such text cannot
    be stored, sent or printed, so it is refused here, once for every command, naming the parameter.
    """
    ctx = get_current_context(silent=True)
    if ctx is None:
        return
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, (str, Path)):
                continue
            try:
                str(item).encode("utf-8")
            except UnicodeEncodeError:
                if param.param_type_name == "option":
                    name = param.opts[0] + (f" (or {param.envvar})" if isinstance(param.envvar, str) else "")
                else:
                    name = f"argument {(param.name or '?').upper()}"
                raise BadInput(f"{name}: not valid UTF-8 (undecodable bytes); pass it as UTF-8 text") from None


@contextmanager
def _guard(as_json: bool) -> Iterator[None]:
    """Turn ledger errors (a database's too, as the ledger's own: locked, corrupt, unusable) into one line and
    their exit code, never a traceback.

    First refuses any parameter of the running command that is not valid UTF-8 text.
    """
    try:
        _check_text_params()
        yield
    except LedgerError as e:
        raise _fail(e, as_json) from None


def _load(config: Path) -> Config:
    """Load the config, redact the secrets it names in everything printed from now on, and take the audit key
    when this account may read it (every event this process writes is then authenticated)."""
    cfg = load_config(config)
    output.use_redactor(Redactor.from_config(cfg))
    key_file = audit_key_path(cfg.key_file())
    use_audit_key(read_audit_key(key_file) if key_file is not None else None)
    return cfg


def _protect(config: Path) -> Config | None:
    """For commands that only read the ledger: redact the secrets `config` names in what they print, when
    it loads, and return it; without a usable config there is nothing to know (the ledger's text was redacted
    when written): None."""
    try:
        return _load(config)
    except LedgerError:
        return None


def _open(ledger: Path, config: Path, *, readonly: bool = False) -> tuple[Connection, Config, Clock]:
    """The ledger, the config acting under the ledger's policy (ledger.policy), and the clock leases go by."""
    cfg = _load(config)
    conn = connect(ledger, readonly=readonly)
    try:
        cfg = apply_policy(cfg, read_policy(conn))
    except BaseException:
        conn.close()
        raise
    return conn, cfg, ledger_clock(conn, process_clock())  # PostgreSQL: leases by the server's clock


def _governed(ledger: Path, config: Path) -> Config:
    """The config acting under the ledger's policy, for commands that open the ledger later (or not at all)."""
    cfg = _load(config)
    conn = connect(ledger, readonly=True)
    try:
        return apply_policy(cfg, read_policy(conn))
    finally:
        conn.close()


def _check_ledger_pages(ledger: Path, budget_seconds: float) -> None:
    conn = connect(ledger, readonly=True)
    try:
        check_pages(conn, budget_seconds)
    finally:
        conn.close()


def _within(option: str, value: float, low: float, high: float) -> None:
    """Refuse (BadInput, exit 2) an option value that is not a finite number from `low` to `high`."""
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        kind = "an integer" if isinstance(value, int) else "a number"

        def shown(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

        raise BadInput(f"{option} {value!r}: must be {kind} from {shown(low)} to {shown(high)}")


def _resolve(conn: Connection, job_id: str, operation: str | None) -> JobKey:
    if operation:
        return JobKey(job_id, operation)
    ops = operations_of(conn, job_id)
    if len(ops) == 1:
        return JobKey(job_id, ops[0])
    if not ops:
        raise BadInput(f"job {job_id!r}: not in the ledger (check the id, or pass --operation)")
    raise BadInput(f"job {job_id!r}: exists for several operations ({', '.join(ops)}); pass --operation")


def _job_row(job: Job, now: float) -> list[Any]:
    from console.live import age

    return [job.job_id, job.operation, job.state, job.target or "", job.attempt, age(now - job.created_at),
            job.owner or "", job.held_reason or job.last_error or ""]


@app.command()
def init(
    ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG, operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create the ledger file (or migrate an older one forward).

    The config is checked if present; if missing, a starter config pointing at the bundled simulator
    on 127.0.0.1:8765 is written there.
    """
    wrote_config = False
    wrote_key: Path | None = None
    with _guard(as_json):
        if config.exists():
            cfg = _load(config)
        elif config.parent.is_dir():
            config.write_text(STARTER_CONFIG.replace("{account}", json.dumps(os_account())), encoding="utf-8")
            wrote_config = True
            cfg = _load(config)
        else:
            cfg = None
        if cfg is not None and current_audit_key() is None:
            key_file = audit_key_path(cfg.key_file())
            if key_file is not None and not key_file.exists():
                use_audit_key(create_audit_key(key_file))
                wrote_key = key_file
        created = create_ledger(ledger)
        if not created:
            _check_ledger_pages(ledger, PAGE_CHECK_SECONDS)
        seeded = _seed_policy(ledger, cfg, config) if cfg is not None else "no config: the ledger holds no policy yet"
        loose = loose_permissions(ledger)
    if as_json:
        output.emit_json({"ledger": shown_ledger(ledger), "created": created, "wrote_config": wrote_config,
                          "wrote_audit_key": str(wrote_key) if wrote_key else None, "policy": seeded,
                          "permission_warnings": loose})
    else:
        if wrote_config:
            output.line(f"wrote a starter config: {config} (edit [operators] and [remotes] before real use)")
        if wrote_key:
            output.line(f"wrote the audit key: {wrote_key} (mode 0600; give it only to the accounts that send and "
                        "approve, keep a copy apart from the ledger)")
        output.line(f"{'created' if created else 'already a ledger (migrated if needed)'}: {shown_ledger(ledger)}")
        output.line(f"policy: {seeded}")
        for warning in loose:
            output.line(f"WARNING: {warning}")


def _seed_policy(ledger: Path | str, cfg: Config, config: Path) -> str:
    """Record the config's policy as the ledger's when this process is the ledger's owner and the ledger has
    none yet; check the config against it otherwise. Says what happened."""
    conn = connect(ledger)
    try:
        held = read_policy(conn)
        if held.settings is not None:
            apply_policy(cfg, held)  # a conflicting config is refused here as everywhere
            return f"the ledger's own (event {held.event_id}); 'reclaim policy show' prints it"
        owner, is_owner = policy_owner(conn, str(ledger))
        if not is_owner:
            return (f"NOT SET: only the ledger's owner ({owner}) may record it; until they run 'reclaim init' or "
                    "'reclaim policy set --from-config', every command acts under its caller's config")

        with write_tx(conn):
            event_id = record_policy(conn, cfg, actor=os_account(), now=process_clock().now(), how="init")
        return f"recorded from {config} (event {event_id}); 'reclaim policy show' prints it"
    finally:
        conn.close()


policy_app = typer.Typer(help="The ledger's policy: identity source, roles, four-eyes (its owner changes it).",
                         no_args_is_help=True)
app.add_typer(policy_app, name="policy")


@policy_app.command("show")
def policy_show(ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG,
                as_json: JsonOpt = False) -> None:
    """Print the policy the ledger holds (and who owns the ledger)."""
    _protect(config)
    with _guard(as_json):
        conn = connect(ledger, readonly=True)
        try:
            held = read_policy(conn)
            owner, _ = policy_owner(conn, str(ledger))
        finally:
            conn.close()
    if as_json:
        output.emit_json({"owner": owner, "event_id": held.event_id, "policy": held.settings})
        return
    output.line(f"ledger owner: {owner}")
    if held.settings is None:
        output.line("no policy recorded: commands act under their caller's config until the owner runs "
                    "'reclaim policy set --from-config'")
        return
    output.line(f"policy (event {held.event_id}):")
    for name in POLICY_SETTINGS:
        output.line(f"  {name} = {json.dumps(held.settings[name], ensure_ascii=False, sort_keys=True)}")


@policy_app.command("set")
def policy_set(
    from_config: Annotated[bool, typer.Option(
        "--from-config", help="Record the policy settings of --config (the shared config) as the ledger's.")] = False,
    ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG, as_json: JsonOpt = False,
) -> None:
    """Change the ledger's policy (owner only; recorded as an event): identity source, roles, four-eyes."""
    with _guard(as_json):
        if not from_config:
            raise BadInput("policy set: pass --from-config: edit [identity], [serve], [operators] and "
                           "policy.four_eyes in the shared config, then record them with it")
        cfg = _load(config)
        conn = connect(ledger)
        try:
            require_policy_owner(conn, str(ledger), "policy set")

            with write_tx(conn):
                event_id = record_policy(conn, cfg, actor=os_account(), now=process_clock().now(),
                                         how="policy set --from-config")
        finally:
            conn.close()
    if as_json:
        output.emit_json({"recorded": event_id is not None, "event_id": event_id})
    else:
        output.line(f"policy recorded (event {event_id})" if event_id is not None
                    else "policy unchanged: the config's settings are the ledger's already")


@app.command()
def submit(
    operation: Annotated[str, typer.Argument(help="A declared operation, e.g. article.generate.")],
    payload: Annotated[str, typer.Option("--payload", help=(
        "The job's JSON payload (an object): the JSON text itself, @FILE to read it from a UTF-8 file, or - to "
        "read it from stdin (at most 64 MiB either way). A JSON object starts with '{', so a value that starts "
        "with '@' or is '-' is never taken for JSON text."))],
    job_id: Annotated[str | None, typer.Option("--job-id", help="Your business key (default: hash of the spec).")] = None,
    target: Annotated[str | None, typer.Option("--target", help="What the job acts on (for hold blocking).")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reserve a job (committed first), then send it once. A duplicate sends nothing.

    Exit codes: 0 sent or duplicate, 2 bad input (a payload that is not a valid one, or an @FILE or stdin
    that cannot be read: missing, a folder, empty, not UTF-8, over 64 MiB), 3 quota exceeded, 4 held,
    5 blocked by a held job on the target, 9 reserved but not sent by this command (the send was given up,
    or the remote is paused: a worker pass sends it), 10 this command's send was taken over (fenced) and
    the job moved on without it.
    """
    with _guard(as_json):
        text = payload_text(payload)  # read before the ledger is opened: bad input there touches nothing
        conn, cfg, clock = _open(ledger, config)
        actor = _sender(cfg, operator, "submit jobs")
        from ledger import submit_now  # the remotes (and their SDKs) load only for commands that send

        res = submit_now(conn, cfg, operation, text, clock=clock, job_id=job_id, target=target, actor=actor)
    doc: dict[str, Any] = {"outcome": res.outcome, "state": res.state, "job_id": res.key.job_id,
                           "operation": res.key.operation}
    if res.blocking:
        doc["blocking"] = {"job_id": res.blocking.job_id, "operation": res.blocking.operation}
    if res.outcome == "quota_exceeded":
        doc["quota"] = {"used": res.used, "limit": res.limit}
    if as_json:
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


@app.command(name="tick")
def tick_cmd(
    ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG, operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run one worker pass and exit: recover stale sends, send due jobs, poll, deliver, notify."""
    progress, finish = _progress_for(as_json)
    try:
        with _guard(as_json):
            conn, cfg, clock = _open(ledger, config)
            _sender(cfg, operator, "run a worker pass (it sends)")
            from ledger import tick

            report = tick(conn, cfg, clock=clock, progress=progress)
    finally:
        finish()
    _print_report(report, as_json)
    raise typer.Exit(EXIT_HELD if report.held or report.orphans_held else 0)


@app.command()
def worker(
    interval: Annotated[float, typer.Option("--interval", help="Seconds between passes.")] = 1.0,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run passes until SIGINT/SIGTERM; the job under way is finished and recorded first (sender role)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            # Second signal: leave at once; what was not written is found by the next recovery pass.
            os._exit(128 + signum)
        stop.set()
        output.notice("stopping after the job under way (signal again to leave at once)")

    with _guard(as_json):
        _within("--interval", interval, 0.01, 86400)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with _guard(as_json):
        conn, cfg, clock = _open(ledger, config)
        _sender(cfg, operator, "run a worker (it sends)")
        from ledger import run_worker

        def on_outage(error: BaseException, wait: float) -> None:
            output.notice(f"the ledger is not usable now ({error}); the worker waits {wait:.3g} s and tries again")

        passes = run_worker(conn, cfg, clock=clock, stop=stop, interval=interval,
                            on_pass=(lambda r: _print_report(r, as_json)) if as_json else None, on_outage=on_outage)
    if not as_json:
        output.line(f"worker stopped after {passes} passes")


@app.command()
def status(
    ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG, operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Jobs per state and per operation, today's quota, the audit head, whether workers are passing, and who
    you are acting as."""
    with _guard(as_json):
        conn, cfg, clock = _open(ledger, config, readonly=True)
        st = read_status(conn, cfg, ledger=ledger, identity=_identity(cfg, operator), now=clock.now(),
                         page_check_seconds=PAGE_CHECK_SECONDS)
    if as_json:
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
    if not st.pages_checked:
        output.line(f"pages: not all checked for damage within {PAGE_CHECK_SECONDS:g} s; 'reclaim verify' checks them all")
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


@app.command()
def receiver(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (put TLS in front for the internet).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free one).")] = 8766,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Serve the webhook endpoint: verified deliveries become evidence; the rest get a 4xx and a counter.

    Runs as the scheduler's account (sender role): it writes to the ledger on the remote's word.
    """
    import errno

    from ledger import make_webhook_server as make_server

    with _guard(as_json):
        _within("--port", port, 0, 65535)
        cfg = _load(config)
        _sender(cfg, operator, "run the webhook receiver (it writes evidence)")
        connect(ledger).close()
        try:
            server = make_server(ledger, cfg, clock=process_clock(), host=host, port=port)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise BadInput(f"receiver: port {port} on {host} is in use; pick another with --port") from None
            raise BadInput(f"receiver: cannot listen on {host}:{port} ({e.strerror})") from None

    def on_signal(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    url = f"http://{host}:{server.server_address[1]}/"
    if as_json:
        output.emit_json({"listening": url})
    else:
        output.line(f"receiver listening on {url}")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.2)
    server.server_close()


@app.command(name="evidence")
def evidence_cmd(
    job_id: Annotated[str | None, typer.Argument(help="A job id (or --orphans).")] = None,
    orphans: Annotated[bool, typer.Option("--orphans", help="Evidence that names no job of this ledger, and why.")] = False,
    operation: OperationOpt = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What the remote said about a job (queries, webhooks, fenced outcomes), or the orphan evidence."""
    _protect(config)
    with _guard(as_json):
        conn = connect(ledger, readonly=True)
        if orphans or job_id is None:
            items = orphan_evidence(conn)
        else:
            items = evidence_for_job(conn, get_job(conn, _resolve(conn, job_id, operation)))
    if as_json:
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


@app.command()
def verify(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
    expect_head: Annotated[str | None, typer.Option(
        "--expect-head", help="COUNT:HASH, the head kept outside the ledger (status shows it, notifications carry "
                              "it): a deleted tail or a re-hashed chain no longer matches.")] = None,
) -> None:
    """Check the audit chain and (with the audit key) every event's MAC, every job against the replay of its
    events, the quota, counts, evidence, fenced writes, webhook deliveries, the triggers, and the database's
    integrity.

    Exit 0 with the head and counts, or 11 naming each kind of break found.
    """
    from ledger import parse_audit_head, verify_ledger

    cfg = _protect(config)
    verdict = None
    with _guard(as_json):
        env_key = audit_key_path(None)
        if cfg is None and env_key is not None:  # no usable config: the key file RECLAIM_AUDIT_KEY_FILE names
            use_audit_key(read_audit_key(env_key))
        try:
            head = parse_audit_head(expect_head) if expect_head is not None else None
        except ValueError as e:
            raise BadInput(f"--expect-head {e}") from None
        try:
            conn = connect(ledger, readonly=True)
        except LedgerCorrupt as e:  # damage SQLite meets on opening (the schema) is a failed check too
            damage = e.damage
        else:
            try:
                verdict = verify_ledger(conn, key=current_audit_key(), expect_head=head,
                                        timezone=cfg.timezone if cfg else "UTC")
            except LedgerCorrupt as e:  # damage met while reading: a failed check (locked: exit 8 as anywhere)
                damage = e.damage
            finally:
                conn.close()
    engine = "PostgreSQL" if is_url(str(ledger)) else "SQLite"
    if verdict is None:
        output.error(f"ledger {shown_ledger(ledger)}: {engine} cannot read it ({damage}); restore it from a backup",
                     as_json=as_json, code=EXIT_VERIFY_FAILED)
        raise typer.Exit(EXIT_VERIFY_FAILED)
    if as_json:
        output.emit_json(verdict.to_dict())
    else:
        output.line(f"events {verdict.events}, jobs {verdict.jobs}, head {verdict.events}:{verdict.head_hash or '-'}")
        for problem in (verdict.chain_break, verdict.job_mismatch, *verdict.problems, *verdict.integrity[:5]):
            if problem:
                output.line(f"BROKEN: {problem}")
        if not verdict.mac_checked:
            output.line("not checked: the events' MACs (this account cannot read the audit key; run verify as an "
                        "account that holds it, see [audit] key_file)")
        if verdict.ok:
            # SQLite checks its pages (PRAGMA integrity_check); on PostgreSQL the server's own reads of every
            # row are the check, so say only that.
            damage_check = "SQLite finds no damage" if engine == "SQLite" else "every row read back"
            macs = "every event's MAC checks, " if verdict.mac_checked else ""
            output.line(f"ok: the chain holds, {macs}every job equals the replay of its events, {damage_check}")
    raise typer.Exit(0 if verdict.ok else EXIT_VERIFY_FAILED)


@app.command()
def resume(
    remote: Annotated[str, typer.Argument(help="The paused remote, as named under [remotes].")],
    reason: ReasonOpt = "",
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Lift a remote's pause (approver): its due jobs are sent again from the next pass."""
    with _guard(as_json):
        conn, cfg, clock = _open(ledger, config)
        resume_remote(conn, cfg, remote, actor=_operator(cfg, operator), reason=reason, now=clock.now())
    if as_json:
        output.emit_json({"remote": remote, "paused": False})
    else:
        output.line(f"remote {remote} resumed: its due jobs are sent from the next worker pass")


@app.command()
def show(
    job_id: Annotated[str, typer.Argument(help="The job id.")],
    operation: OperationOpt = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every field of one job, its event history and, when its remote has one, its remote-console URL (whole)."""
    cfg = _protect(config)
    with _guard(as_json):
        conn = connect(ledger, readonly=True)
        key = _resolve(conn, job_id, operation)
        job = get_job(conn, key)
        events = job_events(conn, key)
        found = evidence_for_job(conn, job)
        arrives = may_arrive_until(conn, job)
        if arrives is not None and arrives <= ledger_clock(conn, process_clock()).now():
            arrives = None  # the moment has passed: nothing of the last request can still land
        candidates = held_candidates(conn, cfg, job) if cfg is not None else None
    url = console_url_for(cfg, job.operation, job.idem_key) if cfg is not None else None
    if as_json:
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


@app.command()
def jobs(
    group: Annotated[str, typer.Argument(help="held, reserving, submitted, done, consumed, failed or resolved.")] = "held",
    filter_text: Annotated[str, typer.Option(
        "--filter", help="Keys owner:, op:, target:, reason: (why held / last error), text:; other words match id, "
                         "operation, target and why held. E.g. 'owner:me op:article.* reason:timeout bucket'.")] = "",
    view: Annotated[str | None, typer.Option("--view", help="Use a saved view (see 'reclaim views').")] = None,
    newest_first: Annotated[bool, typer.Option("--newest-first", help="Newest first (default oldest).")] = False,
    limit: Annotated[int, typer.Option("--limit", help="Rows per page.")] = 50,
    page: Annotated[int, typer.Option("--page", help="Page number, from 1.")] = 1,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One page of a group's jobs, by age, filtered by typed terms or a saved view."""
    from ledger import GROUPS, get_view

    _protect(config)
    with _guard(as_json):
        _within("--limit", limit, 1, 1000)
        _within("--page", page, 1, 1_000_000)
        # Who you are matters only for a saved view or `owner:me`: a plain listing needs no config.
        needs_me = view is not None or "owner:me" in filter_text.split()
        me = _operator(_governed(ledger, config), operator) if needs_me else None
        conn = connect(ledger, readonly=True)
        if view is not None:
            assert me is not None
            saved = get_view(conn, me, view)
            group, filter_text = saved.group, saved.filter
        if group not in GROUPS:
            raise BadInput(f"group {group!r}: unknown (groups: {', '.join(GROUPS)})")
        rows = list_jobs(conn, group, limit=limit, offset=(page - 1) * limit, oldest_first=not newest_first,
                                 flt=JobFilter.parse(filter_text, me=me))
        now = process_clock().now()
    if as_json:
        output.emit_json({"group": group, "page": page, "jobs": [j.to_dict() for j in rows]})
        return
    output.table(f"{group} jobs (page {page})", ["job", "operation", "state", "target", "attempt", "age", "owner",
                                                  "reason / last error"], [_job_row(j, now) for j in rows],
                 ids=("job", "operation"), empty=f"{group} jobs (page {page}): none"
                 + (" match the filter" if filter_text.strip() else ""))


@app.command()
def views(
    save: Annotated[str | None, typer.Option("--save", help="Save a view under this name.")] = None,
    group: Annotated[str, typer.Option("--group", help="The view's group.")] = "held",
    filter_text: Annotated[str, typer.Option("--filter", help="The view's filter.")] = "",
    delete: Annotated[str | None, typer.Option("--delete", help="Delete the view with this name.")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List your saved views, or save / delete one (kept in the ledger, per operator)."""
    from ledger import delete_view, list_views, save_view

    with _guard(as_json):
        me = _operator(_governed(ledger, config), operator)
        conn = connect(ledger, readonly=save is None and delete is None)
        if save is not None:
            save_view(conn, me, save, group, filter_text, clock=process_clock())
        if delete is not None:
            delete_view(conn, me, delete)
        saved = list_views(conn, me)
    if as_json:
        output.emit_json([{"name": v.name, "group": v.group, "filter": v.filter} for v in saved])
        return
    if save is not None:
        output.line(f"saved view {save} for {me}: {group} jobs" + (f" matching {filter_text!r}" if filter_text else ""))
    if delete is not None:
        output.line(f"deleted view {delete} of {me}")
    output.table(f"saved views of {me}", ["name", "group", "filter"], [[v.name, v.group, v.filter] for v in saved],
                 ids=("name", "filter"), empty=f"saved views of {me}: none")


@app.command()
def quota(
    days: Annotated[int, typer.Option("--days", help="How many days back.")] = 1,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Daily operation quotas: used, limit, remaining."""
    with _guard(as_json):
        _within("--days", days, 1, 366)
        conn, cfg, clock = _open(ledger, config, readonly=True)
        hist = quota_history(conn, cfg, clock.now(), days=days)
    if as_json:
        output.emit_json({op: [{"day": d.day, "used": d.used, "limit": d.limit, "remaining": d.remaining}
                               for d in ds] for op, ds in hist.items()})
        return
    output.table("quota", ["operation", "day", "used", "limit", "remaining"],
                 [[d.operation, d.day, d.used, d.limit, d.remaining] for ds in hist.values() for d in ds])


# -- the triage commands: one per job action, built from the action table (ledger/actions.py) ---------------

DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print what it would do and whether you may, and write nothing (exit 0 allowed, 6 refused).")]


def _field_option(field: Field) -> Any:
    """The typer annotation for one of the action table's fields: a text option, blank by default (a blank one
    is refused in one line naming the option, by the table's rule, not by click's usage error)."""
    return Annotated[str, typer.Option(field.option, help=field.help)]


def _triage_command(name: str) -> Callable[..., None]:
    """The `reclaim NAME JOB_ID` command of the job action `name`: its options are the table's required fields,
    its flags, --operation, --dry-run and the common ones; every run goes through `_take`."""
    spec = ACTION_TABLE[name]
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("job_id", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=Annotated[str, typer.Argument(help="The job id.")])]
    params += [inspect.Parameter(f.name, kw, default="", annotation=_field_option(f)) for f in spec.fields]
    params.append(inspect.Parameter("operation", kw, default=None, annotation=OperationOpt))
    params += [inspect.Parameter(flag, kw, default=False, annotation=Annotated[bool, typer.Option(option, help=what)])
               for flag, option, what in spec.flags]
    params += [
        inspect.Parameter("dry_run", kw, default=False, annotation=DryRunOpt),
        inspect.Parameter("ledger", kw, default=DEFAULT_LEDGER, annotation=LedgerOpt),
        inspect.Parameter("config", kw, default=DEFAULT_CONFIG, annotation=ConfigOpt),
        inspect.Parameter("operator", kw, default=None, annotation=OperatorOpt),
        inspect.Parameter("as_json", kw, default=False, annotation=JsonOpt),
    ]

    def command(**options: Any) -> None:
        _take(name, options)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name
    command.__doc__ = (f"{spec.help}\n\nIt {spec.summary}. With --dry-run it says that, and whether you may, and "
                       "writes nothing.")
    return command


def _take(name: str, options: dict[str, Any]) -> None:
    """Run one job action from the CLI: the table's required fields first (one line naming the option), then the
    ledger function itself (or, with --dry-run, `triage.dry_run` on a read-only connection)."""
    from ledger import RemoteCache, parse_due

    spec = ACTION_TABLE[name]
    as_json, dry = options["as_json"], options["dry_run"]
    unverified = bool(options.get("unverified", False))
    given: dict[str, Any] = {f.name: options[f.name] for f in spec.fields}
    with _guard(as_json):
        check_action_input(name, given)
        conn, cfg, clock = _open(options["ledger"], options["config"], readonly=dry)
        if "due" in given:
            given["due"] = parse_due(given["due"], clock.now(), cfg.timezone, name="--due")
        actor = _operator(cfg, options["operator"])
        key = _resolve(conn, options["job_id"], options["operation"])
        asks = (name == "reconcile" and not unverified) or (name == "query" and not dry)
        remote = RemoteCache(cfg).for_operation(key.operation) if asks else None
        if dry:
            would = dry_run_action(conn, cfg, key, name, given, actor=actor, clock=clock, remote=remote,
                                   unverified=unverified)
        else:
            result = take(conn, cfg, key, name, given, actor=actor, clock=clock, remote=remote,
                                 unverified=unverified)
        job = get_job(conn, key)
        left = held_candidates(conn, cfg, job) if name == "dismiss-candidate" and not dry else []
    doc: dict[str, Any] = {"job_id": key.job_id, "operation": key.operation, "state": job.state,
                           "attempt": job.attempt}
    if dry:
        shown = {**given, **({"due": iso(given["due"])} if "due" in given else {})}
        _print_dry_run(name, doc, would, spec.describe(shown), shown, as_json)
        raise typer.Exit(0 if would.allowed else EXIT_REFUSED)
    doc.update(_what_was_done(name, actor, given, result, job, unverified))
    if name == "dismiss-candidate":
        doc["candidates_left"] = [c.evidence_id for c in left]
    if name == "query" and remote is not None:
        doc["can_answer"] = remote.capabilities.explain()
    if as_json:
        output.emit_json(doc)
    else:
        from console.words import action_line

        output.line(action_line(name, {**doc, "due_at": given.get("due")}, now=clock.now(), tz=cfg.timezone))


def _what_was_done(name: str, actor: str, given: dict[str, Any], result: Any, job: Job,
                   unverified: bool) -> dict[str, Any]:
    """The facts a triage command reports after writing (its `--json` document beyond the job's key and state):
    the action, who took it, the event it wrote, and what was recorded (a query: what the remote said)."""
    doc: dict[str, Any] = {"action": name, "actor": actor}
    if name == "query":
        return {**doc, "remote_state": result.state, "handle": result.handle, "error": result.error,
                "asked": result.snapshot.get("asked", True) is not False}
    doc["event_id"] = result.event_id
    if name == "finding":
        doc.update(category=given["category"], note=given["note"])
    elif name == "assign":
        doc.update(owner=given["owner"], due=iso(given["due"]), reason=given["reason"])
    elif name == "reconcile":
        doc.update(handle=job.handle, verified=not unverified, reason=given["reason"])
    elif name == "remediate":
        doc.update(note=given["note"])
    elif name == "dismiss-candidate":
        doc.update(evidence_id=int(str(given["evidence"]).strip().removeprefix("evidence:")), reason=given["reason"])
    else:
        doc.update(reason=given["reason"])
    return doc


def _print_dry_run(name: str, doc: dict[str, Any], would: Preview, words: list[str], given: dict[str, Any],
                   as_json: bool) -> None:
    """A dry run's answer: what the action would do (the console's preview text), the input, and whether it
    would be allowed or why not."""
    if as_json:
        output.emit_json({**doc, "action": name, "dry_run": True, "would": would.summary, "allowed": would.allowed,
                          "refusal": would.reason, "input": given})
        return
    output.line(f"dry run: {name} {doc['job_id']} / {doc['operation']} ({doc['state']}); nothing was written")
    output.line(f"would: {would.summary}")
    for said in words:
        output.line(f"  {said}")
    output.line("allowed" if would.allowed else f"refused: {would.reason}")


for _name in ("query", "finding", "dismiss-candidate", "assign"):
    app.command(name=_name)(_triage_command(_name))

_BULK = {f.name: f for f in ACTION_TABLE["bulk-assign"].fields}
BulkOwnerOpt = _field_option(_BULK["owner"])
BulkDueOpt = _field_option(_BULK["due"])
BulkReasonOpt = _field_option(_BULK["reason"])


@app.command(name="bulk-assign", help=ACTION_TABLE["bulk-assign"].help + "\n\nWithout --yes it only says how many "
             "jobs would change, and writes nothing.")
def bulk_assign(
    owner: BulkOwnerOpt = "",
    due: BulkDueOpt = "",
    filter_text: Annotated[str, typer.Option("--filter", help="Which held jobs, e.g. 'op:storage.* bucket-a'.")] = "",
    yes: Annotated[bool, typer.Option("--yes", help="Do it; without --yes only the count is shown.")] = False,
    reason: BulkReasonOpt = "",
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from ledger import parse_due

    with _guard(as_json):
        check_action_input("bulk-assign", {"reason": reason, "owner": owner, "due": due})
        conn, cfg, clock = _open(ledger, config, readonly=not yes)
        due_at = parse_due(due, clock.now(), cfg.timezone, name="--due")
        me = _operator(cfg, operator)
        flt = JobFilter.parse(filter_text, me=me)
        done = assign_jobs(conn, cfg, flt, owner, due_at, actor=me, clock=clock, reason=reason, apply=yes)
    doc = {"matched": len(done.matched), "assigned": done.assigned, "owner": owner, "due": iso(due_at)}
    if as_json:
        output.emit_json(doc)
    elif yes:
        output.line(f"assigned {done.assigned} held jobs to {owner}, due {iso(due_at)}")
    else:
        output.line(f"would assign {len(done.matched)} held jobs to {owner}, due {iso(due_at)}; run again with --yes")


for _name in ("release", "reconcile", "reject", "remediate"):
    app.command(name=_name)(_triage_command(_name))


@app.command()
def events(
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C.")] = False,
    after: Annotated[int, typer.Option("--after", help="Start after this event id.")] = -1,
    limit: Annotated[int, typer.Option("--limit", help="How many recent events without --after.")] = 20,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the event log (newest `limit`, or after an id), and follow it with --follow.

    Following prints every event committed later exactly once, in id order, within about 0.1 s (see
    ledger.follow: the wake-up never depends on a later commit).
    """
    _protect(config)
    with _guard(as_json):
        _within("--after", after, -1, 2**63 - 1)
        _within("--limit", limit, 1, 10_000)
        conn = connect(ledger, readonly=True)
        check_pages(conn, PAGE_CHECK_SECONDS)
        events = EventCursor(conn, after=max(after, 0))
        batch = events.poll(limit=10_000) if after >= 0 else events.tail(limit)

    def show_batch(evs: list[Event]) -> None:
        for e in evs:
            if as_json:
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
                wait_for_change(conn, FOLLOW_POLL_SECONDS)  # PostgreSQL: woken at once by NOTIFY
            with _guard(as_json):
                batch = events.poll(limit=10_000)
            show_batch(batch)
    except KeyboardInterrupt:
        return


@app.command(name="export")
def export_cmd(
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
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
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
        export_rows,
        export_snapshot,
        parse_export_states,
    )

    cfg = _protect(config)
    redactor = Redactor.from_config(cfg) if cfg is not None else Redactor()
    with _guard(False):
        chosen = choose_format(fmt, output_to)
        me = _operator(_governed(ledger, config), operator) if "owner:me" in filter_text.split() else None
        now = process_clock().now()
        flt = ExportFilter(
            states=parse_export_states(state or []), operation=operation, target=target, job_id=job,
            since=parse_when(since, now, name="--since") if since is not None else None,
            until=parse_when(until, now, name="--until") if until is not None else None,
            after_id=after, typed=JobFilter.parse(filter_text, me=me) if filter_text.strip() else None,
        )
        check_export_filter(what, flt)
        dest = check_target(output_to, force=force, ledger=ledger)
        terminal = dest.path is None and sys.stdout.isatty()
        redactions = 0

        def source(conn: Connection) -> Iterator[dict[str, Any]]:
            nonlocal redactions
            for row in export_rows(conn, what, flt):
                row, changed = export_redacted(row, redactor)
                redactions += changed
                yield row

        conn = connect(ledger, readonly=True)
        try:
            with export_snapshot(conn) as anchor, opened(dest) as out, closing(source(conn)) as rows:
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
            conn.close()
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
        note += f"; config {config} not read, so no secret was looked for (the ledger's text was redacted when written)"
    if terminal and chosen == "csv":
        note += "; control characters shown escaped for the terminal"
    output.notice(f"exported {written} {what if written != 1 else what[:-1]} as {chosen} to {dest.shown}; audit head at export: "
                  f"{anchor.events} events, hash {anchor.head_hash or '-'}{note}")


@app.command()
def notifications(
    ledger: LedgerOpt = DEFAULT_LEDGER, config: ConfigOpt = DEFAULT_CONFIG, operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The notification outbox, uncertain ones first."""
    from ledger import list_outbox

    _protect(config)
    with _guard(as_json):
        conn = connect(ledger, readonly=True)
        rows = list_outbox(conn)
    if as_json:
        output.emit_json(rows)
        return
    output.table("notifications", ["event id", "channel", "job", "kind", "state", "tries", "last error"],
                 [[r["event_id"], r["channel"], f"{r['job_id']} / {r['operation']}", r["kind"], r["state"],
                   r["tries"], r["last_error"]] for r in rows], ids=("event id", "job"),
                 empty="notifications: none (the outbox is empty)")


@app.command(name="notification")
def notification_cmd(
    event_id: Annotated[str, typer.Argument(help="The notification's event id.")],
    decision: Annotated[str, typer.Option("--mark", help="confirmed (triage) or resend (approver).")],
    note: Annotated[str, typer.Option("--note")] = "",
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Settle an uncertain notification: confirmed received, or sent again by another route."""
    from ledger import resolve_uncertain

    with _guard(as_json):
        conn, cfg, clock = _open(ledger, config)
        actor = _operator(cfg, operator)
        resolve_uncertain(conn, cfg, event_id, decision, actor=actor, clock=clock, note=note)
    if as_json:
        output.emit_json({"event_id": event_id, "decision": decision, "actor": actor, "note": note})
    else:
        said = {"confirmed": "confirmed received", "resend": "sent again by another route"}.get(decision, decision)
        output.line(f"notification {event_id} marked {said} as {actor}" + (f": \"{note}\"" if note else "")
                    + "; nothing was sent")


@app.command()
def simulator(
    port: Annotated[int, typer.Option("--port", help="Port (0 picks a free one).")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Loopback address only.")] = "127.0.0.1",
    complete_after: Annotated[float, typer.Option("--complete-after", help="Seconds until a job completes.")] = 0.0,
    fault_rate: Annotated[list[str] | None, typer.Option("--fault-rate", help="kind=rate, repeatable.")] = None,
    seed: Annotated[int | None, typer.Option("--seed")] = None,
) -> None:
    """Serve the loopback simulator of the Gemini Interactions API (and a clean-up API) until Ctrl-C."""
    from ledger import simulator as sim

    with _guard(False):
        _within("--port", port, 0, 65535)
        _within("--complete-after", complete_after, 0, 86400)
        if seed is not None:
            _within("--seed", seed, 0, 2**63 - 1)
    argv = ["--host", host, "--port", str(port), "--complete-after", str(complete_after)]
    for fr in fault_rate or []:
        argv += ["--fault-rate", fr]
    if seed is not None:
        argv += ["--seed", str(seed)]
    try:
        code = sim.main(argv)
    except OSError as e:
        import errno

        if e.errno != errno.EADDRINUSE:
            raise
        raise _fail(BadInput(f"simulator: port {port} on {host} is in use; pick another with --port or use --port 0"),
                    False) from None
    raise typer.Exit(code)


@app.command()
def console(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Open the ledger read-only; no actions.")] = False,
    job: Annotated[str | None, typer.Option(
        "--job", help="Open this job's screen once the console is up (when it is in the ledger).")] = None,
    operation: OperationOpt = None,
) -> None:
    """Open the operator console (Textual) over a live ledger (--job: straight to one job, as a seat link does)."""
    from console.app import run_console

    with _guard(False):
        if job is not None:
            check_link_part("--job", job)
        if operation is not None:
            check_link_part("--operation", operation)
        cfg = _governed(ledger, config)
        _check_ledger_pages(ledger, CONSOLE_PAGE_CHECK_SECONDS)  # a corrupt file stops here, before the UI
        run_console(ledger, cfg, _identity(cfg, operator), read_only, config_path=config,
                    start_job=(job, operation) if job is not None else None)


@app.command()
def serve(
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    listen: Annotated[str | None, typer.Option(
        "--listen", help="Loopback HOST:PORT to listen on (port 0: a free one), behind the proxy.")] = None,
    socket: Annotated[Path | None, typer.Option(
        "--socket", help="Unix socket to listen on (list it in [serve] trusted_proxies as unix:PATH).")] = None,
) -> None:
    """The browser seat: one console per browser connection, as the user an authenticating proxy names."""
    with _guard(False):
        cfg = _governed(ledger, config)
        if cfg.identity_source != "proxy":
            raise BadInput(f"serve: this config's [identity] source is {cfg.identity_source!r}; the browser seat "
                           "needs source = \"proxy\" with [serve] account, trusted_proxies and allowed_origins")
        account = os_account()
        if account != cfg.serve.account:
            raise BadInput(f"serve: runs only as the seat account [serve] account = {cfg.serve.account!r}, not as "
                           f"{account!r} (e.g. sudo -u {cfg.serve.account} reclaim serve ...)")
        if not cfg.serve.trusted_proxies or not cfg.serve.allowed_origins:
            raise BadInput("serve: [serve] trusted_proxies and allowed_origins must each name at least one entry")
        if (listen is None) == (socket is None):
            raise BadInput("serve: give exactly one of --listen 127.0.0.1:PORT or --socket /path/seat.sock")
        from console.serve import Seat, parse_listen, run

        host, port = parse_listen(listen) if listen is not None else (None, None)
        sock = socket.absolute() if socket is not None else None
        if sock is not None and f"unix:{sock}" not in cfg.serve.trusted_proxies:
            output.stderr.print(f"reclaim serve: note: unix:{sock} is not in [serve] trusted_proxies; every "
                                "request will be refused", markup=False, highlight=False)
        _check_ledger_pages(ledger, CONSOLE_PAGE_CHECK_SECONDS)
        seat = Seat(ledger.absolute(), config.absolute(), cfg, socket_path=sock)
        import asyncio

        def announce(line: str) -> None:
            output.line(line)
            sys.stdout.flush()

        try:
            asyncio.run(run(seat, host=host, port=port, socket_path=sock, announce=announce))
        except OSError as e:
            raise BadInput(f"serve: cannot listen on {listen or sock}: {e.strerror}") from None


remotes_app = typer.Typer(add_completion=False)
app.add_typer(remotes_app, name="remotes")


@remotes_app.callback(invoke_without_command=True)
def remotes_cmd(
    ctx: typer.Context,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What each remote can answer: lookup by key or by handle, idem key honoured, webhooks, record retention,
    paused or not, last probe, last answer (read-only; no remote is called). `remotes probe NAME` checks a
    gemini remote's assumptions against the live service."""
    if ctx.invoked_subcommand is not None:
        return
    from ledger import what_remotes_answer

    with _guard(as_json):
        conn, cfg, clock = _open(ledger, config, readonly=True)
        try:
            found = what_remotes_answer(conn, cfg, clock.now())
        finally:
            conn.close()
    if as_json:
        output.emit_json({"remotes": [a.to_dict() for a in found]})
        return

    def when(ts: float | None) -> str:
        return iso(ts) if ts is not None else "-"

    for a in found:
        output.table(f"remote {a.name} ({a.kind}): what it can answer", ["question", "answer"], [
            ["operations", ", ".join(a.operations) or "-"],
            ["look a job up", a.lookup],
            ["idem key honoured", "yes" if a.dedupes_by_key else "no (a repeat may run twice)"],
            ["webhooks", a.webhooks + (f", last {iso(a.last_webhook_at)}" if a.last_webhook_at else "")],
            ["keeps records", f"{a.keeps_records_days} days" if a.keeps_records_days else "not declared"],
            ["paused", f"since {iso(a.paused_at)}: {a.pause_reason}" if a.paused and a.paused_at else "no"],
            ["last probe / next", f"{when(a.last_probe_at)} / {when(a.next_probe_at)}"],
            ["last answer", f"{when(a.last_answer_at)} ({a.last_answer_source})" if a.last_answer_at else "-"],
        ])


PROBE_WAIT_LIMIT = 3600.0
"""The longest --wait `remotes probe` takes (seconds)."""


@remotes_app.command(name="probe")
def remotes_probe_cmd(
    name: Annotated[str, typer.Argument(help="The gemini remote to probe, by its name in the config.")],
    wait: Annotated[float, typer.Option(
        "--wait", help="Seconds to wait for the webhook delivery to reach the ledger (a remote with "
        "webhook_secret_env; `reclaim receiver` must be running).")] = PROBE_WAIT_SECONDS,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    as_json: JsonOpt = False,
) -> None:
    """Check against the live remote every assumption reclaim makes of it: costs one tiny interaction.

    One create (a tiny input, background, labelled with a fresh probe-... idem key that names no job; never
    retried), cancelled at once, a GET of it, a GET of an id that does not exist, and with a webhook configured
    the wait for its delivery through `reclaim receiver`. Prints each assumption (create accepted with labels,
    GET echoes labels, statuses, cancel, error body, delivery, envelope, signature) as holds / does not hold /
    unknown, and whether this config relies on it. Reserves nothing and writes nothing to the ledger.

    Exit 0 when every assumption this config relies on holds, 13 when one does not (or could not be seen),
    2 for a remote that is not declared or not a gemini one (nothing sent)."""
    from ledger import probe_remote

    with _guard(as_json):
        _within("--wait", wait, 0, PROBE_WAIT_LIMIT)
        # An undeclared or non-gemini remote, a missing key, or (with a webhook) an unreadable ledger is refused
        # before anything is sent.
        report = probe_remote(_load(config), name, ledger=ledger, wait_seconds=wait, notice=output.notice)
    failing = [a.name for a in report.failing]
    if as_json:
        output.emit_json(report.to_dict())
    else:
        output.table(f"remote {report.remote}: what reclaim assumes (probe {report.idem_key}, interaction "
                     f"{report.handle or '-'})", ["assumption", "verdict", "relied on", "seen"],
                     [[a.name, a.verdict, "yes" if a.relied_on else "no", a.seen] for a in report.assumptions])
        if failing:
            output.line(f"not holding, and this config relies on it: {'; '.join(failing)}")
        else:
            output.line("every assumption this config relies on holds")
    raise typer.Exit(EXIT_PROBE_FAILED if failing else 0)


REPORT_SINCE = "7d"
"""The report's window when --since is not given."""


@app.command(name="report")
def report_cmd(
    since: Annotated[str | None, typer.Option(
        "--since", help="The window's start: ISO time, epoch seconds, or 7d, 12h back (default: 7d).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="The window's end (same forms; default: now).")] = None,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the figures as CSV rows (scope, name, figure, key, "
                                         "value).")] = False,
    to: Annotated[str | None, typer.Option(
        "--to", help="Write the history (jobs, events, holds, decisions, findings) to this new SQLite file instead; "
        "the whole history unless --since/--until are given.")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --to: replace the file when it exists.")] = False,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """How holds came about and ended over a window, per operation and per remote (read-only).

    For the holds begun in the window: their cause, how each ended by the window's end (on the remote's evidence,
    reconciled / released / rejected / remediated by a person, still open) and the time to decision (p50, p90,
    max); releases authorised and what their next attempt came to; remote queries and what they could answer;
    quota used per day. --to FILE writes the history as a SQLite file to explore instead."""
    from ledger import REPORT_CSV_COLUMNS, build_report, history_destination, write_history

    with _guard(as_json):
        if as_json and as_csv:
            raise BadInput("report: give --json or --csv, not both")
        if to is None and force:
            raise BadInput("report: --force only applies to --to FILE")
        conn, cfg, clock = _open(ledger, config, readonly=True)
        try:
            now = clock.now()
            start = parse_when(since or REPORT_SINCE, now, name="--since")
            end = parse_when(until, now, name="--until") if until is not None else now
            if to is not None:
                windowed = since is not None or until is not None
                if windowed and start >= end:
                    raise BadInput(f"--since {iso(start)} is not before --until {iso(end)}; give an earlier --since")
                dest = history_destination(to, force=force, ledger=ledger)
                window = (start, end) if windowed else (None, None)
                written = write_history(conn, cfg, dest, since=window[0], until=window[1],
                                        redactor=Redactor.from_config(cfg), replace=force)
            else:
                built = build_report(conn, cfg, start, end)
        finally:
            conn.close()
    if to is not None:
        summary = {"to": str(written.path), "rows": written.rows, "events_in_ledger": written.events_in_ledger,
                   "head_hash": written.head_hash}
        if as_json:
            output.emit_json(summary)
        else:
            counts = ", ".join(f"{n:,} {t}" for t, n in written.rows.items())
            output.line(f"history written to {written.path}: {counts}")
        return
    if as_json:
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


@app.command(name="metrics")
def metrics_cmd(
    listen: Annotated[str | None, typer.Option(
        "--listen", help="Serve /metrics on this loopback HOST:PORT (port 0: a free one) instead of printing once.")] = None,
    ledger: LedgerOpt = DEFAULT_LEDGER,
    config: ConfigOpt = DEFAULT_CONFIG,
    operator: OperatorOpt = None,
    as_json: JsonOpt = False,
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

    with _guard(as_json):
        address = metrics_listen_address(listen) if listen is not None else None
        cfg = _load(config)
        connect(ledger, readonly=True).close()  # a missing or unusable ledger is refused before anything else
        collector = LedgerCollector(lambda: connect(ledger, readonly=True, check_same_thread=False), cfg,
                                            process_clock(), journal_of=str(ledger), strict=True)
        registry = metrics_registry(collector)
        if address is None:
            try:
                if as_json:
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
    if as_json:
        output.emit_json({"listening": url})
    else:
        output.line(f"metrics listening on {url}")
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    collector.close()


def main() -> None:
    """Entry point of the `reclaim` script."""
    app()



@app.command()
def demo(
    folder: Annotated[Path, typer.Option("--dir", help="Where the demo writes its config, ledger and results.")] = Path(
        "demo"
    ),
    no_ui: Annotated[bool, typer.Option("--no-ui", help="Run headless for --seconds, then stop.")] = False,
    seconds: Annotated[float, typer.Option("--seconds", help="How long --no-ui runs.")] = 10.0,
    operator: Annotated[str, typer.Option("--operator", help="The console's seat: alice (triage) or bob.")] = "alice",
    rate: Annotated[float, typer.Option("--rate", help="New jobs per second.")] = 0.3,
    pg: Annotated[str | None, typer.Option("--pg", help="Put the ledger in this PostgreSQL database "
                                           "(a postgresql:// URL; `make demo-pg` starts a throwaway one).")] = None,
    workers: Annotated[int, typer.Option("--workers", help="Worker processes (the first also makes jobs).")] = 1,
) -> None:
    """Start a simulator and a worker with a job generator, open the console; stop them on quit."""
    from console.demo import ledger_holders, run_demo
    from ledger import LedgerLocked

    with _guard(False):
        _within("--seconds", seconds, 0.1, 86400)
        _within("--rate", rate, 0.01, 100)
        _within("--workers", workers, 1, 16)
        if pg is not None and not is_url(pg):
            raise BadInput(f"--pg {pg!r}: not a postgresql:// URL")
        holders = ledger_holders(folder / "reclaim.db") if pg is None else []
        if holders:
            pid, argv = holders[0]
            more = f" and {len(holders) - 1} more process(es)" if len(holders) > 1 else ""
            raise LedgerLocked(
                f"demo: {folder / 'reclaim.db'} is open in process {pid} ({argv[:120]}){more}: a console, seat or "
                f"demo still uses it; quit it first, or start another demo beside it with --dir "
                f"{folder.name or 'demo'}-2; nothing was removed")
        for old in ("reclaim.db", "reclaim.db-wal", "reclaim.db-shm", "reclaim.db.outcomes") if pg is None else ():
            if (folder / old).exists():
                (folder / old).unlink()
                output.line(f"demo: removed the previous demo ledger {folder / old}; starting fresh")
    raise typer.Exit(run_demo(folder, ui=not no_ui, seconds=seconds, operator=operator, rate=rate, ledger_url=pg,
                              workers=workers))
