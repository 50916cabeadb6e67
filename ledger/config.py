"""The TOML configuration: operators and roles, remotes, operations and policy, validated by key."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import stat
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger.errors import ConfigError
from ledger.signing import check_public

ROLES = frozenset({"viewer", "triage", "approver", "sender"})
IDENTITY_SOURCES = ("os", "declared", "proxy")
REMOTE_KINDS = frozenset({"gemini", "http"})
NOTIFY_EVENTS = frozenset({"held", "resolved", "consumed", "paused"})
MAX_SECONDS = 10 * 365 * 86400
"""The longest duration any config key may give: ten years of seconds."""
MAX_QUOTA = 1_000_000_000
MAX_POLL_CONCURRENCY = 256
MAX_CONFIG_BYTES = 1024 * 1024
"""A config file is read up to this size; a larger one (or /dev/zero) is refused, never read to the end."""
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class Policy:
    """Rules operator actions and workers obey."""

    four_eyes: bool = True
    release_requires_finding: bool = True
    stale_reserving_seconds: float = 120.0
    lease_seconds: float = 60.0
    retry_backoff_seconds: float = 30.0
    poll_concurrency: int = 8
    # The send window: a send starts only while lease left > the remote's timeout + this margin, and
    # recovery calls a send stale only after lease_until + this margin.
    send_margin_seconds: float = 2.0
    # How long a worker keeps retrying an outcome it could not commit before it journals it.
    outcome_retry_seconds: float = 10.0
    # A paused remote is probed (one due job sent) this long after its last refusal.
    remote_probe_seconds: float = 60.0
    # Strong evidence (the remote's own record carrying our idem key) reconciles a held job by itself;
    # false: a finding by `reclaim` says so and a person reconciles.
    reconcile_on_evidence: bool = True
    # No worker pass (started or ended) for this long: `status` and the console header say nothing is passing.
    worker_silence_seconds: float = 300.0
    # A worker's pick of a due job (ledger.picks) lasts this long (at most the lease), renewed while the
    # worker works through its batch: a dead or stopped worker's picks hold jobs back at most this long.
    pick_seconds: float = 10.0
    # The slowest rate (bytes per second) a request's body is assumed to leave at. The kernel keeps sending a
    # body after the socket was given up, so its transfer must fit in the send margin: a payload larger than
    # send_margin_seconds * min_send_rate is refused (reserve) and never sent (send).
    min_send_rate: float = 1_000_000.0
    # How long another application's interaction (a foreign delivery of the project webhook: ledger.foreign) is kept
    # registered after it was last seen; later deliveries for it are only counted meanwhile.
    foreign_retention_days: float = 7.0


@dataclass(frozen=True)
class RemoteConfig:
    """One remote service: how to reach it and what it can answer."""

    name: str
    kind: str
    timeout_seconds: float = 30.0
    model: str = "gemini-flash-latest"
    api_key_env: str = "GEMINI_API_KEY"
    base_url: str | None = None
    url: str | None = None
    lookup_url: str | None = None
    dedupes_by_key: bool = False
    header_env: dict[str, str] = field(default_factory=dict)
    # gemini: the variable holding the project's static webhook `whsec_` signing secret (Standard Webhooks);
    # when set, `reclaim receiver` verifies deliveries with it. Creates are unchanged: a delivery names only the
    # interaction, attributed by the GET's `labels` (no request-level webhook_config: v1 does not document it).
    webhook_secret_env: str | None = None
    # How many days the remote keeps its records of a job, as its operator declares it (None: not declared);
    # shown by `reclaim remotes`: past it, a lookup cannot tell "never ran" from "forgotten".
    keeps_records_days: int | None = None


@dataclass(frozen=True)
class OperationConfig:
    """One allowed operation: its remote, daily quota and result sink."""

    name: str
    remote: str
    daily_quota: int
    sink: str = "results"
    blocks_on_hold: bool = True


@dataclass(frozen=True)
class NotifyConfig:
    """One notification channel and the events it reports."""

    name: str
    kind: str
    url: str
    events: frozenset[str]
    operations: frozenset[str] | None = None
    timeout_seconds: float = 10.0


@dataclass(frozen=True)
class ServeConfig:
    """The browser seat (`reclaim serve`): who may speak for the browser user, and from where."""

    # The OS account `reclaim serve` must run as; only processes of this account may act for a browser user.
    account: str = ""
    # Peers whose identity header is believed: IP addresses, or "unix:/path" for a socket the proxy connects to.
    trusted_proxies: tuple[str, ...] = ()
    # Exact Origins (scheme://host[:port]) a browser's websocket may come from.
    allowed_origins: tuple[str, ...] = ()
    # Consoles one browser user may have open at once; one more is refused until one closes.
    max_consoles_per_user: int = 4
    # The seat's address as people open it (through the proxy), e.g. "https://reclaim.example.com/oncall/": the
    # base of the per-job links the console copies for an incident channel ("" = no links).
    public_url: str = ""


@dataclass(frozen=True)
class Config:
    """The whole validated configuration."""

    timezone: str = "UTC"
    policy: Policy = field(default_factory=Policy)
    operators: dict[str, frozenset[str]] = field(default_factory=dict)
    remotes: dict[str, RemoteConfig] = field(default_factory=dict)
    operations: dict[str, OperationConfig] = field(default_factory=dict)
    notify: dict[str, NotifyConfig] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path.cwd)
    # Where the acting operator's name comes from: "os" (the process's account) or "declared" (--operator).
    identity_source: str = "os"
    # With identity_source "proxy": the request header the authenticating proxy puts the user's name in.
    proxy_header: str = "X-Forwarded-User"
    serve: ServeConfig = field(default_factory=ServeConfig)
    # [audit] key_file: the audit key (ledger.seal); None: "reclaim-audit.key" beside the config file.
    audit_key_file: Path | None = None
    # [public_keys]: each account's registered Ed25519 public key (ledger.signing), by account name; empty: the
    # ledger's decisions are not signed (ledger.authors).
    keys: dict[str, str] = field(default_factory=dict)
    # The policy settings (ledger.policy.SETTINGS) this config states explicitly, by config key.
    stated: frozenset[str] = frozenset()

    def key_file(self) -> Path:
        """Where the audit key is kept (RECLAIM_AUDIT_KEY_FILE, checked by ledger.seal, wins over this)."""
        given = self.audit_key_file if self.audit_key_file is not None else Path("reclaim-audit.key")
        return given if given.is_absolute() else self.base_dir / given

    def roles_of(self, operator: str) -> frozenset[str]:
        """The operator's roles; unknown names are viewers."""
        return self.operators.get(operator, frozenset({"viewer"}))

    def sink_dir(self, operation: str) -> Path:
        """The folder an operation's results are delivered to (relative to the config file)."""
        sink = Path(self.operations[operation].sink)
        return sink if sink.is_absolute() else self.base_dir / sink


