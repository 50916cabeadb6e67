"""A plain HTTP remote (`kind = "http"`), e.g. a storage clean-up service, over stdlib http.client.

One send is one `POST url` with the JSON payload and an `Idempotency-Key` header; the reply's `id` is the
handle. Reads are `GET lookup_url`, a template with `{handle}` and/or `{idem_key}`. Extra headers come
from environment variables named in `header_env`: their values are sent, never stored, never shown (a
reply that echoes one has it replaced by `[redacted:NAME]` before it is returned, see ledger.redaction).

http.client (not urllib) keeps the phases apart, so classification is explicit: a failure while
connecting means nothing left the process (not delivered); anything after the first byte was written
(timeout, reset, closed without a reply) is unknown. No redirects, no proxies, no retries of the POST.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ledger.config import RemoteConfig
from ledger.errors import ConfigError
from ledger.redaction import Redactor
from ledger.remotes.abort import ConnectionAbort, set_create_options
from ledger.remotes.base import (
    Capabilities,
    RemoteStatus,
    SendOutcome,
    redact_outcome,
    redact_status,
    retry_after_seconds,
    status_outcome,
)
from ledger.send_window import OpenWindow, SendWindow, SendWindowClosed

_RUNNING = frozenset({"accepted", "running", "queued", "pending", "in_progress"})
_COMPLETED = frozenset({"completed", "succeeded", "done"})
_FAILED = frozenset({"failed", "cancelled", "canceled", "rejected", "expired", "error"})


@dataclass(frozen=True)
class Exchange:
    """How one HTTP request ended: a reply (any status), not delivered, or unknown (maybe received)."""

    outcome: Literal["reply", "not_delivered", "unknown"]
    status: int | None = None
    body: bytes = b""
    retry_after: str | None = None
    error: str | None = None  # one line; never holds a header value
    reason: str | None = None  # for unknown: timeout, connection closed, reset ...
    unanswered: bool = False  # for unknown: no answer before the client gave up (a timeout)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def exchange(
    method: str, url: str, *, body: bytes | None, headers: Mapping[str, str], timeout: float,
    window: SendWindow | None = None,
) -> Exchange:
    """Send one request and read its reply; classify every failure by the phase it happened in.

    Connecting (DNS, refused, connect timeout, TLS handshake) fails before anything is written:
    `not_delivered`. A failure while writing the request or waiting for / reading the reply: `unknown`.
    With a `window` (a create), the connection gets `CREATE_SOCKET_OPTIONS` and is attached to the window
    (whose `close()` then resets it), `window.check()` runs once connected, last thing before the first byte
    is written (what it raises propagates, and nothing is written), and `window.request_sent()` once the
    whole request was written.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return Exchange("not_delivered", error=f"not an http(s) URL: {url!r}")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = cls(parts.hostname, parts.port, timeout=timeout)
    except ValueError as e:  # a malformed port
        return Exchange("not_delivered", error=_describe(e))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    abort: ConnectionAbort | None = None
    try:
        try:
            conn.connect()
        except OSError as e:  # ConnectionRefusedError, socket.gaierror, TimeoutError, ssl.SSLError ...
            return Exchange("not_delivered", error=f"could not connect to {parts.netloc}: {_describe(e)}")
        if window is not None:
            assert conn.sock is not None
            set_create_options(conn.sock)
            abort = ConnectionAbort(conn.sock)
            window.attach(abort)
            window.check()
        try:
            conn.request(method, target, body=body, headers=dict(headers))
            if window is not None:
                window.request_sent()
            resp = conn.getresponse()
            data = resp.read()
        except TimeoutError as e:
            return Exchange("unknown", error=_describe(e), reason="timeout after the request was sent",
                            unanswered=True)
        except http.client.RemoteDisconnected as e:
            return Exchange("unknown", error=_describe(e), reason="connection closed before a reply")
        except ConnectionError as e:
            return Exchange("unknown", error=_describe(e), reason="connection reset after the request was sent")
        except (OSError, http.client.HTTPException) as e:
            return Exchange("unknown", error=_describe(e), reason="broken reply")
        return Exchange("reply", status=resp.status, body=data, retry_after=resp.getheader("Retry-After"))
    finally:
        conn.close()
        if abort is not None:
            abort.close()


def request_body(payload: dict[str, Any]) -> bytes:
    """The body of a create, as it is sent: the payload as UTF-8 JSON, keys sorted, json's default spacing."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")


def request_body_size(rc: RemoteConfig, payload: dict[str, Any], *, idem_key: str, attempt: int) -> int:
    """The bytes a create's body takes on the wire (the key and attempt go in headers, not the body)."""
    return len(request_body(payload))


