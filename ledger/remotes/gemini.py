"""Gemini background interactions through google-genai 3.6.1: one fenced POST per send, nothing retried.

How a create is sent (google-genai 3.6.1, read from its source):
- `client.interactions` is the generated NextGen client (`google/genai/_gaos`). It sends through
  `api_client._httpx_client`, the client given as `HttpOptions.httpx_client`; with only `httpx2`
  installed that is an `httpx2.Client`. We build that client ourselves, so its settings are ours:
  no redirects (the SDK's own default client follows them), no keep-alive for creates (a reset after
  the write then means the server had the request, not that a stale pooled socket was closed), and a
  `request` event hook.
- The event hook attaches a httpcore `trace` callback to the request. httpcore calls it with
  `http11.send_request_headers.started` after the connection is open and immediately before the first
  byte of the request is written: that is where `SendWindow.check()` runs, the very last thing before
  the write. A `ContextVar` carries the current window into the hook, since one client serves every
  send. A second request in one send (a redirect or a client retry) finds the window used and is
  refused, unsent.
- SDK retries are off for creates (`HttpRetryOptions(attempts=1)`, else a 503 is POSTed five times).
  The SDK's client-side "automatic continuation" (each hop another create) never runs for
  `background=True` (and the SDK refuses `automatic_continuation=False` with it); the window would
  refuse a second create anyway.
- The client is pinned to the Gemini Developer API whatever the environment says: `vertexai=False`
  (GOOGLE_GENAI_USE_VERTEXAI / GOOGLE_GENAI_USE_ENTERPRISE / GOOGLE_CLOUD_* are not consulted); the key
  is passed explicitly, read from the config's `api_key_env` (the SDK's own GOOGLE_API_KEY /
  GEMINI_API_KEY / GOOGLE_GENAI_API_KEY lookups are not used); an explicit base URL
  (GOOGLE_GEMINI_BASE_URL is not consulted), API version (GOOGLE_GENAI_API_VERSION is not) and
  `DebugConfig` (GOOGLE_GENAI_CLIENT_MODE cannot switch it to record/replay). GOOGLE_GENAI_HTTP_CLIENT
  naming a library that is not installed makes the SDK fail at construction: a ConfigError.

How a failure is classified: if this send's window never let a request through, nothing left the
process: a connection failure is `not_delivered`, anything else is the SDK refusing the payload
(`invalid`). Once written, an HTTP answer is classified by its body and status (`ERROR_TABLE`), and a
timeout or reset is `unknown` (held).

Payloads are checked at submit (`validate_payload`, from `ledger.reservation.parse_payload`) with the same
validation the SDK's create runs, so a payload it would refuse never gets a reservation.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
import time
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final

import httpx2
import pydantic
from google import genai
from google.genai import types
from google.genai._gaos import models as sdk_models
from google.genai._gaos.google_genai import _normalize_create_body
from google.genai.client import DebugConfig

from ledger.config import RemoteConfig
from ledger.crashpoints import crashpoint
from ledger.errors import ConfigError, PayloadError
from ledger.redaction import Redactor
from ledger.remotes import gemini_api_key
from ledger.remotes.abort import CREATE_SOCKET_OPTIONS, ConnectionAbort
from ledger.remotes.base import (
    Capabilities,
    RemoteState,
    RemoteStatus,
    SendKind,
    SendOutcome,
    exception_chain,
    is_not_delivered,
    label_console_url,
    redact_outcome,
    redact_status,
)
from ledger.send_window import OpenWindow, SendWindow, SendWindowClosed

GEMINI_API_BASE_URL: Final = "https://generativelanguage.googleapis.com/"
API_VERSION: Final = "v1"
"""google-genai 3.6.1's default for the Gemini Developer API, pinned so GOOGLE_GENAI_API_VERSION cannot move it."""

MAX_PAYLOAD_DEPTH: Final = 64
"""A payload nested deeper than this is refused at submit (the SDK's validators recurse)."""

_CHECK_MODEL: Final = "gemini-flash-latest"  # a stand-in: the model name comes from the config, not the payload