def _key(*parts: str) -> str:
    return ".".join(f'"{p}"' if "." in p else p for p in parts)


def _table(raw: dict[str, Any], *parts: str) -> dict[str, Any]:
    value = raw
    for p in parts:
        value = value.get(p, {})
    if not isinstance(value, dict):
        raise ConfigError(f"config key {_key(*parts)}: must be a table")
    return value


def _named(raw: dict[str, Any], section: str) -> dict[str, Any]:
    """The table `section` (operators, remotes, operations, notify), whose keys are names the ledger stores:
    each must be text without control characters (PostgreSQL text cannot hold a NUL; none prints)."""
    table = _table(raw, section)
    for name in table:
        if any(unicodedata.category(c) == "Cc" for c in name):
            raise ConfigError(f"config key {section}: the name {name!r} holds a control character; use printable text")
    return table


def _typed(table: dict[str, Any], name: str, kinds: tuple[type, ...], path: tuple[str, ...], default: Any) -> Any:
    if name not in table:
        return default
    value = table[name]
    if isinstance(value, bool) and bool not in kinds:
        raise ConfigError(f"config key {_key(*path, name)}: expected {kinds[0].__name__}, got {value!r}")
    if not isinstance(value, kinds):
        raise ConfigError(f"config key {_key(*path, name)}: expected {kinds[0].__name__}, got {value!r}")
    return value


def _known(table: dict[str, Any], allowed: set[str], path: tuple[str, ...]) -> None:
    for k in table:
        if k not in allowed:
            raise ConfigError(f"config key {_key(*path, k)}: unknown key (expected one of {', '.join(sorted(allowed))})")


