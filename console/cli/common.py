"""What every `reclaim` command shares: the app, the common options (`--ledger`, `--config`, `--operator`,
`--json`) given to each command as one `Session`, opening the ledger and the config, who acts, and turning the
ledger's errors into one line and an exit code (`guard`, run around every command by `command`)."""

from __future__ import annotations

import functools
import inspect
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

try:  # typer vendors click as typer._click (0.2x); before that it used click itself
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover
    from click import get_current_context

from console import output
from ledger import (
    SEAT_ENV,
    BadInput,
    Config,
    Connection,
    Identity,
    Ledger,
    LedgerError,
    Redactor,
    audit_key_path,
    connect,
    is_url,
    load_config,
    os_account,
    read_audit_key,
    read_signing_key,
    require_role,
    resolve_identity,
    signing_key_path,
    use_audit_key,
    use_signer,
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
DEFAULT_CONFIG = Path("reclaim.toml")


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


@dataclass(frozen=True)
class Session:
    """The common options one run of a command was given, and what commands do with them: open the ledger,
    load the config, name who acts. A command that does not take an option gets its default here."""

    ledger: Path | str = DEFAULT_LEDGER
    config: Path = DEFAULT_CONFIG
    operator: str | None = None
    as_json: bool = False

    def load(self) -> Config:
        """Load the config, redact the secrets it names in everything printed from now on, and take this
        account's signing key (and an older ledger's audit key) when it may read them: every event this process
        writes is then signed (ledger.signing)."""
        cfg = load_config(self.config)
        output.use_redactor(Redactor.from_config(cfg))
        key_file = audit_key_path(cfg.key_file())
        use_audit_key(read_audit_key(key_file) if key_file is not None else None)
        use_signer(read_signing_key(signing_key_path(), os_account()))
        return cfg

    def protect(self) -> Config | None:
        """For commands that only read the ledger: redact the secrets the config names in what they print, when
        it loads, and return it; without a usable config there is nothing to know (the ledger's text was redacted
        when written): None."""
        try:
            return self.load()
        except LedgerError:
            return None

    def connect(self, *, readonly: bool = False, **options: Any) -> Connection:
        """The ledger, without its policy or the config (`options` go to `ledger.connect`)."""
        return connect(self.ledger, readonly=readonly, **options)

    def open_ledger(self, *, readonly: bool = False, config: Config | None = None) -> Ledger:
        """The ledger open with the config (`config`, already loaded by `load`; else loaded now) acting under its
        policy, and the clock leases go by (`ledger.Ledger`)."""
        return Ledger.open(self.ledger, config if config is not None else self.load(), readonly=readonly)

    def read_ledger(self, config: Config | None) -> Ledger:
        """The ledger open read-only for a command that only reads it, with `config` as `protect` loaded it (no
        one acts, so no policy is applied; None: a config that declares nothing)."""
        return Ledger.read(self.ledger, config)

    def governed_config(self) -> Config:
        """The config acting under the ledger's policy, for commands that open the ledger later (or not at all)."""
        return Ledger.governed_config(self.ledger, self.load())

    def check_opening(self) -> None:
        """The checks of opening (header, schema, the newest event: `ledger.opening`): a damaged file stops here."""
        with Ledger.read(self.ledger) as reading:
            reading.check_opening()

    def identity(self, cfg: Config) -> Identity:
        """Who acts: the config's identity source applied to --operator and a browser seat's name (if any)."""
        return resolve_identity(cfg, self.operator, os.environ.get(SEAT_ENV) or None)

    def actor(self, cfg: Config) -> str:
        """The acting identity's name."""
        return self.identity(cfg).name

    def sender(self, cfg: Config, what: str) -> str:
        """The acting identity's name, after checking it holds the sender role `what` needs."""
        who = self.identity(cfg)
        require_role(cfg, who, "sender", what)
        return who.name


COMMON_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "ledger": ("ledger", LedgerOpt, DEFAULT_LEDGER),
    "config": ("config", ConfigOpt, DEFAULT_CONFIG),
    "operator": ("operator", OperatorOpt, None),
    "json": ("as_json", JsonOpt, False),
}
"""Each common option a command may ask for: its parameter (the `Session` field), its typer annotation, its
default. A command's `--help` lists the ones it asks for after its own, in this order."""
ALL_OPTIONS = tuple(COMMON_OPTIONS)


def with_session(options: tuple[str, ...] = ALL_OPTIONS) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Make a command function typer can run: its parameter annotated `Session` (if any) is replaced by the
    common `options` it asks for (keyword-only, after its own), given back to it as one `Session`; and its body
    runs inside `guard` (the UTF-8 check of every parameter, the ledger's errors as one line and an exit code).

    A command that asks for no option may take no `Session`. `typer.Exit` passes through `guard` untouched.
    """
    unknown = [o for o in options if o not in COMMON_OPTIONS]
    if unknown:
        raise ValueError(f"with_session: unknown common options {unknown}; known: {list(COMMON_OPTIONS)}")
    asked = [COMMON_OPTIONS[o] for o in COMMON_OPTIONS if o in options]  # always in the order of COMMON_OPTIONS

    def decorate(fn: Callable[..., None]) -> Callable[..., None]:
        own = list(inspect.signature(fn, eval_str=True).parameters.values())  # honours a built __signature__
        takes = [p.name for p in own if p.annotation is Session]
        if len(takes) > 1 or (asked and not takes):
            raise TypeError(f"{fn.__name__}: a command asking for common options takes exactly one Session")
        own = [p for p in own if p.annotation is not Session]
        clash = {p.name for p in own} & {field for field, _, _ in asked}
        if clash:
            raise TypeError(f"{fn.__name__}: its own parameters {sorted(clash)} clash with the common options")
        kw = inspect.Parameter.KEYWORD_ONLY
        params = own + [inspect.Parameter(field, kw, default=default, annotation=annotation)
                        for field, annotation, default in asked]

        @functools.wraps(fn)
        def run(**given: Any) -> None:
            session = Session(**{field: given.pop(field) for field, _, _ in asked})
            with guard(session.as_json):
                if takes:
                    given[takes[0]] = session
                fn(**given)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


def command(panel: str | None = None, *, name: str | None = None, options: tuple[str, ...] = ALL_OPTIONS,
            on: typer.Typer = app, **settings: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a command function on `on` (the app, or a command group) as `with_session(options)` makes it,
    listed under `panel` in the group's --help. `settings` go to `Typer.command` as given (e.g. `help`)."""

    listed = {"rich_help_panel": panel} if panel is not None else {}

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        return on.command(name=name, **listed, **settings)(with_session(options)(fn))

    return register


def within(option: str, value: float, low: float, high: float) -> None:
    """Refuse (BadInput, exit 2) an option value that is not a finite number from `low` to `high`."""
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        kind = "an integer" if isinstance(value, int) else "a number"

        def shown(x: float) -> str:
            return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

        raise BadInput(f"{option} {value!r}: must be {kind} from {shown(low)} to {shown(high)}")