# Every status google-genai 3.6.1 documents, each mapped on purpose. The list is the `InteractionStatus`
# literal in google/genai/_gaos/types/interactions/interaction.py:
#   "in_progress", "requires_action", "completed", "failed", "cancelled", "incomplete",
#   "budget_exceeded", "queued", "idle", "requires_continuation"   (| UnrecognizedStr)
# Anything else (e.g. "pending", "running", "expired", which the API does not have) is `needs_person`.
# The one mapping from a Gemini status to reclaim's remote state: the poller here and the webhook receiver
# both read it, so `requires_action` means the same everywhere (a person must look).
REMOTE_STATE_OF_STATUS: Final[dict[str, RemoteState]] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "failed",
    "budget_exceeded": "failed",
    # The remote definitely finished, the answer is partial: failed, with the partial text kept in the
    # result. Nothing to hold for; an approver may release it.
    "incomplete": "failed",
    "requires_action": "needs_person",
    "requires_continuation": "needs_person",
    "idle": "needs_person",
    "in_progress": "running",
    "queued": "running",
}


@dataclass(frozen=True)
class ErrorRule:
    """One row of ERROR_TABLE: what matches (every given field must) and what it means."""

    kind: SendKind
    words: str  # the reason in words; may use {http}, {status}, {reason}, {model}, {location}
    reason: str | None = None  # google.rpc.ErrorInfo.reason
    http: tuple[int, ...] = ()
    status: str | None = None  # google.rpc status name, e.g. FAILED_PRECONDITION
    http_class: int | None = None  # 2, 3, 4, 5: any status of that hundred

    def matches(self, reply: ErrorReply) -> bool:
        """True when every field this rule gives equals the reply's."""
        if self.reason is not None and reply.reason != self.reason:
            return False
        if self.http and reply.http_status not in self.http:
            return False
        if self.status is not None and reply.status != self.status:
            return False
        return self.http_class is None or reply.http_status // 100 == self.http_class


# The answers to a create, first match wins: ErrorInfo.reason first (it names the cause whatever the
# status), then HTTP status with its google.rpc status, then the status class. Reads use the same table
# for the words (a 404 on a read is `not_found` before the table is asked).
ERROR_TABLE: Final[tuple[ErrorRule, ...]] = (
    ErrorRule("remote_unusable", "the API key is invalid", reason="API_KEY_INVALID"),
    ErrorRule("remote_unusable", "the API key may not call this API: API_KEY_SERVICE_BLOCKED",
              reason="API_KEY_SERVICE_BLOCKED"),
    ErrorRule("remote_unusable", "the Gemini API is disabled for this project: SERVICE_DISABLED",
              reason="SERVICE_DISABLED"),
    ErrorRule("remote_unusable", "billing is disabled for this project: BILLING_DISABLED", reason="BILLING_DISABLED"),
    ErrorRule("remote_unusable", "the project is suspended: CONSUMER_SUSPENDED", reason="CONSUMER_SUSPENDED"),
    ErrorRule("remote_unusable", "billing or region: FAILED_PRECONDITION", http=(400,), status="FAILED_PRECONDITION"),
    ErrorRule("invalid", "the remote refused this payload: {status}", http=(400,)),
    ErrorRule("remote_unusable", "the API key was not accepted: {status}", http=(401,)),
    ErrorRule("remote_unusable", "billing: payment required (HTTP 402)", http=(402,)),
    ErrorRule("remote_unusable", "permission denied: {status}", http=(403,)),
    ErrorRule("remote_unusable", "model {model!r} not found", http=(404,)),
    ErrorRule("unknown", "HTTP {http} {status}: the remote may have taken it", http=(408, 409, 499)),
    ErrorRule("invalid", "the payload is too large or not processable (HTTP {http})", http=(413, 422)),
    ErrorRule("not_delivered", "rate limited or out of quota: {status}", http=(429,)),
    ErrorRule("remote_unusable", "the remote answered a redirect to {location}: check base_url", http_class=3),
    ErrorRule("unknown", "HTTP {http} {status}: the remote failed while handling the request", http_class=5),
    ErrorRule("remote_unusable", "HTTP {http} {status}: not an answer a create can get; check base_url",
              http_class=4),
    ErrorRule("unknown", "HTTP {http}: accepted, but the reply could not be read", http_class=2),
)


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP answer that was not a success, as Google's error body and headers describe it."""

    http_status: int
    status: str = ""  # google.rpc status name (or the Interactions error's code), "" if none
    reason: str = ""  # google.rpc.ErrorInfo.reason, "" if none
    message: str = ""
    retry_after: float | None = None  # RetryInfo.retryDelay, else retry-after-ms, else Retry-After (seconds)
    location: str | None = None  # for a 3xx

    def summary(self) -> str:
        """One line: HTTP status, google.rpc status, reason and message."""
        head = f"HTTP {self.http_status}" + (f" {self.status}" if self.status else "")
        if self.reason:
            head += f" ({self.reason})"
        if self.location:
            return f"{head}: redirect to {self.location}"
        return f"{head}: {self.message}"[:500] if self.message else head