def _rate(table: dict[str, Any], name: str, path: tuple[str, ...], default: float) -> float:
    """A rate key in bytes per second: a finite number > 0."""
    key = _key(*path, name)
    value = _typed(table, name, (int, float), path, default)
    if (isinstance(value, float) and not math.isfinite(value)) or value <= 0:
        raise ConfigError(f"config key {key}: must be a finite number of bytes per second > 0, got {value!r}")
    return float(value)


def _seconds(
    table: dict[str, Any], name: str, path: tuple[str, ...], default: float, allow_zero: bool = False
) -> float:
    """A duration key: a finite number of seconds, > 0 (or >= 0), at most MAX_SECONDS (TOML allows nan, inf)."""
    key = _key(*path, name)
    value = _typed(table, name, (int, float), path, default)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config key {key}: must be a finite number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"config key {key}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    if value > MAX_SECONDS:
        raise ConfigError(f"config key {key}: must be at most {MAX_SECONDS:.0f} (ten years of seconds), got {value!r}")
    return float(value)


MAX_DAYS = 3650
"""The longest a key counted in days may be (ten years)."""


def _days(table: dict[str, Any], name: str, path: tuple[str, ...], default: float) -> float:
    """A key in days: a finite number > 0, at most MAX_DAYS."""
    key = _key(*path, name)
    value = _typed(table, name, (int, float), path, default)
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 < value <= MAX_DAYS:
        raise ConfigError(f"config key {key}: must be a number of days > 0 and at most {MAX_DAYS}, got {value!r}")
    return float(value)


def _count(table: dict[str, Any], name: str, path: tuple[str, ...], default: int | None, low: int, high: int) -> int:
    """An integer key within [low, high]; a missing key without a default is an error."""
    key = _key(*path, name)
    value = _typed(table, name, (int,), path, default)
    if value is None:
        raise ConfigError(f"config key {key}: required, an integer from {low} to {high}")
    if not low <= value <= high:
        raise ConfigError(f"config key {key}: must be an integer from {low} to {high}, got {value!r}")
    return int(value)


def _url(table: dict[str, Any], name: str, path: tuple[str, ...], template: bool = False) -> str | None:
    """An http(s) URL with a host, or None when the key is absent or empty. The value is never echoed
    (a URL may carry credentials); the message says what is wrong with it."""
    value = _typed(table, name, (str,), path, None)
    if not value:
        return None
    key = _key(*path, name)
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ConfigError(f"config key {key}: not a URL (it holds spaces or control characters)")
    probe = value.replace("{handle}", "h").replace("{idem_key}", "k") if template else value
    try:
        parts = urlsplit(probe)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as e:
        raise ConfigError(f"config key {key}: not a valid URL ({e})") from None
    if parts.scheme not in ("http", "https"):
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ConfigError(f"config key {key}: must be an http:// or https:// URL ({got}), e.g. https://host/path")
    if not parts.hostname:
        raise ConfigError(f"config key {key}: must be an http(s) URL with a host, e.g. https://host/path")
    return str(value)