def render_lookup(template: str, *, handle: str | None = None, idem_key: str | None = None) -> str:
    """Fill a lookup_url template. A placeholder with no value is dropped: its `/{x}` path segment or its
    `name={x}` query pair. `.../cleanup/{handle}?key={idem_key}` gives `/cleanup/H` or `/cleanup?key=K`."""
    values = {"handle": handle, "idem_key": idem_key}
    parts = urlsplit(template)
    path = parts.path
    for name, value in values.items():
        ph = "{" + name + "}"
        if value is None:
            path = path.replace("/" + ph, "").replace(ph, "")
        else:
            path = path.replace(ph, quote(value, safe=""))
    pairs: list[tuple[str, str]] = []
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        keep = True
        for name, value in values.items():
            ph = "{" + name + "}"
            if ph in v:
                if value is None:
                    keep = False
                else:
                    v = v.replace(ph, value)
        if keep:
            pairs.append((k, v))
    return urlunsplit((parts.scheme, parts.netloc, path or "/", urlencode(pairs), ""))


@dataclass(frozen=True)
class HttpCapabilities(Capabilities):
    """Capabilities of an http remote, with one more honest sentence about orphaned sends."""

    def explain(self) -> list[str]:
        """The base sentences, plus what happens to a send whose worker died before recording it."""
        out = super().explain()
        if self.search_by_key and self.dedupes_by_key:
            out.append("a send left without an outcome (worker died) is found by key and attached automatically")
        elif self.search_by_key:
            out.append(
                "a send left without an outcome (worker died) is held for a person: a search by key can show it, "
                "but the remote does not promise one job per key, so nothing is attached automatically"
            )
        else:
            out.append("a send left without an outcome (worker died) is held for a person")
        return out