def classify_reply(reply: ErrorReply, *, model: str | None = None) -> tuple[SendKind, str]:
    """(kind, reason in words) for an error answer, by ERROR_TABLE."""
    fields = {
        "http": reply.http_status,
        "status": reply.status or "no status",
        "reason": reply.reason,
        "model": model or "?",
        "location": reply.location or "(no Location header)",
    }
    for rule in ERROR_TABLE:
        if rule.matches(reply):
            return rule.kind, rule.words.format(**fields)
    return "unknown", f"HTTP {reply.http_status}: an answer reclaim does not know"


# -- the send window hook ----------------------------------------------------------------------------------


class _SendContext:
    """One send in flight on this thread: its window and its total deadline."""

    def __init__(self, window: SendWindow, timeout: float) -> None:
        self.window = window
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.written = False  # this send let a request through its window (a reused window may say more)
        self.abort: ConnectionAbort | None = None

    def close(self) -> None:
        """Drop this send's hold on its connection (the last close resets it: ledger.remotes.abort)."""
        if self.abort is not None:
            self.abort.close()

    def trace(self, name: str, info: dict[str, Any]) -> None:
        """httpcore's trace callback: attach the connection to the window once it is open, check the window right
        before the write, note when the whole request was written; bound each phase."""
        parts = name.split(".")
        if len(parts) != 3:
            return
        step = parts[1]
        if parts[2] == "complete":
            if step == "connect_tcp":  # the plain socket, before TLS wraps it: the give-up resets it
                sock = getattr(info.get("return_value"), "get_extra_info", lambda _name: None)("socket")
                if sock is not None:
                    self.abort = ConnectionAbort(sock)
                    self.window.attach(self.abort)
            elif step == "send_request_body":
                self.window.request_sent()
            return
        if parts[2] != "started":
            return
        if step == "send_request_headers":
            if self.deadline - time.monotonic() <= 0:
                raise SendWindowClosed(
                    f"the request deadline of {self.timeout:g} s passed before the request was written"
                )
            self.window.check()  # the last thing before the first byte of the request is written
            self.written = True
            crashpoint("after_window_check")  # tests stop a sender inside the window's residual gap here
        if step == "receive_response_headers":
            crashpoint("after_request_written")  # tests stop a sender while the create's reply is in flight
        if step in ("send_request_headers", "receive_response_headers", "receive_response_body"):
            self._bound(info)

    def _bound(self, info: dict[str, Any]) -> None:
        """No phase may wait longer than what is left of the total deadline."""
        extensions = getattr(info.get("request"), "extensions", None)
        if not isinstance(extensions, dict):
            return
        left = max(self.deadline - time.monotonic(), 0.001)
        old = extensions.get("timeout")
        old = old if isinstance(old, dict) else {}
        extensions["timeout"] = {
            phase: left if old.get(phase) is None else min(float(old[phase]), left)
            for phase in ("connect", "read", "write", "pool")
        }


_CURRENT_SEND: ContextVar[_SendContext | None] = ContextVar("reclaim_gemini_send", default=None)


