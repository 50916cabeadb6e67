"""Loopback simulator of the Gemini Interactions HTTP API and a storage clean-up API.

The simulator serves on 127.0.0.1 (or another loopback address) and is meant
for tests and demos of reclaim: it lets the real ``google-genai`` SDK talk to
it (``HttpOptions(base_url=sim.url)``), counts every API request when it
arrives (before any fault is applied), and injects faults that reproduce the
ambiguous outcomes a reservation ledger must survive (request lost, reply
lost, hung connection, HTTP errors, slowness).

It speaks the current Interactions API as google-genai 3.6.1 models it: replies
carry ``steps`` (no legacy ``outputs``), every documented status is reachable
(``force_status``, or an ``end_status`` fault on a create), ids are long opaque
strings, the API key is checked (``x-goog-api-key`` or ``?key=``), and errors
are Google-shaped: ``{"error": {"code", "message", "status", "details": [ErrorInfo,
RetryInfo]}}``, with fault kinds for each answer that makes a remote unusable
(invalid key, billing, region, permission, unknown model), rate limits and
redirects.

Stdlib only. One lock guards all state; handlers never hold it while sleeping
or hanging.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import random
import re
import secrets
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, Literal, Self, cast, get_args
from urllib.parse import parse_qs, urlsplit

FaultKind = Literal[
    "drop_before_accept", "accept_then_hang", "complete_lose_reply", "status", "slow",
    # Google-shaped error answers (nothing is created):
    "api_key_invalid", "billing", "location", "permission_denied", "service_disabled",
    "payment_required", "model_not_found", "rate_limited", "redirect",
    # a create that is accepted and whose interaction ends in `end_status` (with `text`):
    "end_status",
]
Method = Literal["create", "get", "cancel", "delete", "cleanup", "cleanup_get"]

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
METHODS: tuple[str, ...] = get_args(Method)
INTERACTION_STATUSES: tuple[str, ...] = (
    "in_progress",
    "completed",
    "failed",
    "cancelled",
    "requires_action",
    "incomplete",
    "budget_exceeded",
    "queued",
    "idle",
    "requires_continuation",
)
"""Every status google-genai 3.6.1 documents for an interaction (``InteractionStatus`` in
``google/genai/_gaos/types/interactions/interaction.py``)."""

ERROR_KINDS: frozenset[str] = frozenset(
    {
        "api_key_invalid", "billing", "location", "permission_denied", "service_disabled",
        "payment_required", "model_not_found", "rate_limited", "redirect",
    }
)
"""Fault kinds that answer with an error (or a redirect) before anything is created."""

DEFAULT_API_KEY = "simulator"
"""The key the simulator accepts by default: what reclaim's Gemini adapter sends when a
``base_url`` is configured and no key variable is set."""

DEFAULT_RETRY_DELAY = 7.0
"""``RetryInfo.retryDelay`` (seconds) of a ``rate_limited`` fault that gives none."""

_ERROR_DOMAIN = "googleapis.com"
_SERVICE = "generativelanguage.googleapis.com"

MAX_HANG_SECONDS = 120.0
"""Upper bound on how long an ``accept_then_hang`` fault holds a connection."""

DEFAULT_CLEANUP_SELECTED = 100
"""Number of objects every simulated clean-up job selects (deterministic)."""

RANDOM_SLOW_SECONDS = 1.0
"""Delay used by a ``slow`` fault drawn in random mode."""

_GRPC_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "UNKNOWN",  # Google maps no google.rpc code to 402; its fallback is UNKNOWN
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_INTERACTION_PATH = re.compile(
    r"^/(?:v\d+(?:alpha|beta)?\d*)/interactions(?:/(?P<id>[^/:]+)(?P<cancel>/cancel|:cancel)?)?/?$"
)
_CLEANUP_PATH = re.compile(r"^/cleanup(?:/(?P<id>[^/]+))?/?$")


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_loopback_host(host: str) -> bool:
    """Return True iff ``host`` is ``localhost`` or a loopback IP (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class FaultRule:
    """One queued fault: applies to the next ``count`` matching requests."""

    kind: str
    count: int = 1
    match_idem: str | None = None
    method: str = "create"
    status: int = 503
    seconds: float = 0.0
    retry_after: float | None = None
    reason: str | None = None
    retry_delay: float | None = None
    location: str | None = None
    end_status: str | None = None
    text: str | None = None

    def validate(self) -> None:
        """Raise ValueError if the rule is malformed."""
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}"
            )
        if self.method not in METHODS:
            raise ValueError(
                f"unknown method {self.method!r}; expected one of {METHODS}"
            )
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError("count must be a positive integer")
        if not 100 <= int(self.status) <= 599:
            raise ValueError("status must be an HTTP status code")
        if self.seconds < 0:
            raise ValueError("seconds must be >= 0")
        if self.retry_after is not None and self.retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        if self.retry_delay is not None and self.retry_delay < 0:
            raise ValueError("retry_delay must be >= 0")
        if self.kind == "redirect" and not 300 <= int(self.status) <= 399:
            raise ValueError("a redirect fault needs a 3xx status (default 307)")
        if self.kind == "end_status":
            if self.method != "create":
                raise ValueError("an end_status fault applies to creates only")
            if not self.end_status:
                raise ValueError("an end_status fault needs end_status (e.g. 'incomplete')")