def parse_config(raw: dict[str, Any], base_dir: Path | None = None) -> Config:
    """Validate a parsed TOML document; raise ConfigError naming the first bad key."""
    known_top = {"timezone", "policy", "operators", "remotes", "operations", "notify", "keys", "identity", "serve",
                 "audit", "public_keys"}
    for k in raw:
        if k not in known_top:
            raise ConfigError(f"config key {k}: unknown key (expected one of {', '.join(sorted(known_top))})")
    tz = _typed(raw, "timezone", (str,), (), "UTC")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        raise ConfigError(f"config key timezone: unknown time zone {tz[:80]!r} (use an IANA name such as 'UTC')") from None

    ident = _table(raw, "identity")
    _known(ident, {"source", "proxy_header"}, ("identity",))
    identity_source = _typed(ident, "source", (str,), ("identity",), "os")
    if identity_source not in IDENTITY_SOURCES:
        raise ConfigError(
            f"config key identity.source: {identity_source!r} is not one of {', '.join(IDENTITY_SOURCES)} "
            "(\"os\": the account running the process; \"declared\": --operator, for demos and tests; "
            "\"proxy\": the browser seat's authenticating proxy)"
        )
    proxy_header = _typed(ident, "proxy_header", (str,), ("identity",), "X-Forwarded-User")
    if not _HEADER_NAME.fullmatch(proxy_header):
        raise ConfigError(f"config key identity.proxy_header: {proxy_header[:80]!r} is not an HTTP header name")
    serve = _serve_config(_table(raw, "serve"), identity_source)
    audit = _table(raw, "audit")
    _known(audit, {"key_file"}, ("audit",))
    key_file = _typed(audit, "key_file", (str,), ("audit",), None)
    if key_file is not None and not key_file.strip():
        raise ConfigError("config key audit.key_file: empty; name the audit key's file, or remove the key")

    p = _table(raw, "policy")
    pp = ("policy",)
    _known(p, {f for f in Policy.__dataclass_fields__}, pp)
    policy = Policy(
        four_eyes=_typed(p, "four_eyes", (bool,), pp, True),
        release_requires_finding=_typed(p, "release_requires_finding", (bool,), pp, True),
        stale_reserving_seconds=_seconds(p, "stale_reserving_seconds", pp, 120, allow_zero=True),
        lease_seconds=_seconds(p, "lease_seconds", pp, 60),
        retry_backoff_seconds=_seconds(p, "retry_backoff_seconds", pp, 30, allow_zero=True),
        poll_concurrency=_count(p, "poll_concurrency", pp, 8, 1, MAX_POLL_CONCURRENCY),
        send_margin_seconds=_seconds(p, "send_margin_seconds", pp, 2, allow_zero=True),
        outcome_retry_seconds=_seconds(p, "outcome_retry_seconds", pp, 10, allow_zero=True),
        remote_probe_seconds=_seconds(p, "remote_probe_seconds", pp, 60),
        reconcile_on_evidence=_typed(p, "reconcile_on_evidence", (bool,), pp, True),
        worker_silence_seconds=_seconds(p, "worker_silence_seconds", pp, 300),
        pick_seconds=_seconds(p, "pick_seconds", pp, 10),
        min_send_rate=_rate(p, "min_send_rate", pp, 1_000_000.0),
        foreign_retention_days=_days(p, "foreign_retention_days", pp, 7),
    )

    operators: dict[str, frozenset[str]] = {}
    for name, roles in _named(raw, "operators").items():
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise ConfigError(f"config key operators.{name}: expected a list of roles, got {roles!r}")
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise ConfigError(
                f"config key operators.{name}: unknown role {bad[0]!r} (roles are {', '.join(sorted(ROLES))})"
            )
        operators[name] = frozenset(roles) | {"viewer"}

    keys: dict[str, str] = {}
    for name, public in _named(raw, "public_keys").items():
        if not isinstance(public, str):
            raise ConfigError(f"config key public_keys.{name}: expected the text 'reclaim keys show' prints "
                              f"(ed25519:BASE64), got {type(public).__name__}")
        try:
            keys[name] = check_public(public.strip())
        except ValueError as e:
            raise ConfigError(f"config key public_keys.{name}: {e}") from None

    remotes: dict[str, RemoteConfig] = {}
    for name, r in _named(raw, "remotes").items():
        path = ("remotes", name)
        if not isinstance(r, dict):
            raise ConfigError(f"config key {_key(*path)}: must be a table")
        _known(r, set(RemoteConfig.__dataclass_fields__) - {"name"}, path)
        kind = _typed(r, "kind", (str,), path, None)
        if kind not in REMOTE_KINDS:
            raise ConfigError(f"config key {_key(*path, 'kind')}: must be one of {', '.join(sorted(REMOTE_KINDS))}")
        headers = _typed(r, "header_env", (dict,), path, {})
        for h, env in headers.items():
            if not _HEADER_NAME.fullmatch(h):
                raise ConfigError(f"config key {_key(*path, 'header_env', h)}: not an HTTP header name")
            if not isinstance(env, str) or not env:
                raise ConfigError(f"config key {_key(*path, 'header_env', h)}: must name an environment variable")
        url = _url(r, "url", path)
        if kind == "http" and not url:
            raise ConfigError(f"config key {_key(*path, 'url')}: required for an http remote")
        remotes[name] = RemoteConfig(
            name=name,
            kind=kind,
            timeout_seconds=_seconds(r, "timeout_seconds", path, 30),
            model=_typed(r, "model", (str,), path, "gemini-flash-latest"),
            api_key_env=_typed(r, "api_key_env", (str,), path, "GEMINI_API_KEY"),
            base_url=_url(r, "base_url", path),
            url=url,
            lookup_url=_url(r, "lookup_url", path, template=True),
            dedupes_by_key=_typed(r, "dedupes_by_key", (bool,), path, False),
            header_env=dict(headers),
            webhook_secret_env=_typed(r, "webhook_secret_env", (str,), path, None) or None,
            keeps_records_days=_count(r, "keeps_records_days", path, None, 1, 36_500) if "keeps_records_days" in r
            else None,
        )

    operations: dict[str, OperationConfig] = {}
    for name, o in _named(raw, "operations").items():
        path = ("operations", name)
        if not isinstance(o, dict):
            raise ConfigError(f"config key {_key(*path)}: must be a table")
        _known(o, set(OperationConfig.__dataclass_fields__) - {"name"}, path)
        remote = _typed(o, "remote", (str,), path, None)
        if remote is None:
            raise ConfigError(f"config key {_key(*path, 'remote')}: required (name a table under [remotes])")
        if remote not in remotes:
            raise ConfigError(f"config key {_key(*path, 'remote')}: no remote named {remote!r} under [remotes]")
        quota = _count(o, "daily_quota", path, None, 0, MAX_QUOTA)
        operations[name] = OperationConfig(
            name=name,
            remote=remote,
            daily_quota=quota,
            sink=_typed(o, "sink", (str,), path, "results"),
            blocks_on_hold=_typed(o, "blocks_on_hold", (bool,), path, True),
        )

    for name, rc in remotes.items():
        if any(o.remote == name for o in operations.values()):
            need = rc.timeout_seconds + policy.send_margin_seconds
            if policy.lease_seconds <= need:
                raise ConfigError(
                    f"config key policy.lease_seconds: {policy.lease_seconds:g} s must be more than "
                    f"remotes.{_key(name)}.timeout_seconds ({rc.timeout_seconds:g} s) + "
                    f"policy.send_margin_seconds ({policy.send_margin_seconds:g} s): a send may start only while "
                    "its lease outlasts the whole request; raise the lease or lower the timeout"
                )

    notify: dict[str, NotifyConfig] = {}
    for name, n in _named(raw, "notify").items():
        path = ("notify", name)
        if not isinstance(n, dict):
            raise ConfigError(f"config key {_key(*path)}: must be a table")
        _known(n, set(NotifyConfig.__dataclass_fields__) - {"name"}, path)
        kind = _typed(n, "kind", (str,), path, None)
        if kind != "webhook":
            raise ConfigError(f"config key {_key(*path, 'kind')}: must be 'webhook'")
        url = _url(n, "url", path)
        if not url:
            raise ConfigError(f"config key {_key(*path, 'url')}: required, an http(s) URL")
        events = _typed(n, "events", (list,), path, ["held", "resolved", "paused"])
        bad = [e for e in events if e not in NOTIFY_EVENTS]
        if bad:
            raise ConfigError(
                f"config key {_key(*path, 'events')}: unknown event {bad[0]!r} "
                f"(events are {', '.join(sorted(NOTIFY_EVENTS))})"
            )
        ops = _typed(n, "operations", (list,), path, None)
        for op_name in ops or []:
            if op_name not in operations:
                raise ConfigError(
                    f"config key {_key(*path, 'operations')}: no operation named {op_name!r} under [operations]"
                )
        notify[name] = NotifyConfig(
            name=name,
            kind=kind,
            url=url,
            events=frozenset(events),
            operations=frozenset(ops) if ops is not None else None,
            timeout_seconds=_seconds(n, "timeout_seconds", path, 10),
        )

    return Config(
        timezone=tz,
        policy=policy,
        operators=operators,
        keys=keys,
        remotes=remotes,
        operations=operations,
        notify=notify,
        base_dir=base_dir or Path.cwd(),
        identity_source=identity_source,
        proxy_header=proxy_header,
        serve=serve,
        audit_key_file=Path(key_file) if key_file is not None else None,
        stated=frozenset(
            [f"identity.{k}" for k in ("source", "proxy_header") if k in ident]
            + [f"serve.{k}" for k in ("account", "trusted_proxies") if k in _table(raw, "serve")]
            + (["operators"] if "operators" in raw else [])
            + (["public_keys"] if "public_keys" in raw else [])
            + [f"policy.{k}" for k in ("four_eyes", "release_requires_finding") if k in p]
        ),
    )