def _window_hook(request: httpx2.Request) -> None:
    """The create client's request hook: hand the request the current send's trace callback."""
    ctx = _CURRENT_SEND.get()
    if ctx is None:
        raise SendWindowClosed("a create outside GeminiRemote.send has no send window; it was not sent")
    request.extensions["trace"] = ctx.trace


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context this process verifies the remote with, built on first use as httpx2 builds its
    default (SSL_CERT_FILE or SSL_CERT_DIR when set, else the system's certificates).

    Loading the certificates costs about 25 ms of CPU; left to themselves, each remote's two HTTP clients and
    two SDK clients would load them ten times (the SDK also builds contexts for its async, aiohttp and
    websocket transports, which reclaim never uses). A context is safe to share between clients and threads.
    """
    return httpx2.create_ssl_context()


def _sdk_client(*, api_key: str, base_url: str, timeout_ms: int, attempts: int, http: httpx2.Client) -> genai.Client:
    """A google-genai client pinned to the Gemini Developer API, sending through `http`; the SDK's own
    (unused) async transports verify with `tls_context()` too, so building one loads no certificates."""
    try:
        return genai.Client(
            vertexai=False,
            api_key=api_key,
            debug_config=DebugConfig(client_mode=None, replays_directory=None, replay_id=None),
            http_options=types.HttpOptions(
                base_url=base_url,
                api_version=API_VERSION,
                timeout=timeout_ms,
                retry_options=types.HttpRetryOptions(attempts=attempts),
                httpx_client=http,
                # `verify` for its httpx async client, `ssl` for its aiohttp and websocket ones.
                async_client_args={"verify": tls_context(), "ssl": tls_context()},
            ),
        )
    except (ImportError, ValueError) as e:  # e.g. GOOGLE_GENAI_HTTP_CLIENT names a library not installed
        raise ConfigError(f"the google-genai client cannot be built: {e}") from None


def create_kwargs(payload: dict[str, Any], *, model: str, idem_key: str, attempt: int) -> dict[str, Any]:
    """The arguments of the one `interactions.create` a send makes (and `validate_payload` checks).

    Only fields the v1 reference documents: the labels carry the idem key and attempt, so the interaction's own
    record names its job. No `webhook_config`: v1 does not document it (only v1beta does), and the documented
    answer to an unknown field is 400 `parameter_unknown`. Deliveries come from the project's static webhook.
    """
    kwargs: dict[str, Any] = {
        "model": model,
        "input": payload["input"],
        "background": True,
        "labels": {"idem": idem_key, "attempt": str(attempt)},
    }
    if "system_instruction" in payload:
        kwargs["system_instruction"] = payload["system_instruction"]
    if "generation_config" in payload:
        kwargs["generation_config"] = payload["generation_config"]
    return kwargs


def request_body_size(rc: RemoteConfig, payload: dict[str, Any], *, idem_key: str, attempt: int) -> int:
    """The exact bytes the body of this payload's create takes on the wire, as google-genai 3.6.1 writes it.

    The SDK writes the request as `json.dumps(body, separators=(",", ":"))`, non-ASCII text escaped as
    `\\uXXXX` (`_gaos/utils/serializers.py`, `marshal_json`): up to six bytes for a character UTF-8 writes in
    two, twelve for one outside the BMP. A text-only payload's body is `create_kwargs` as it is (no key the SDK
    adds or drops; the order of keys does not change the size), so it is measured here in microseconds; any
    other is put through the SDK's own create against a transport that only measures (tens of ms), so the
    SDK's normalisation (content blocks into a user step, defaults) is counted as sent.
    """
    kwargs = create_kwargs(payload, model=rc.model, idem_key=idem_key, attempt=attempt)
    if _text_only(payload):
        return len(json.dumps(kwargs, separators=(",", ":")))  # ASCII: one byte per character
    return _measured_by_sdk(kwargs)


class _Measured(Exception):
    """Raised by the measuring transport with the size of the body it was given; nothing is sent."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _measure(request: httpx2.Request) -> httpx2.Response:
    raise _Measured(len(request.content))


@functools.cache
def _measuring_client() -> genai.Client:
    """A google-genai client whose transport measures the request and sends nothing (built once)."""
    return _sdk_client(api_key="measure", base_url="http://measure.invalid/", timeout_ms=1000, attempts=1,
                       http=httpx2.Client(transport=httpx2.MockTransport(_measure)))


def _measured_by_sdk(kwargs: dict[str, Any]) -> int:
    try:
        _measuring_client().interactions.create(**kwargs)
    except Exception as exc:
        measured = next((e for e in exception_chain(exc) if isinstance(e, _Measured)), None)
        if measured is not None:
            return measured.size
        raise PayloadError(f"payload: the google-genai SDK refuses it: {sdk_refusal(exc)}") from None
    raise AssertionError("the measuring transport was not called")  # the SDK always writes a create