@dataclass
class _Interaction:
    id: str
    model: str | None
    agent: str | None
    input: Any
    labels: dict[str, str]
    idem: str | None
    attempt: int
    background: bool
    created_mono: float
    complete_at: float
    created: str
    system_instruction: Any = None
    forced_status: str | None = None
    updated: str = ""
    end_status: str = "completed"
    end_text: str | None = None  # None: the default reply (or, for incomplete, its first half)

    def status(self, now: float) -> str:
        if self.forced_status is not None:
            return self.forced_status
        return self.end_status if now >= self.complete_at else "in_progress"

    def reply_text(self) -> str:
        return f"simulated reply to: {_input_text(self.input)}"

    def _text_for(self, status: str) -> str:
        if self.end_text is not None:
            return self.end_text
        full = self.reply_text()
        return full[: max(1, len(full) // 2)] if status in ("incomplete", "requires_continuation") else full

    def to_json(self, now: float) -> dict[str, Any]:
        """The interaction as the Interactions API answers it: the answer is in ``steps``."""
        status = self.status(now)
        body: dict[str, Any] = {
            "id": self.id,
            "status": status,
            "created": self.created,
            "updated": self.updated or self.created,
            "labels": dict(self.labels),
        }
        if self.model is not None:
            body["model"] = self.model
        if self.agent is not None:
            body["agent"] = self.agent
        if status in ("completed", "incomplete", "requires_continuation"):
            text = self._text_for(status)
            content = [{"type": "text", "text": text}] if text else []
            body["steps"] = [{"type": "model_output", "content": content}]
        elif status == "requires_action":
            body["steps"] = [
                {
                    "type": "function_call",
                    "id": f"call_{self.id[-12:]}",
                    "name": "lookup",
                    "arguments": {"query": _input_text(self.input)},
                }
            ]
        elif status == "failed":
            body["errors"] = [{"code": "internal", "message": "the simulated model run failed"}]
        if status == "requires_continuation":
            body["continuation_token"] = f"ct_{self.id[-16:]}"
        return body

    def debug_json(self, now: float) -> dict[str, Any]:
        body = self.to_json(now)
        body.update(
            idem=self.idem,
            attempt=self.attempt,
            input=self.input,
            background=self.background,
        )
        return body


@dataclass
class _CleanupJob:
    id: str
    key: str | None
    payload: Any
    attempt: int
    created_mono: float
    duration: float
    selected: int
    created: str
    forced_complete: bool = False

    def progress(self, now: float) -> tuple[str, int]:
        if self.forced_complete or self.duration <= 0:
            return "completed", self.selected
        fraction = min(1.0, max(0.0, (now - self.created_mono) / self.duration))
        deleted = min(self.selected, math.floor(self.selected * fraction))
        if fraction >= 1.0:
            return "completed", self.selected
        return ("accepted" if deleted == 0 else "running"), deleted

    def to_json(self, now: float) -> dict[str, Any]:
        status, deleted = self.progress(now)
        return {
            "id": self.id,
            "key": self.key,
            "status": status,
            "selected": self.selected,
            "deleted": deleted,
            "created": self.created,
            "attempt": self.attempt,
            "payload": self.payload,
        }


def _input_text(value: Any) -> str:
    """Flatten an Interactions ``input`` into plain text, deterministically."""
    if isinstance(value, str):
        return value
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            if isinstance(node.get("text"), str):
                texts.append(node["text"])
            elif "content" in node:
                walk(node["content"])

    walk(value)
    if texts:
        return " ".join(texts)
    return json.dumps(value, sort_keys=True)


def _new_interaction_id() -> str:
    """A long opaque id shaped like Gemini's (``v1_`` and url-safe base64), unique per process."""
    return "v1_" + secrets.token_urlsafe(48)


def _model_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value.removeprefix("models/")


def _model_not_found_message(model: str) -> str:
    return (
        f"models/{model} is not found for API version v1beta, or is not supported for "
        "createInteraction. Call ListModels to see the list of available models."
    )


def _new_counts() -> dict[str, int]:
    return {m: 0 for m in METHODS}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: Simulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) or self.sim._stopping.is_set():
            return  # client went away or we are shutting down: not worth a traceback
        super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Close(Exception):
    """Raised inside a handler to close the connection without replying."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60  # idle keep-alive connections are dropped after this
    disable_nagle_algorithm = True  # headers and body go out in separate writes; avoid the delayed-ACK stall

    # -- plumbing -----------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default per-request logging."""

    def setup(self) -> None:
        super().setup()
        self.server.sim._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.sim._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _dispatch(self, verb: str) -> None:
        sim = self.server.sim
        try:
            raw = self._read_body()
            parts = urlsplit(self.path)
            sim._handle(self, verb, parts.path, parse_qs(parts.query), raw)
        except _Close:
            self.close_connection = True
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def send_json(
        self, code: int, body: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_error_json(
        self,
        code: int,
        message: str,
        headers: Mapping[str, str] | None = None,
        *,
        status: str | None = None,
        reason: str | None = None,
        retry_delay: float | None = None,
    ) -> None:
        """Answer with Google's error shape; ``reason`` adds an ErrorInfo, ``retry_delay`` a RetryInfo."""
        self.send_json(code, google_error(code, message, status=status, reason=reason, retry_delay=retry_delay),
                       headers)

    def send_redirect(self, code: int, location: str) -> None:
        """Answer a 3xx with ``Location`` and an empty body."""
        self.send_response(code)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()


def google_error(
    code: int,
    message: str,
    *,
    status: str | None = None,
    reason: str | None = None,
    retry_delay: float | None = None,
) -> dict[str, Any]:
    """The body Google APIs answer an error with: ``{"error": {code, message, status, details}}``."""
    details: list[dict[str, Any]] = []
    if reason:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": _ERROR_DOMAIN,
                "metadata": {"service": _SERVICE},
            }
        )
    if retry_delay is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_delay:g}s"}
        )
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or _GRPC_STATUS.get(code, "UNKNOWN"),
    }
    if details:
        error["details"] = details
    return {"error": error}


