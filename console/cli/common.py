"""What every `reclaim` command shares: the app, the common options, opening the ledger and the config, who
acts, and turning the ledger's errors into one line and an exit code (`guard`)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

try:  # typer vendors click as typer._click (0.2x); before that it used click itself
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import get_current_context

from console import output
from ledger import (
    SEAT_ENV,
    BadInput,
    Clock,
    Config,
    Connection,
    Identity,
    JobKey,
    LedgerError,
    Redactor,
    apply_policy,
    audit_key_path,
    check_pages,
    connect,
    is_url,
    ledger_clock,
    load_config,
    operations_of,
    process_clock,
    read_audit_key,
    read_policy,
    require_role,
    resolve_identity,
    use_audit_key,
)

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


DEFAULT_LEDGER = Path("reclaim.db")
PAGE_CHECK_SECONDS = 1.0  # status and events check the ledger's pages for damage for at most this long
DEFAULT_CONFIG = Path("reclaim.toml")


def acting_identity(cfg: Config, name: str | None) -> Identity:
    """Who acts: the config's identity source applied to --operator and a browser seat's name (if any)."""
    return resolve_identity(cfg, name, os.environ.get(SEAT_ENV) or None)


def operator_name(cfg: Config, name: str | None) -> str:
    return acting_identity(cfg, name).name


def sender_name(cfg: Config, name: str | None, what: str) -> str:
    """The acting identity's name, after checking it holds the sender role `what` needs."""
    who = acting_identity(cfg, name)
    require_role(cfg, who, "sender", what)
    return who.name


def fail(e: LedgerError, as_json: bool) -> typer.Exit:
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
def guard(as_json: bool) -> Iterator[None]:
    """Turn ledger errors (a database's too, as the ledger's own: locked, corrupt, unusable) into one line and
    their exit code, never a traceback.

    First refuses any parameter of the running command that is not valid UTF-8 text.
    """
    try:
        _check_text_params()
        yield
    except LedgerError as e:
        raise fail(e, as_json) from None


def load(config: Path) -> Config:
    """Load the config, redact the secrets it names in everything printed from now on, and take the audit key
    when this account may read it (every event this process writes is then authenticated)."""
    cfg = load_config(config)
    output.use_redactor(Redactor.from_config(cfg))
    key_file = audit_key_path(cfg.key_file())
    use_audit_key(read_audit_key(key_file) if key_file is not None else None)
    return cfg


def protect(config: Path) -> Config | None:
    """For commands that only read the ledger: redact the secrets `config` names in what they print, when
    it loads, and return it; without a usable config there is nothing to know (the ledger's text was redacted
    when written): None."""
    try:
        return load(config)
    except LedgerError:
        return None


def open_ledger(ledger: Path, config: Path, *, readonly: bool = False) -> tuple[Connection, Config, Clock]:
    """The ledger, the config acting under the ledger's policy (ledger.policy), and the clock leases go by."""
    cfg = load(config)
    conn = connect(ledger, readonly=readonly)
    try:
        cfg = apply_policy(cfg, read_policy(conn))
    except BaseException:
        conn.close()
        raise
    return conn, cfg, ledger_clock(conn, process_clock())  # PostgreSQL: leases by the server's clock


def governed_config(ledger: Path, config: Path) -> Config:
    """The config acting under the ledger's policy, for commands that open the ledger later (or not at all)."""
    cfg = load(config)
    conn = connect(ledger, readonly=True)
    try:
        return apply_policy(cfg, read_policy(conn))
    finally:
        conn.close()


def check_ledger_pages(ledger: Path, budget_seconds: float) -> None:
    conn = connect(ledger, readonly=True)
    try:
        check_pages(conn, budget_seconds)
    finally:
        conn.close()


def within(option: str, value: float, low: float, high: float) -> None:
    """Refuse (BadInput, exit 2) an option value that is not a finite number from `low` to `high`."""
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        kind = "an integer" if isinstance(value, int) else "a number"

        def shown(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

        raise BadInput(f"{option} {value!r}: must be {kind} from {shown(low)} to {shown(high)}")


def resolve_key(conn: Connection, job_id: str, operation: str | None) -> JobKey:
    if operation:
        return JobKey(job_id, operation)
    ops = operations_of(conn, job_id)
    if len(ops) == 1:
        return JobKey(job_id, ops[0])
    if not ops:
        raise BadInput(f"job {job_id!r}: not in the ledger (check the id, or pass --operation)")
    raise BadInput(f"job {job_id!r}: exists for several operations ({', '.join(ops)}); pass --operation")