class GeminiRemote:
    """Adapter for `kind = "gemini"`: one POST per send; GET by handle; no search by label."""

    kind = "gemini"
    capabilities = Capabilities(lookup_by_handle=True, search_by_key=False, dedupes_by_key=False)

    def __init__(self, rc: RemoteConfig, redactor: Redactor | None = None) -> None:
        """Build both SDK clients from the remote's config; `redactor` (default: this remote's own secrets,
        the API key above all) cleans every answer before it is returned, so an error body that echoes the
        key never reaches the ledger."""
        self.name = rc.name
        self._redactor = redactor if redactor is not None else Redactor.for_remote(rc)
        self.model = rc.model
        self.timeout = float(rc.timeout_seconds)
        self.base_url = rc.base_url
        key = gemini_api_key(rc)
        base_url = rc.base_url or GEMINI_API_BASE_URL
        timeout_ms = max(1, int(self.timeout * 1000))
        # Every phase (connect, write, read, pool) is bounded by the total deadline; the trace callback
        # lowers the later ones to what is left of it, and the worker enforces the total from outside.
        phase = httpx2.Timeout(self.timeout)
        self._create_http = httpx2.Client(
            follow_redirects=False,
            timeout=phase,
            event_hooks={"request": [_window_hook]},
            transport=httpx2.HTTPTransport(
                verify=tls_context(), limits=httpx2.Limits(max_keepalive_connections=0),
                socket_options=CREATE_SOCKET_OPTIONS,  # a give-up resets the connection: ledger.remotes.abort
            ),
        )
        self._read_http = httpx2.Client(follow_redirects=False, timeout=phase, verify=tls_context())
        self._create_client = _sdk_client(
            api_key=key, base_url=base_url, timeout_ms=timeout_ms, attempts=1, http=self._create_http
        )
        self._read_client = _sdk_client(
            api_key=key, base_url=base_url, timeout_ms=timeout_ms, attempts=3, http=self._read_http
        )

    def close(self) -> None:
        """Close both HTTP clients (idempotent)."""
        self._create_http.close()
        self._read_http.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # half-built (the constructor raised) or interpreter shutdown
            pass

    def console_url(self, idem_key: str) -> str | None:
        """Where a person can list this idem key's interactions: the simulator's read-only console when
        `base_url` points at it; None for Google (AI Studio's logs, filtered by the label)."""
        if not self.base_url:
            return None
        return label_console_url(self.base_url, idem_key)

    def send(
        self, payload: dict[str, Any], idem_key: str, attempt: int, window: SendWindow | None = None
    ) -> SendOutcome:
        """POST one interactions.create(background=True) labelled with the idem key, through `window`."""
        return redact_outcome(self._send(payload, idem_key, attempt, window), self._redactor)

    def _send(self, payload: dict[str, Any], idem_key: str, attempt: int, window: SendWindow | None) -> SendOutcome:
        ctx = _SendContext(OpenWindow() if window is None else window, self.timeout)
        token = _CURRENT_SEND.set(ctx)
        try:
            kwargs = create_kwargs(payload, model=self.model, idem_key=idem_key, attempt=attempt)
            interaction = self._create_client.interactions.create(**kwargs)
        except Exception as exc:
            return classify_create_failure(exc, written=ctx.written, refusal=ctx.window.refusal, model=self.model)
        finally:
            _CURRENT_SEND.reset(token)
            ctx.close()
        handle = getattr(interaction, "id", None)
        if not handle:
            return SendOutcome("unknown", error="accepted without an id in the reply", reason="no handle in reply")
        return SendOutcome("accepted", handle=str(handle))

    def lookup(self, handle: str) -> RemoteStatus:
        """GET the interaction; its status mapped by REMOTE_STATE_OF_STATUS; 404 -> not_found; other failures -> error."""
        try:
            interaction = self._read_client.interactions.get(id=handle)
        except Exception as exc:
            return redact_status(read_failure(exc, handle), self._redactor)
        return redact_status(
            status_from_snapshot(interaction.model_dump(mode="json", exclude_none=True), handle), self._redactor
        )

    def search(self, idem_key: str) -> RemoteStatus:
        """Gemini Interactions has no list or search: always an error saying so."""
        return RemoteStatus("error", error="Gemini interactions cannot be searched by label")

    def cancel(self, handle: str) -> RemoteStatus:
        """Ask the remote to cancel an interaction; the answer is mapped like a lookup's."""
        try:
            interaction = self._read_client.interactions.cancel(id=handle)
        except Exception as exc:
            return redact_status(read_failure(exc, handle), self._redactor)
        return redact_status(
            status_from_snapshot(interaction.model_dump(mode="json", exclude_none=True), handle), self._redactor
        )


# -- what the remote answered ----------------------------------------------------------------------------------