class Simulator:
    """A loopback Gemini Interactions + storage clean-up API with faults and counters.

    Use as ``with Simulator().start() as sim: ...`` or call ``start()``/``stop()``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        complete_after: float = 0.0,
        *,
        dedupes_by_key: bool = True,
        cleanup_seconds: float = 0.0,
        cleanup_selected: int = DEFAULT_CLEANUP_SELECTED,
        api_key: str | None = DEFAULT_API_KEY,
        unknown_models: Sequence[str] = (),
    ) -> None:
        """Configure (not start) a simulator; raises ValueError for a non-loopback host.

        ``api_key``: the key every Interactions request must carry (``x-goog-api-key`` or ``?key=``);
        None accepts any. ``unknown_models``: model names a create answers with 404 NOT_FOUND.
        """
        if not is_loopback_host(host):
            raise ValueError(
                f"refusing to serve on non-loopback host {host!r}: "
                "the simulator only binds 127.0.0.0/8, ::1 or localhost"
            )
        self.host = host
        self.port = port
        self.complete_after = float(complete_after)
        self.dedupes_by_key = dedupes_by_key
        self.cleanup_seconds = float(cleanup_seconds)
        self.cleanup_selected = int(cleanup_selected)
        self.api_key = api_key
        self.unknown_models: set[str] = {m.removeprefix("models/") for m in unknown_models}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._interaction_seq = 0
        self._cleanup_seq = 0
        self._rules: list[FaultRule] = []
        self._rates: dict[str, float] = {}
        self._rng = random.Random()
        self._interactions: dict[str, _Interaction] = {}
        self._jobs: dict[str, _CleanupJob] = {}
        self._reset_counts()

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> Self:
        """Bind and serve on a daemon thread; returns self once the port is bound."""
        if self._server is not None:
            raise RuntimeError("simulator already started")
        self._stopping.clear()
        ipv6 = ":" in self.host
        cls = _Server6 if ipv6 else _Server
        server = cls((self.host.strip("[]"), self.port), _Handler)
        server.sim = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"reclaim-simulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release hanging requests; returns promptly (idempotent)."""
        server, self._server = self._server, None
        self._stopping.set()
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            conns = list(self._connections)
            self._connections.clear()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def __enter__(self) -> Self:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT`` (``http://[::1]:PORT`` for IPv6)."""
        host = self.host.strip("[]")
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # -- faults --------------------------------------------------------------
    def add_fault(
        self,
        kind: str,
        *,
        count: int = 1,
        match_idem: str | None = None,
        method: str = "create",
        status: int = 503,
        seconds: float = 0.0,
        retry_after: float | None = None,
        reason: str | None = None,
        retry_delay: float | None = None,
        location: str | None = None,
        end_status: str | None = None,
        text: str | None = None,
    ) -> FaultRule:
        """Queue a fault for the next ``count`` matching requests (FIFO); returns the rule.

        ``retry_after`` (seconds) adds a ``Retry-After`` header to ``status`` / ``rate_limited``
        faults; ``reason`` an ErrorInfo and ``retry_delay`` a RetryInfo to their body. The error
        kinds answer as Google does: ``api_key_invalid`` (400 INVALID_ARGUMENT, API_KEY_INVALID),
        ``billing`` / ``location`` (400 FAILED_PRECONDITION), ``permission_denied`` (403),
        ``service_disabled`` (403, SERVICE_DISABLED), ``payment_required`` (402),
        ``model_not_found`` (404), ``rate_limited`` (429 with RetryInfo, ``retry_delay`` default 7 s),
        ``redirect`` (``status`` 307 or 308 to ``location``). ``end_status`` (creates only): the
        create is accepted and the interaction ends in ``end_status`` (any documented status, or
        any other string to play an undocumented one), with ``text`` as its answer (partial text
        for ``incomplete``; "" for none).
        """
        if kind == "redirect" and status == 503:  # the default status: a redirect's default is 307
            status = 307
        rule = FaultRule(
            kind=kind,
            count=count,
            match_idem=match_idem,
            method=method,
            status=int(status),
            seconds=float(seconds),
            retry_after=retry_after,
            reason=reason,
            retry_delay=None if retry_delay is None else float(retry_delay),
            location=location,
            end_status=end_status,
            text=text,
        )
        rule.validate()
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_faults(self) -> None:
        """Drop every queued fault rule and disable random fault mode."""
        with self._lock:
            self._rules.clear()
            self._rates = {}

    def set_fault_rates(
        self, rates: Mapping[str, float], seed: int | None = None
    ) -> None:
        """Enable random faults for creates no rule matches: ``{kind: probability}``."""
        clean: dict[str, float] = {}
        for kind, rate in rates.items():
            if kind.startswith("status:"):
                code = kind.partition(":")[2]
                if not (code.isdigit() and 400 <= int(code) <= 599):
                    raise ValueError(f"fault {kind!r}: use status:NNN with NNN from 400 to 599")
            elif kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r}")
            elif kind == "end_status":
                raise ValueError("end_status needs a status: queue it with add_fault, not as a rate")
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(f"rate for {kind} must be within [0, 1]")
            clean[kind] = float(rate)
        if sum(clean.values()) > 1.0 + 1e-9:
            raise ValueError("fault rates must sum to at most 1")
        with self._lock:
            self._rates = clean
            self._rng = random.Random(seed)

    def faults(self) -> list[dict[str, Any]]:
        """Return the pending fault rules (with remaining counts) as dicts."""
        with self._lock:
            return [asdict(r) for r in self._rules]

    def _pick_fault(self, method: str, idem: str | None) -> FaultRule | None:
        """Consume one matching rule (or draw a random fault). Caller holds the lock."""
        for i, rule in enumerate(self._rules):
            if rule.method != method:
                continue
            if rule.match_idem is not None and rule.match_idem != idem:
                continue
            rule.count -= 1
            if rule.count <= 0:
                del self._rules[i]
            return FaultRule(
                kind=rule.kind,
                method=rule.method,
                status=rule.status,
                seconds=rule.seconds,
                retry_after=rule.retry_after,
                reason=rule.reason,
                retry_delay=rule.retry_delay,
                location=rule.location,
                end_status=rule.end_status,
                text=rule.text,
            )
        if method == "create" and self._rates:
            draw = self._rng.random()
            acc = 0.0
            for kind, rate in self._rates.items():
                acc += rate
                if draw < acc:
                    # "status" draws a 503; "status:400" draws that code.
                    kind_name, _, code = kind.partition(":")
                    return FaultRule(
                        kind=kind_name,
                        method=method,
                        status=int(code) if code else (307 if kind_name == "redirect" else 503),
                        seconds=RANDOM_SLOW_SECONDS,
                    )
        return None

    # -- config / inspection ---------------------------------------------------
    def configure(
        self,
        *,
        dedupes_by_key: bool | None = None,
        cleanup_seconds: float | None = None,
        complete_after: float | None = None,
        cleanup_selected: int | None = None,
        api_key: str | None = None,
        unknown_models: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Change runtime settings (only the ones given); returns the resulting config.

        ``api_key=""`` turns the key check off (None leaves it as it is)."""
        with self._lock:
            if api_key is not None:
                self.api_key = api_key or None
            if unknown_models is not None:
                self.unknown_models = {str(m).removeprefix("models/") for m in unknown_models}
            if dedupes_by_key is not None:
                self.dedupes_by_key = bool(dedupes_by_key)
            if cleanup_seconds is not None:
                self.cleanup_seconds = float(cleanup_seconds)
            if complete_after is not None:
                self.complete_after = float(complete_after)
            if cleanup_selected is not None:
                self.cleanup_selected = int(cleanup_selected)
            return self._config_locked()

    def _config_locked(self) -> dict[str, Any]:
        return {
            "dedupes_by_key": self.dedupes_by_key,
            "cleanup_seconds": self.cleanup_seconds,
            "complete_after": self.complete_after,
            "cleanup_selected": self.cleanup_selected,
            "api_key_checked": self.api_key is not None,
            "unknown_models": sorted(self.unknown_models),
        }

    def _reset_counts(self) -> None:
        self._total = 0
        self._by_method = _new_counts()
        self._by_idem: dict[str, dict[str, int]] = {}

    def reset(self) -> None:
        """Clear counters, fault rules/rates and stored interactions and jobs (ids keep growing)."""
        with self._lock:
            self._reset_counts()
            self._rules.clear()
            self._rates = {}
            self._interactions.clear()
            self._jobs.clear()

    def calls(self) -> dict[str, Any]:
        """Snapshot of request counts: ``{"total", "by_method", "by_idem"}``."""
        with self._lock:
            return {
                "total": self._total,
                "by_method": dict(self._by_method),
                "by_idem": {k: dict(v) for k, v in self._by_idem.items()},
            }

    def count(self, method: str | None = "create", idem: str | None = None) -> int:
        """Number of requests of ``method`` (None = all methods), optionally for one idem/key."""
        with self._lock:
            if idem is None:
                return self._total if method is None else self._by_method.get(method, 0)
            per = self._by_idem.get(idem, {})
            return sum(per.values()) if method is None else per.get(method, 0)

    def interactions(self) -> list[dict[str, Any]]:
        """All stored interactions (with idem, attempt, input), oldest first."""
        now = time.monotonic()
        with self._lock:
            return [i.debug_json(now) for i in self._interactions.values()]

    def interaction(self, interaction_id: str) -> dict[str, Any] | None:
        """One stored interaction as a dict, or None."""
        now = time.monotonic()
        with self._lock:
            rec = self._interactions.get(interaction_id)
            return rec.debug_json(now) if rec else None

    def interaction_arrival(self, interaction_id: str) -> float:
        """``time.monotonic()`` when the create of this interaction was stored; KeyError if unknown."""
        with self._lock:
            return self._interactions[interaction_id].created_mono

    def find_by_idem(self, idem: str) -> list[dict[str, Any]]:
        """Stored interactions whose ``labels.idem`` equals ``idem``, oldest first."""
        return [i for i in self.interactions() if i["idem"] == idem]

    def force_status(self, interaction_id: str, status: str, *, allow_unknown: bool = False) -> None:
        """Pin an interaction's status (e.g. "failed"); KeyError if the interaction is unknown.

        Any documented status (``INTERACTION_STATUSES``); ``allow_unknown=True`` also takes a
        status the API does not document (e.g. "expired"), to play a remote that answers one.
        """
        if not status or (status not in INTERACTION_STATUSES and not allow_unknown):
            raise ValueError(f"status must be one of {INTERACTION_STATUSES}")
        with self._lock:
            rec = self._interactions[interaction_id]
            rec.forced_status = status
            rec.updated = _now_iso()

    def cleanup_jobs(self) -> list[dict[str, Any]]:
        """All stored clean-up jobs, oldest first."""
        now = time.monotonic()
        with self._lock:
            return [j.to_json(now) for j in self._jobs.values()]

    # -- request handling ------------------------------------------------------
    def _count_locked(self, method: str, idem: str | None) -> int:
        """Count one arriving request; returns the per-idem count for this method."""
        self._total += 1
        self._by_method[method] += 1
        if idem is None:
            return 0
        per = self._by_idem.setdefault(idem, _new_counts())
        per[method] += 1
        return per[method]

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` unless stopping; True if the simulator is stopping."""
        return self._stopping.wait(max(0.0, seconds))

    def _hang(self, h: _Handler) -> None:
        """Hold the connection without replying until the client leaves, stop(), or 120 s."""
        deadline = time.monotonic() + MAX_HANG_SECONDS
        conn = h.connection
        while time.monotonic() < deadline and not self._stopping.is_set():
            try:
                readable, _, _ = select.select([conn], [], [], 0.05)
                if readable and not conn.recv(1, socket.MSG_PEEK):
                    break  # client closed its side
            except (OSError, ValueError):
                break
            if readable:
                self._wait(0.05)
        raise _Close

    def _apply_slow(self, fault: FaultRule | None) -> FaultRule | None:
        """Sleep for a ``slow`` fault; returns the fault still to apply (None after slow)."""
        if fault is not None and fault.kind == "slow":
            if self._wait(fault.seconds):
                raise _Close
            return None
        return fault

    def _front_faults(
        self, h: _Handler, fault: FaultRule | None, model: str | None = None
    ) -> tuple[bool, FaultRule | None]:
        """Apply the faults that act before any object is touched (slow, drop, status).

        Returns (True, None) when the fault already answered the request, else (False, the fault left
        to apply once the request has been handled).
        """
        fault = self._apply_slow(fault)
        if fault is not None and fault.kind == "drop_before_accept":
            raise _Close
        if fault is not None and fault.kind == "status":
            self._send_status_fault(h, fault)
            return True, None
        if fault is not None and fault.kind in ERROR_KINDS:
            self._send_error_fault(h, fault, model)
            return True, None
        return False, fault

    def _check_key(self, h: _Handler, query: Mapping[str, list[str]]) -> bool:
        """Answer as Google does when the API key is missing or wrong; True if the key is good."""
        want = self.api_key
        if want is None:
            return True
        keys = query.get("key") or []
        got = h.headers.get("x-goog-api-key") or (keys[-1] if keys else None)
        if not got:
            h.send_error_json(
                401,
                "Method doesn't allow unregistered callers (callers without established identity). "
                "Please use API Key or other form of API consumer identity to call this API.",
                status="UNAUTHENTICATED",
                reason="CREDENTIALS_MISSING",
            )
            return False
        if got != want:
            h.send_error_json(
                400, "API key not valid. Please pass a valid API key.", status="INVALID_ARGUMENT",
                reason="API_KEY_INVALID",
            )
            return False
        return True

    def _send_error_fault(self, h: _Handler, fault: FaultRule, model: str | None = None) -> None:
        """Answer one of the Google-shaped error kinds (or a redirect); nothing is created."""
        kind = fault.kind
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        if kind == "redirect":
            h.send_redirect(fault.status, fault.location or f"{self.url}/v1beta/moved/interactions")
        elif kind == "api_key_invalid":
            h.send_error_json(400, "API key not valid. Please pass a valid API key.",
                              status="INVALID_ARGUMENT", reason=fault.reason or "API_KEY_INVALID")
        elif kind == "billing":
            h.send_error_json(
                400, "Billing is not enabled for this project; enable billing to use this model.",
                status="FAILED_PRECONDITION", reason=fault.reason,
            )
        elif kind == "location":
            h.send_error_json(400, "User location is not supported for the API use.",
                              status="FAILED_PRECONDITION", reason=fault.reason)
        elif kind == "permission_denied":
            h.send_error_json(403, "The caller does not have permission", status="PERMISSION_DENIED",
                              reason=fault.reason)
        elif kind == "service_disabled":
            h.send_error_json(
                403, f"Generative Language API has not been used in this project before or it is disabled "
                f"({_SERVICE}).", status="PERMISSION_DENIED", reason=fault.reason or "SERVICE_DISABLED",
            )
        elif kind == "payment_required":
            h.send_error_json(402, "Payment required: the prepaid credit of this project is used up.",
                              reason=fault.reason)
        elif kind == "model_not_found":
            h.send_error_json(404, _model_not_found_message(model or "unknown"), status="NOT_FOUND",
                              reason=fault.reason)
        elif kind == "rate_limited":
            delay = DEFAULT_RETRY_DELAY if fault.retry_delay is None else fault.retry_delay
            h.send_error_json(
                429, "You exceeded your current quota, please check your plan and billing details.",
                headers, status="RESOURCE_EXHAUSTED", reason=fault.reason, retry_delay=delay,
            )
        else:  # pragma: no cover - ERROR_KINDS and this chain are kept in step
            raise AssertionError(kind)

    def _handle(
        self,
        h: _Handler,
        verb: str,
        path: str,
        query: dict[str, list[str]],
        raw: bytes,
    ) -> None:
        if path.startswith("/_sim/") or path == "/_sim":
            self._control(h, verb, path, raw)
            return
        m = _INTERACTION_PATH.match(path)
        if m:
            iid, cancel = m.group("id"), m.group("cancel")
            if iid is None and verb == "POST":
                self._create(h, raw, query)
            elif iid is not None and cancel and verb == "POST":
                self._on_interaction(h, "cancel", iid, query)
            elif iid is not None and not cancel and verb == "GET":
                if query.get("stream", ["false"])[-1].lower() == "true":
                    h.send_error_json(400, "the simulator does not support streaming")
                    return
                self._on_interaction(h, "get", iid, query)
            elif iid is not None and not cancel and verb == "DELETE":
                self._on_interaction(h, "delete", iid, query)
            else:
                h.send_error_json(405, f"{verb} not supported on {path}")
            return
        m = _CLEANUP_PATH.match(path)
        if m:
            jid = m.group("id")
            if jid is None and verb == "POST":
                self._cleanup_create(h, raw)
            elif verb == "GET":
                self._cleanup_get(h, jid, query)
            else:
                h.send_error_json(405, f"{verb} not supported on {path}")
            return
        h.send_error_json(404, f"no such endpoint: {verb} {path}")

    def _new_interaction_locked(
        self, body: dict[str, Any], idem: str | None, attempt: int, completed: bool
    ) -> _Interaction:
        self._interaction_seq += 1
        now = time.monotonic()
        created = _now_iso()
        labels = body.get("labels") if isinstance(body.get("labels"), dict) else {}
        rec = _Interaction(
            id=_new_interaction_id(),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            agent=body.get("agent") if isinstance(body.get("agent"), str) else None,
            input=body.get("input"),
            labels={str(k): str(v) for k, v in cast(dict[str, Any], labels).items()},
            idem=idem,
            attempt=attempt,
            background=bool(body.get("background", False)),
            created_mono=now,
            complete_at=now if completed else now + self.complete_after,
            created=created,
            system_instruction=body.get("system_instruction"),
            updated=created,
        )
        self._interactions[rec.id] = rec
        return rec

    def _create(self, h: _Handler, raw: bytes, query: Mapping[str, list[str]]) -> None:
        body: Any
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        idem = None
        if isinstance(body, dict) and isinstance(body.get("labels"), dict):
            value = body["labels"].get("idem")
            idem = str(value) if value is not None else None
        with self._lock:
            attempt = self._count_locked("create", idem)
        if not self._check_key(h, query):
            return  # Google's front end refuses the key before anything else (no fault is used up)
        model = _model_name(body.get("model")) if isinstance(body, dict) else None
        with self._lock:
            fault = self._pick_fault("create", idem)
            unknown_model = model is not None and model in self.unknown_models
        answered, fault = self._front_faults(h, fault, model)
        if answered:
            return
        if not isinstance(body, dict):
            h.send_error_json(400, "request body must be a JSON object")
            return
        if unknown_model:
            h.send_error_json(404, _model_not_found_message(model or ""), status="NOT_FOUND")
            return
        if not isinstance(body.get("model"), str) and not isinstance(
            body.get("agent"), str
        ):
            h.send_error_json(400, "model (or agent) is required")
            return
        if "input" not in body:
            h.send_error_json(400, "input is required")
            return
        if body.get("stream") is True:
            h.send_error_json(400, "the simulator does not support streaming")
            return
        completed = fault is not None and fault.kind == "complete_lose_reply"
        with self._lock:
            rec = self._new_interaction_locked(body, idem, max(attempt, 1), completed)
            if fault is not None and fault.kind == "end_status" and fault.end_status:
                rec.end_status = fault.end_status
                rec.end_text = fault.text
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if completed:
            raise _Close
        if not rec.background:
            # A foreground create returns once the interaction is done.
            while True:
                with self._lock:
                    remaining = rec.complete_at - time.monotonic()
                    done = rec.forced_status is not None or remaining <= 0
                if done:
                    break
                if self._wait(min(remaining, 0.05)):
                    raise _Close
        with self._lock:
            reply = rec.to_json(time.monotonic())
        h.send_json(200, reply)

    def _send_status_fault(self, h: _Handler, fault: FaultRule) -> None:
        headers: dict[str, str] = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        try:
            phrase = HTTPStatus(fault.status).phrase
        except ValueError:
            phrase = "error"
        h.send_error_json(
            fault.status, f"simulated fault: {fault.status} {phrase}", headers,
            reason=fault.reason, retry_delay=fault.retry_delay,
        )

    def _on_interaction(self, h: _Handler, method: str, iid: str, query: Mapping[str, list[str]]) -> None:
        with self._lock:
            rec = self._interactions.get(iid)
            idem = rec.idem if rec is not None else None
            self._count_locked(method, idem)
        if not self._check_key(h, query):
            return
        with self._lock:
            fault = self._pick_fault(method, idem)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        with self._lock:
            rec = self._interactions.get(iid)
            if rec is None:
                reply: tuple[int, Any] | None = None
            else:
                now = time.monotonic()
                if method == "cancel" and rec.status(now) in ("in_progress", "queued", "idle", "requires_action"):
                    rec.forced_status = "cancelled"
                    rec.updated = _now_iso()
                if method == "delete":
                    del self._interactions[iid]
                    reply = (200, {})
                else:
                    reply = (200, rec.to_json(now))
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if fault is not None and fault.kind == "complete_lose_reply":
            raise _Close
        if reply is None:
            h.send_error_json(404, f"interaction {iid} not found")
        else:
            h.send_json(*reply)

    def _cleanup_create(self, h: _Handler, raw: bytes) -> None:
        key = h.headers.get("Idempotency-Key") or None
        try:
            payload: Any = json.loads(raw) if raw else {}
        except ValueError:
            payload = None
        with self._lock:
            attempt = self._count_locked("cleanup", key)
            fault = self._pick_fault("cleanup", key)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        if payload is None:
            h.send_error_json(400, "request body must be JSON")
            return
        completed = fault is not None and fault.kind == "complete_lose_reply"
        now = time.monotonic()
        with self._lock:
            existing = (
                self._job_by_key_locked(key) if (key and self.dedupes_by_key) else None
            )
            if existing is not None:
                code, job = 200, existing
                if completed:
                    job.forced_complete = True
            else:
                self._cleanup_seq += 1
                job = _CleanupJob(
                    id=f"cln-{self._cleanup_seq}",
                    key=key,
                    payload=payload,
                    attempt=max(attempt, 1),
                    created_mono=now,
                    duration=self.cleanup_seconds,
                    selected=self.cleanup_selected,
                    created=_now_iso(),
                    forced_complete=completed,
                )
                self._jobs[job.id] = job
                code = 202
            reply = job.to_json(now)
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if completed:
            raise _Close
        h.send_json(code, reply)

    def _job_by_key_locked(self, key: str) -> _CleanupJob | None:
        for job in reversed(list(self._jobs.values())):
            if job.key == key:
                return job
        return None

    def _cleanup_get(
        self, h: _Handler, jid: str | None, query: dict[str, list[str]]
    ) -> None:
        key = query.get("key", [None])[-1]
        with self._lock:
            if jid is not None:
                job = self._jobs.get(jid)
            elif key:
                job = self._job_by_key_locked(key)
            else:
                job = None
            idem = job.key if job is not None else key
            self._count_locked("cleanup_get", idem)
            fault = self._pick_fault("cleanup_get", idem)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        with self._lock:
            reply = job.to_json(time.monotonic()) if job is not None else None
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if fault is not None and fault.kind == "complete_lose_reply":
            raise _Close
        if reply is None and not (jid or key):
            h.send_error_json(400, "need a job id (/cleanup/ID) or ?key=K")
        elif reply is None:
            what = f"cleanup job {jid}" if jid else f"cleanup job with key {key!r}"
            h.send_error_json(404, f"{what} not found")
        else:
            h.send_json(200, reply)

    # -- control endpoints -----------------------------------------------------
    def _control(self, h: _Handler, verb: str, path: str, raw: bytes) -> None:
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            h.send_error_json(400, "control body must be JSON")
            return
        route = (verb, path.rstrip("/"))
        try:
            if route == ("GET", "/_sim/calls"):
                h.send_json(200, self.calls())
            elif route == ("POST", "/_sim/reset"):
                self.reset()
                h.send_json(200, {"ok": True})
            elif route == ("GET", "/_sim/faults"):
                with self._lock:
                    rates = dict(self._rates)
                h.send_json(200, {"faults": self.faults(), "rates": rates})
            elif route == ("POST", "/_sim/faults"):
                if not isinstance(body, dict):
                    raise ValueError("fault body must be a JSON object")
                if "rates" in body:
                    self.set_fault_rates(body["rates"], seed=body.get("seed"))
                else:
                    allowed = {
                        "kind",
                        "count",
                        "match_idem",
                        "method",
                        "status",
                        "seconds",
                        "retry_after",
                        "reason",
                        "retry_delay",
                        "location",
                        "end_status",
                        "text",
                    }
                    unknown = set(body) - allowed
                    if unknown:
                        raise ValueError(f"unknown fault fields: {sorted(unknown)}")
                    if "kind" not in body:
                        raise ValueError("fault needs a kind")
                    self.add_fault(**body)
                h.send_json(200, {"ok": True, "faults": self.faults()})
            elif route == ("DELETE", "/_sim/faults"):
                self.clear_faults()
                h.send_json(200, {"ok": True})
            elif route == ("GET", "/_sim/config"):
                h.send_json(200, self.configure())
            elif route == ("POST", "/_sim/config"):
                if not isinstance(body, dict):
                    raise ValueError("config body must be a JSON object")
                allowed = {
                    "dedupes_by_key",
                    "cleanup_seconds",
                    "complete_after",
                    "cleanup_selected",
                    "api_key",
                    "unknown_models",
                }
                unknown = set(body) - allowed
                if unknown:
                    raise ValueError(f"unknown config fields: {sorted(unknown)}")
                h.send_json(200, self.configure(**body))
            elif route == ("GET", "/_sim/interactions"):
                h.send_json(200, {"interactions": self.interactions()})
            elif route == ("GET", "/_sim/cleanup"):
                h.send_json(200, {"jobs": self.cleanup_jobs()})
            else:
                h.send_error_json(404, f"no such control endpoint: {verb} {path}")
        except (ValueError, TypeError) as exc:
            h.send_error_json(400, str(exc))


# -- CLI ------------------------------------------------------------------------
def _iter_rates(items: Sequence[str]) -> Iterator[tuple[str, float]]:
    for item in items:
        kind, sep, rate = item.partition("=")
        if not sep:
            raise ValueError(f"--fault-rate expects kind=rate, got {item!r}")
        yield kind.strip(), float(rate)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    complete_after: float = 0.0,
    fault_rates: Mapping[str, float] | None = None,
    seed: int | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM, after printing ``simulator listening on URL``; returns 0."""
    sim = Simulator(host, port, complete_after)
    if fault_rates:
        sim.set_fault_rates(fault_rates, seed=seed)
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    sim.start()
    try:
        print(f"simulator listening on {sim.url}", flush=True)
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: ``python -m ledger.simulator --port 0 ...``; returns an exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m ledger.simulator",
        description="Loopback simulator of the Gemini Interactions API and a clean-up API.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="loopback host (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port (0 = pick a free one)"
    )
    parser.add_argument(
        "--complete-after",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds until an interaction completes",
    )
    parser.add_argument(
        "--fault-rate",
        action="append",
        default=[],
        metavar="KIND=RATE",
        help=f"random fault rate for creates; kinds: {', '.join(FAULT_KINDS)}",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for random faults")
    args = parser.parse_args(argv)
    if not is_loopback_host(args.host):
        parser.error(
            f"refusing non-loopback host {args.host!r} (use 127.0.0.1, ::1 or localhost)"
        )
    try:
        rates = dict(_iter_rates(args.fault_rate))
        Simulator(args.host, args.port).set_fault_rates(rates)  # validate early
    except ValueError as exc:
        parser.error(str(exc))
    return serve(args.host, args.port, args.complete_after, rates, args.seed)


if __name__ == "__main__":
    sys.exit(main())