def _str_list(table: dict[str, Any], name: str, path: tuple[str, ...]) -> tuple[str, ...]:
    value = _typed(table, name, (list,), path, [])
    if not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"config key {_key(*path, name)}: must be a list of non-empty strings")
    return tuple(value)


def _serve_config(table: dict[str, Any], identity_source: str) -> ServeConfig:
    """[serve]: checked here so a bad value stops every command, not only `reclaim serve`."""
    path = ("serve",)
    _known(table, {"account", "trusted_proxies", "allowed_origins", "max_consoles_per_user", "public_url"}, path)
    per_user = _typed(table, "max_consoles_per_user", (int,), path, ServeConfig.max_consoles_per_user)
    if isinstance(per_user, bool) or not 1 <= per_user <= 100:
        raise ConfigError("config key serve.max_consoles_per_user: a whole number from 1 to 100")
    account = _typed(table, "account", (str,), path, "")
    proxies = _str_list(table, "trusted_proxies", path)
    for p in proxies:
        if p.startswith("unix:"):
            if not Path(p[5:]).is_absolute():
                raise ConfigError(f"config key serve.trusted_proxies: {p!r}: a unix socket must be an absolute path")
            continue
        try:
            ipaddress.ip_address(p)
        except ValueError:
            raise ConfigError(
                f"config key serve.trusted_proxies: {p[:80]!r} is neither an IP address nor unix:/absolute/path"
            ) from None
    origins = _str_list(table, "allowed_origins", path)
    for o in origins:
        parts = urlsplit(o)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
            raise ConfigError(
                f"config key serve.allowed_origins: {o[:80]!r} is not an origin (scheme://host[:port], no path)"
            )
    public_url = _typed(table, "public_url", (str,), path, "")
    if public_url:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise ConfigError(
                f"config key serve.public_url: {public_url[:80]!r} is not the seat's address (http(s)://host[:port]"
                "[/path], no query)"
            )
    if identity_source == "proxy" and not account:
        raise ConfigError(
            'config key serve.account: required with [identity] source = "proxy": the OS account `reclaim serve` '
            "runs as (only its processes may act for a browser user)"
        )
    return ServeConfig(account=account, trusted_proxies=proxies, allowed_origins=tuple(o.rstrip("/") for o in origins),
                       max_consoles_per_user=per_user, public_url=public_url)