def status_from_snapshot(snap: dict[str, Any], handle: str | None = None) -> RemoteStatus:
    """Map an interaction (as JSON) to a RemoteStatus by REMOTE_STATE_OF_STATUS."""
    raw = snap.get("status")
    state = REMOTE_STATE_OF_STATUS.get(raw) if isinstance(raw, str) else None
    if state is None:
        return RemoteStatus("needs_person", snapshot=snap, handle=handle,
                            error=f"the remote answered an unrecognised status '{raw}'")
    if state == "completed":
        text, _source = output_text(snap)
        result: dict[str, Any] = {"text": text, "interaction": snap}
        if not text:
            result["text_missing"] = True
        return RemoteStatus("completed", result=result, snapshot=snap, handle=handle)
    if state == "failed":
        why = f"remote status {raw}"
        if raw == "incomplete":
            text, _source = output_text(snap)
            return RemoteStatus("failed", result={"text": text, "incomplete": True, "interaction": snap},
                                snapshot=snap, handle=handle, error=f"{why}: the answer is partial")
        detail = _first_error_message(snap)
        return RemoteStatus("failed", snapshot=snap, handle=handle, error=f"{why}: {detail}" if detail else why)
    if state == "needs_person":
        return RemoteStatus("needs_person", snapshot=snap, handle=handle,
                            error=f"the remote is waiting for something: {raw}")
    return RemoteStatus(state, snapshot=snap, handle=handle)


def _first_error_message(snap: dict[str, Any]) -> str | None:
    errors = snap.get("errors")
    if isinstance(errors, list):
        for err in errors:
            if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"]:
                return str(err["message"])[:300]
    return None


def output_text(snap: dict[str, Any]) -> tuple[str, str]:
    """(text, where it came from): from `steps` (the current API), else `outputs`, else `output_text`.

    From steps, as google-genai builds `output_text`: the last run of text in model_output steps after the
    last user_input step, thoughts skipped. The source is "steps", "outputs", "output_text" or "none".
    """
    steps = snap.get("steps")
    if isinstance(steps, list):
        text = _text_from_steps(steps)
        if text:
            return text, "steps"
    outputs = snap.get("outputs")
    if isinstance(outputs, list):
        parts = [o["text"] for o in outputs if isinstance(o, dict) and isinstance(o.get("text"), str)]
        if "".join(parts):
            return "".join(parts), "outputs"
    legacy = snap.get("output_text")
    if isinstance(legacy, str) and legacy:
        return legacy, "output_text"
    return "", "none"


def _text_from_steps(steps: list[Any]) -> str:
    parts: list[str] = []
    collecting = False
    for step in reversed(steps):
        kind = step.get("type") if isinstance(step, dict) else None
        if kind == "user_input":
            break
        if kind == "thought":
            continue
        if kind != "model_output":
            if collecting:
                break
            continue
        content = step.get("content") if isinstance(step, dict) else None
        if not isinstance(content, list):
            continue
        stop = False
        for item in reversed(content):
            if not isinstance(item, dict) or item.get("type") != "text":
                if collecting:
                    stop = True
                    break
                continue
            collecting = True
            parts.append(item["text"] if isinstance(item.get("text"), str) else "")
        if stop:
            break
    return "".join(reversed(parts))


# -- failures -------------------------------------------------------------------------------------------------------


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


_TIMEOUT_NAMES = frozenset({"APITimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException",
                            "TimeoutError"})
_RESET_NAMES = frozenset({"RemoteProtocolError", "ReadError", "WriteError", "ConnectionResetError",
                          "BrokenPipeError", "LocalProtocolError"})


def classify_create_failure(
    exc: BaseException, *, written: bool, refusal: str | None = None, model: str | None = None
) -> SendOutcome:
    """Turn what a create raised into a SendOutcome: abandoned / not_delivered / invalid / per ERROR_TABLE /
    unknown. `written`: this send's window let a request out (else nothing left the process);
    `refusal`: the window's reason when it refused one."""
    chain = exception_chain(exc)
    closed = next((e for e in chain if isinstance(e, SendWindowClosed)), None)
    if closed is not None:
        if written:  # the first request went out; a second one (redirect, client retry) was refused
            return SendOutcome("unknown", error=refusal or str(closed),
                               reason="a second request in one send was refused after the first was written")
        return SendOutcome("abandoned", error=refusal or str(closed))
    if not written:
        if is_not_delivered(exc) or any(isinstance(e, httpx2.TransportError) for e in chain):
            return SendOutcome("not_delivered", error=f"nothing was sent: {_message(exc)}")
        return SendOutcome("invalid", error=f"the SDK refused the request before sending it: {sdk_refusal(exc)}")
    reply = error_reply(exc)
    if reply is not None:
        kind, words = classify_reply(reply, model=model)
        return SendOutcome(kind, error=reply.summary(), reason=words,
                           retry_after=reply.retry_after if kind == "not_delivered" else None)
    names = {type(e).__name__ for e in chain}
    if names & _TIMEOUT_NAMES:  # the client gave up (and reset the connection: ledger.remotes.abort)
        return SendOutcome("unknown", error=_message(exc), reason="timeout", unanswered=True)
    if names & _RESET_NAMES:
        why = "connection reset after the request was sent"
    else:
        why = "unexpected error after the request was sent"
    return SendOutcome("unknown", error=_message(exc), reason=why)