def _header_safe(value: str) -> bool:
    """True when http.client can put `value` in a header as is: Latin-1, no control character but tab."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return not any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value)


def _headers_from_env(rc: RemoteConfig) -> dict[str, str]:
    """The extra headers' values, read once when the adapter is built (before anything is reserved or sent).

    Raises ConfigError naming the header and the variable (never the value, a secret) when a variable is
    unset, empty, or holds what an HTTP header cannot carry.
    """
    headers: dict[str, str] = {}
    for header, var in rc.header_env.items():
        value = os.environ.get(var)
        if value is None or value == "":
            raise ConfigError(
                f"remote {rc.name}: environment variable {var} (for header {header}) is not set; export it"
            )
        if "\r" in value or "\n" in value:
            raise ConfigError(f"remote {rc.name}: environment variable {var} holds a line break; not a header value")
        if not _header_safe(value):
            raise ConfigError(
                f"remote {rc.name}: environment variable {var} (for header {header}) holds characters an HTTP header "
                "cannot carry (only Latin-1 text without control characters); fix the variable"
            )
        headers[header] = value
    return headers


def _reply_json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def _error_text(body: bytes) -> str:
    doc = _reply_json(body)
    if isinstance(doc, dict):
        err = doc.get("error")
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str):
            return message[:300]
        if isinstance(err, str):
            return err[:300]
    return body[:200].decode("utf-8", "replace")


class HttpRemote:
    """Adapter for `kind = "http"`: one POST per send (Idempotency-Key), GET lookups by handle or key."""

    kind = "http"

    def __init__(self, rc: RemoteConfig, redactor: Redactor | None = None) -> None:
        """Build from the remote's config; `redactor` (default: this remote's own secrets) cleans every
        reply before it is returned."""
        if not rc.url:
            raise ConfigError(f"remote {rc.name}: url is required for an http remote")
        self.name = rc.name
        self.url = rc.url
        self.lookup_url = rc.lookup_url
        self.timeout = rc.timeout_seconds
        self._headers = _headers_from_env(rc)
        self._redactor = redactor if redactor is not None else Redactor.for_remote(rc)
        template = rc.lookup_url or ""
        self.capabilities: Capabilities = HttpCapabilities(
            lookup_by_handle="{handle}" in template,
            search_by_key="{idem_key}" in template,
            dedupes_by_key=rc.dedupes_by_key,
        )

    def __repr__(self) -> str:
        return f"HttpRemote(name={self.name!r}, url={self.url!r}, headers from env={sorted(self._headers)})"

    def send(
        self, payload: dict[str, Any], idem_key: str, attempt: int, window: SendWindow | None = None
    ) -> SendOutcome:
        """POST the payload once with `Idempotency-Key`, through the send window; a 2xx reply's `id` is the handle."""
        try:
            out = self._send(payload, idem_key, window or OpenWindow())
        except SendWindowClosed as e:
            return SendOutcome("abandoned", error=str(e))
        return redact_outcome(out, self._redactor)

    def _send(self, payload: dict[str, Any], idem_key: str, window: SendWindow) -> SendOutcome:
        body = request_body(payload)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            **self._headers,
            "Idempotency-Key": idem_key,
        }
        ex = exchange("POST", self.url, body=body, headers=headers, timeout=self.timeout, window=window)
        if ex.outcome == "not_delivered":
            return SendOutcome("not_delivered", error=ex.error)
        if ex.outcome == "unknown":
            return SendOutcome("unknown", error=ex.error, reason=ex.reason, unanswered=ex.unanswered)
        status = ex.status or 0
        if 200 <= status < 300:
            doc = _reply_json(ex.body)
            handle = doc.get("id") if isinstance(doc, dict) else None
            if not isinstance(handle, (str, int)) or isinstance(handle, bool) or str(handle) == "":
                return SendOutcome(
                    "unknown", error=f"HTTP {status} without an id in the reply", reason="accepted without a handle"
                )
            return SendOutcome("accepted", handle=str(handle))
        return status_outcome(status, _error_text(ex.body), retry_after_seconds(ex.retry_after))

    def lookup(self, handle: str) -> RemoteStatus:
        """GET the job by handle (lookup_url with `{handle}`)."""
        if not self.capabilities.lookup_by_handle or not self.lookup_url:
            return RemoteStatus(
                "error", error=f"remote {self.name}: lookup_url has no {{handle}}; cannot look a job up by handle",
                snapshot={"asked": False}, handle=handle,
            )
        return self._get(render_lookup(self.lookup_url, handle=handle), handle=handle, idem_key=None)

    def search(self, idem_key: str) -> RemoteStatus:
        """GET the job by idem key (lookup_url with `{idem_key}`); the reply's `id` is the handle."""
        if not self.capabilities.search_by_key or not self.lookup_url:
            return RemoteStatus(
                "error", error=f"remote {self.name}: lookup_url has no {{idem_key}}; cannot search by idem key",
                snapshot={"asked": False},
            )
        return self._get(render_lookup(self.lookup_url, idem_key=idem_key), handle=None, idem_key=idem_key)

    def _get(self, url: str, *, handle: str | None, idem_key: str | None) -> RemoteStatus:
        return redact_status(self._get_raw(url, handle=handle, idem_key=idem_key), self._redactor)

    def _get_raw(self, url: str, *, handle: str | None, idem_key: str | None) -> RemoteStatus:
        headers = {"Accept": "application/json", **self._headers}
        ex = exchange("GET", url, body=None, headers=headers, timeout=self.timeout)
        if ex.outcome != "reply":
            why = f"{ex.error} ({ex.reason})" if ex.reason else ex.error
            return RemoteStatus("error", error=why, snapshot={"error": why}, handle=handle)
        status = ex.status or 0
        if status == 404:
            msg = _error_text(ex.body)
            return RemoteStatus(
                "not_found", error=f"HTTP 404: {msg}", snapshot={"http_status": 404, "error": msg}, handle=handle
            )
        if not 200 <= status < 300:
            msg = _error_text(ex.body)
            return RemoteStatus(
                "error", error=f"HTTP {status}: {msg}", snapshot={"http_status": status, "error": msg}, handle=handle
            )
        doc = _reply_json(ex.body)
        if isinstance(doc, list):
            if not doc:
                return RemoteStatus("not_found", error="no job carries this key", snapshot={"jobs": []}, handle=handle)
            if len(doc) > 1:
                return RemoteStatus(
                    "error", error=f"{len(doc)} jobs carry this key; look at them one by one",
                    snapshot={"jobs": doc}, handle=handle,
                )
            doc = doc[0]
        if not isinstance(doc, dict):
            return RemoteStatus("error", error="the reply is not a JSON object", snapshot={"http_status": status},
                                handle=handle)
        if idem_key is not None and doc.get("key") not in (None, idem_key):
            return RemoteStatus("error", error="the remote answered with a job of another key", snapshot=doc)
        if handle is not None and doc.get("id") not in (None, handle):
            return RemoteStatus("error", error="the remote answered with a job of another id", snapshot=doc,
                                handle=handle)
        found = str(doc["id"]) if doc.get("id") not in (None, "") else handle
        state = str(doc.get("status", ""))
        if state in _RUNNING:
            return RemoteStatus("running", snapshot=doc, handle=found)
        if state in _COMPLETED:
            return RemoteStatus("completed", result=doc, snapshot=doc, handle=found)
        if state in _FAILED:
            return RemoteStatus("failed", error=f"remote status {state}", snapshot=doc, handle=found)
        return RemoteStatus("error", error=f"unrecognised remote status {state!r}", snapshot=doc, handle=found)