def _read_text(p: Path) -> str:
    """The file's text: a regular file of at most MAX_CONFIG_BYTES of UTF-8, else ConfigError naming it."""
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; the check below refuses it.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"config file {p}: not found (create it, or pass --config / RECLAIM_CONFIG)") from None
    except OSError as e:
        raise ConfigError(f"config file {p}: cannot be read ({e.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"config file {p}: is a folder; pass the TOML file itself")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"config file {p}: not a regular file (a device, pipe or socket); pass a TOML file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise ConfigError(f"config file {p}: cannot be read ({e.strerror})") from None
    finally:
        os.close(fd)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {p}: larger than {MAX_CONFIG_BYTES // 1024} KiB; is it the right file?")
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config file {p}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "is it the right file? save it as UTF-8"
        ) from None


def load_config(path: str | Path) -> Config:
    """Read and validate a TOML config file; raise ConfigError with the file and key on any problem."""
    p = Path(path)
    text = _read_text(p)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {p}: not valid TOML ({e})") from None
    except RecursionError:
        raise ConfigError(
            f"config file {p}: arrays or tables nested too deeply to read; a reclaim config needs only a few levels"
        ) from None
    try:
        return parse_config(raw, base_dir=p.resolve().parent)
    except ConfigError as e:
        raise ConfigError(f"config file {p}: {e}") from None