def read_failure(exc: BaseException, handle: str) -> RemoteStatus:
    """A failed GET / cancel: 404 -> not_found; any other answer or failure -> error, in words."""
    reply = error_reply(exc)
    if reply is None:
        msg = _message(exc)
        return RemoteStatus("error", snapshot={"error": msg}, error=msg, handle=handle)
    snap: dict[str, Any] = {"http_status": reply.http_status, "error": reply.summary()}
    if reply.http_status == 404:
        return RemoteStatus("not_found", snapshot=snap, error=reply.summary(), handle=handle)
    _kind, words = classify_reply(reply)
    return RemoteStatus("error", snapshot=snap, error=f"{words}: {reply.summary()}"[:500], handle=handle)


def error_reply(exc: BaseException) -> ErrorReply | None:
    """The HTTP answer behind an SDK exception (APIStatusError, or the GenAiError it wraps), or None."""
    status: int | None = None
    body: Any = None
    headers: Any = None
    for e in exception_chain(exc):
        code = getattr(e, "status_code", None)
        if status is None and isinstance(code, int) and not isinstance(code, bool):
            status = code
        if body is None:
            raw = getattr(e, "body", None)
            if isinstance(raw, (dict, str)) and raw != "":
                body = raw
        if headers is None:
            resp = getattr(e, "response", None) or getattr(e, "raw_response", None)
            headers = getattr(resp, "headers", None)
    if status is None:
        return None
    return parse_error_reply(status, body, headers)


def parse_error_reply(http_status: int, body: Any, headers: Any = None) -> ErrorReply:
    """Read an error body in either documented shape and the headers.

    Google's front end: `{"error": {"code": <int>, "message", "status", "details": [ErrorInfo, RetryInfo]}}`;
    the Interactions API: `{"error": {"code": "<string>", "message"}}` (its code, upper-cased, stands in for
    the status). The wait before a retry: RetryInfo, else `retry-after-ms` (milliseconds), else `Retry-After`
    (seconds or an HTTP date)."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            body = {"error": {"message": body.strip()[:300]}}
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    raw_status, code, raw_message = err.get("status"), err.get("code"), err.get("message")
    status = raw_status if isinstance(raw_status, str) else ""
    if not status and isinstance(code, str):  # the Interactions error shape: {"code": "invalid_request", ...}
        status = code.upper()
    message = raw_message if isinstance(raw_message, str) else ""
    reason = ""
    retry: float | None = None
    for detail in err.get("details") or []:
        if not isinstance(detail, dict):
            continue
        kind = str(detail.get("@type", ""))
        if kind.endswith("google.rpc.ErrorInfo") and isinstance(detail.get("reason"), str) and not reason:
            reason = detail["reason"]
        elif kind.endswith("google.rpc.RetryInfo") and retry is None:
            retry = _duration(detail.get("retryDelay"))
    get = getattr(headers, "get", None)
    if retry is None and callable(get):
        retry = _retry_after_ms_header(get("retry-after-ms"))
    if retry is None and callable(get):
        retry = _retry_after_header(get("retry-after"))
    location = get("location") if callable(get) and 300 <= http_status < 400 else None
    return ErrorReply(http_status=http_status, status=status, reason=reason, message=message.strip()[:300],
                      retry_after=retry, location=location)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _duration(value: Any) -> float | None:
    """A protobuf Duration as JSON ("7s", "1.5s") or as {"seconds", "nanos"}, in seconds."""
    if isinstance(value, str):
        m = _DURATION.match(value)
        return float(m.group(1)) if m else None
    if isinstance(value, dict):
        try:
            return float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
        except (TypeError, ValueError):
            return None
    return None


def _retry_after_ms_header(value: Any) -> float | None:
    """`retry-after-ms` (a number of milliseconds) in seconds; None when absent or not a finite number >= 0."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        ms = float(value)
    except ValueError:
        return None
    if ms != ms or ms in (float("inf"), float("-inf")) or ms < 0:
        return None
    return ms / 1000.0


def _retry_after_header(value: Any) -> float | None:
    """Retry-After as seconds or an HTTP date, in seconds from now."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


# -- payloads, checked at submit ------------------------------------------------------------------------------------


_create_request: pydantic.TypeAdapter[Any] | None = None


def _request_adapter() -> pydantic.TypeAdapter[Any]:
    global _create_request
    if _create_request is None:
        _create_request = pydantic.TypeAdapter(sdk_models.CreateInteractionRequest)
    return _create_request


def validate_payload(payload: dict[str, Any]) -> None:
    """Refuse (PayloadError) a gemini payload the SDK would refuse before sending, or one nested too deep.

    The check is the one `client.interactions.create` runs before it builds a request (google-genai 3.6.1,
    `_gaos/google_genai.py` then `_gaos/interactions.py`): the body of the very create a send makes
    (`create_kwargs`) goes through the SDK's `_normalize_create_body`, then is validated as the SDK's
    request model `CreateInteractionRequest` (whose model variant, `CreateModelInteraction`, types
    `input` as a string, content blocks or steps, `system_instruction` as a string and
    `generation_config` as `GenerationConfig`). The SDK builds that validator anew on every call
    (~30 ms); here it is built once. A payload of text alone (`input` and any `system_instruction`
    strings, nothing else) is one the model types as plain `str` take whatever the text, so it is not
    run through the validator (tests check the two agree).
    """
    if _text_only(payload):
        return
    _check_depth(payload)
    body = create_kwargs(payload, model=_CHECK_MODEL, idem_key="0" * 32, attempt=1)
    try:
        _request_adapter().validate_python({"body": _normalize_create_body(body)})
    except (pydantic.ValidationError, TypeError, ValueError) as exc:
        raise PayloadError(f"payload: the google-genai SDK refuses it: {sdk_refusal(exc)}") from None


def _text_only(payload: dict[str, Any]) -> bool:
    """True for a payload the SDK's request model takes whatever its text: a string `input` and at most
    a string `system_instruction` (both typed plain `str` there, with no constraint)."""
    n = len(payload)
    if type(payload.get("input")) is not str:
        return False
    return n == 1 or (n == 2 and type(payload.get("system_instruction")) is str)


def _check_depth(payload: dict[str, Any]) -> None:
    """Refuse nesting deeper than MAX_PAYLOAD_DEPTH, without recursing (so never a RecursionError)."""
    stack: list[tuple[Any, int, str]] = [(v, 2, str(k)) for k, v in payload.items()]
    while stack:
        node, depth, key = stack.pop()
        if isinstance(node, dict):
            children: list[Any] = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_PAYLOAD_DEPTH:
            raise PayloadError(f"payload: {key!r} is nested more than {MAX_PAYLOAD_DEPTH} levels deep; flatten it")
        stack.extend((child, depth + 1, key) for child in children)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def sdk_refusal(exc: BaseException) -> str:
    """One line for what the SDK refused: the first pydantic error on the model-interaction variant."""
    errors = next((e for e in exception_chain(exc) if isinstance(e, pydantic.ValidationError)), None)
    if errors is None:
        return _message(exc)
    rows = [row for row in errors.errors() if "CreateModelInteraction" in row["loc"]] or list(errors.errors())
    described: list[tuple[bool, str]] = []
    for row in rows:
        loc = list(row["loc"])
        if "CreateModelInteraction" in loc:
            loc = loc[loc.index("CreateModelInteraction") + 1:]
        # pydantic names union members in `loc` ("str", "list[...]", "function-wrap[...]"): keep field names
        # and indexes only; an error whose path had none of that noise is the most telling.
        kept = [p for p in loc if isinstance(p, int) or (_NAME.match(p) and p not in _TYPE_TAGS)]
        clean = len(kept) == len(loc)
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in kept).lstrip(".")
        msg = str(row["msg"]).removeprefix("Value error, ")
        described.append((clean, f"{path or 'body'}: {msg}"))
    best = next((text for clean, text in described if clean), described[0][1] if described else str(errors))
    more = len(described) - 1
    return (best + (f" (and {more} more)" if more > 0 else ""))[:300]
