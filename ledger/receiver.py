"""The webhook receiver: verified deliveries from the remote become evidence; nothing else gets in.

Gemini's static project webhook signs each delivery the Standard Webhooks way (`webhook-id`,
`webhook-timestamp`, `webhook-signature`, HMAC-SHA256 under a `whsec_` secret); the `standardwebhooks`
package verifies it, including the 5-minute timestamp window and a `webhook-signature` holding several
space-separated signatures (secret rotation). Header names are matched case-insensitively.

The documented delivery is a thin envelope::

    {"type": "interaction.completed", "version": "v1", "timestamp": "2026-01-02T03:04:05Z",
     "data": {"id": "<interaction id>"}}

(`interaction.failed` adds `data.error_code` and `data.error_message`). Nothing in it names our job, so
the receiver records the interaction id as evidence, attributed at once only when it is a job's own
handle; the next worker pass attributes the rest from the interaction's own record
(`ledger.worker.evidence.attribute_deliveries`). A `data.user_metadata` the documentation does not promise is
kept as a hint and never trusted. The receiver makes no remote call.

What the sender is told:
- 202: a verified delivery of an interaction event, recorded.
- 200: a verified delivery of a type reclaim does not act on (recorded as seen, nothing else), a delivery for an
  interaction registered foreign (another application's, ledger.foreign: only counted), and a redelivery or an
  exact replay of a `webhook-id` already recorded (nothing changes). Every verified
  delivery gets a 2xx: Gemini retries a non-2xx for a day and may disable the project's webhook.
- 4xx: unsigned, wrongly signed, stale, malformed, oversized or unreadable requests; counted by reason.
- 503: the ledger could not be written; the sender retries later.
- nothing (the connection is closed): a request that has not arrived whole within REQUEST_SECONDS of when the
  receiver began waiting for it, or that is still arriving when its slot is needed (see MAX_CONNECTIONS);
  counted as `too_slow` when some of it had arrived.

Refusals and redeliveries are counted in memory (`Tally`) and written in one small transaction at most
once a second, so a flood of unsigned requests does not become a flood of ledger writes.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook

from ledger import authors
from ledger.clock import Clock
from ledger.config import Config
from ledger.db import connect, write_tx
from ledger.errors import ConfigError
from ledger.redaction import Redactor
from ledger.remotes.gemini import REMOTE_STATE_OF_STATUS
from ledger.store import Connection
from ledger.store import evidence as evidence_store
from ledger.store import jobs as jobs_store
from ledger.transitions import apply

MAX_BODY = 256 * 1024
"""Bytes: a larger delivery is refused with 413."""

MAX_ID = 512
"""Characters: an interaction id or webhook id longer than this is malformed."""

REQUEST_SECONDS = 10.0
"""Seconds a request may take to arrive whole (request line, headers and body), counted from when the receiver
begins waiting for it; then its connection is closed unanswered, however steadily its bytes were arriving."""

MAX_CONNECTIONS = 64
"""Connections served at once. One more takes the slot of the connection whose request has been arriving the
longest, which is closed unanswered; only when no connection is still arriving (every one is being recorded or
answered) is it closed at once, counted as `busy`."""

SLOT_WAIT = 2.0
"""Seconds the receiver waits for a connection it closed to give up its slot."""

FLUSH_SECONDS = 1.0
"""The longest time a counted refusal waits in memory before it is written to the ledger."""

EVENT_STATUS: dict[str, str] = {
    "interaction.completed": "completed",
    "interaction.failed": "failed",
    "interaction.cancelled": "cancelled",
    "interaction.requires_action": "requires_action",
}
"""The delivery types reclaim acts on, and the interaction status each announces."""


@dataclass(frozen=True)
class Answer:
    """The HTTP answer to one delivery."""

    status: int
    message: str


class Tally:
    """Refusals and redeliveries counted in memory; `flush` writes them in one transaction.

    Thread-safe. `due()` says whether FLUSH_SECONDS passed since the last flush with something pending.
    """

    def __init__(self, every: float = FLUSH_SECONDS) -> None:
        self.every = every
        self._pending: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._last = time.monotonic()

    def add(self, reason: str) -> None:
        """Count one refusal (or redelivery) by reason."""
        with self._lock:
            self._pending[reason] += 1

    def due(self) -> bool:
        """True when something is pending and the last flush is at least `every` seconds old."""
        with self._lock:
            return bool(self._pending) and time.monotonic() - self._last >= self.every

    def flush(self, conn: Connection) -> None:
        """Write what is pending to the ledger's refusal counters; kept in memory when the write fails."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
            self._last = time.monotonic()
        if not pending:
            return
        try:
            with write_tx(conn):
                for reason, n in sorted(pending.items()):
                    evidence_store.count_refusal(conn, reason, n)
        except Exception:
            with self._lock:
                self._pending.update(pending)
            raise


def secrets(config: Config) -> dict[str, str]:
    """The signing secret of every remote that names `webhook_secret_env`, by remote name.

    Raises ConfigError naming the variable when one is not set.
    """
    out: dict[str, str] = {}
    for name, rc in config.remotes.items():
        if rc.webhook_secret_env:
            value = os.environ.get(rc.webhook_secret_env)
            if not value:
                raise ConfigError(
                    f"remote {name}: environment variable {rc.webhook_secret_env} (the webhook signing secret) is not set"
                )
            out[name] = value
    return out


def _verify(secret_by_remote: Mapping[str, str], body: bytes, headers: Mapping[str, str]) -> str | None:
    """The name of the remote whose secret verifies the delivery, or None."""
    for remote, secret in secret_by_remote.items():
        try:
            Webhook(secret).verify(body, dict(headers), json_parse=False)
        except Exception:  # wrong signature, stale or missing headers, malformed values: not this secret
            continue
        return remote
    return None


def _count(conn: Connection, tally: Tally | None, reason: str) -> None:
    if tally is not None:
        tally.add(reason)
        return
    with write_tx(conn):
        evidence_store.count_refusal(conn, reason)


def _refuse(conn: Connection, tally: Tally | None, reason: str, status: int, message: str) -> Answer:
    _count(conn, tally, reason)
    return Answer(status, message)


def _text(value: Any, limit: int = MAX_ID) -> str | None:
    """`value` when it is a storable string of at most `limit` characters, else None."""
    if isinstance(value, str) and value and len(value) <= limit and "\x00" not in value:
        return value
    return None


def receive(
    conn: Connection, config: Config, secret_by_remote: Mapping[str, str], body: bytes,
    headers: Mapping[str, str], *, clock: Clock, tally: Tally | None = None,
) -> Answer:
    """Verify one delivery and record it; the Answer says what the sender is told (see the module doc).

    Refusals are counted in `tally` when given (the server flushes it), else written at once. What is
    recorded has every secret the config names replaced by `[redacted:NAME]`. Raises only when the
    ledger cannot be read or written (the server answers 503).
    """
    lower = {k.lower(): v for k, v in headers.items()}
    if not all(lower.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature")):
        return _refuse(conn, tally, "unsigned", 401, "missing webhook-id, webhook-timestamp or webhook-signature")
    remote = _verify(secret_by_remote, body, lower)
    if remote is None:
        return _refuse(conn, tally, "bad_signature_or_stale", 401, "signature does not verify (or timestamp outside 5 min)")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return _refuse(conn, tally, "malformed", 400, "the body is not JSON")
    webhook_id = _text(lower["webhook-id"])
    kind = _text(doc.get("type"), 200) if isinstance(doc, dict) else None
    if webhook_id is None or kind is None:
        return _refuse(conn, tally, "malformed", 400, "not an event with a type and a usable webhook-id")
    data = doc.get("data")
    interaction = _text(data.get("id")) if isinstance(data, dict) else None
    if kind in EVENT_STATUS and interaction is None:
        return _refuse(conn, tally, "malformed", 400, f"{kind} without a usable data.id")
    # Verified and well formed: take out any secret the config names before a byte of it is stored.
    redactor = Redactor.from_config(config)
    doc, lower = redactor.redact_value(doc), redactor.redact_value(lower)
    webhook_id = str(lower["webhook-id"])
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    signature, now = lower["webhook-signature"], clock.now()
    recorded = True
    with write_tx(conn):
        first = evidence_store.delivery(conn, webhook_id)
        forged = first is not None and authors.required(config) and authors.sender_refusal(
            config, first.digest, first.proof) is not None
        seen = None if first is None or forged else first.signature
        if seen is None and kind in EVENT_STATUS:
            recorded = _record(conn, config, remote, kind, data, doc, webhook_id, signature,
                               lower["webhook-timestamp"], now, row_taken=forged)
        elif seen is None and not forged:
            evidence_store.record_delivery(conn, webhook_id=webhook_id, received_at=now, signature=signature,
                                           kind=kind, evidence_id=None)
    if forged:
        # A delivery row no receiver signed (inserted around reclaim) does not make this one a replay.
        _count(conn, tally, "unsigned_delivery_row")
    if seen is not None:
        _count(conn, tally, "replayed" if seen == signature else "redelivered")
        return Answer(200, "already received")
    if kind not in EVENT_STATUS:
        return Answer(200, f"ignored: reclaim does not act on {kind}")
    if not recorded:
        return Answer(200, "counted: another application's interaction (foreign)")
    return Answer(202, "recorded")


def _record(
    conn: Connection, config: Config, remote: str, kind: str, data: dict[str, Any], doc: dict[str, Any],
    webhook_id: str, signature: str, timestamp: str, now: float, *, row_taken: bool = False,
) -> bool:
    """Record a verified interaction event as evidence (inside the caller's transaction); False when its
    interaction is registered foreign (another application's: ledger.foreign), which only counts the delivery.
    `row_taken`: a forged row holds the delivery's id already (the evidence is recorded, the row is not)."""
    interaction = str(data["id"])
    status = EVENT_STATUS[kind]
    job = jobs_store.job_with_handle(conn, interaction)
    if job is None and evidence_store.count_foreign_delivery(conn, interaction, now):
        return False
    detail: dict[str, Any] = {"type": kind, "status": status, "remote": remote, "timestamp": timestamp,
                              "version": doc.get("version"), "sent_at": doc.get("timestamp")}
    for field in ("error_code", "error_message"):
        if isinstance(data.get(field), (str, int)):
            detail[field] = str(data[field])[:2000]
    hint = data.get("user_metadata")
    if isinstance(hint, dict):  # not promised by the documentation: kept, never trusted
        detail["hint"] = {str(k)[:40]: v for k, v in list(hint.items())[:8]
                          if isinstance(v, str) and _text(v, 200) and _text(str(k), 40)}
    ev_id = evidence_store.record(
        conn, at=now, source="webhook", idem_key=job.idem_key if job else "", attempt=job.attempt if job else None,
        handle=interaction, remote_state=REMOTE_STATE_OF_STATUS.get(status, "needs_person"),
        job=job.key if job else None, ref=webhook_id, detail=detail,
    )
    if not row_taken:
        evidence_store.record_delivery(conn, webhook_id=webhook_id, received_at=now, signature=signature, kind=kind,
                                       evidence_id=ev_id)
    if job is not None:
        apply(conn, job.key, "evidence", actor="reclaim-receiver", now=now, expected_state=job.state,
              detail={"source": "webhook", "webhook_id": webhook_id, "type": kind, "handle": interaction,
                      "attempt": job.attempt, "evidence_id": ev_id})
    return True


class _Arrival(io.RawIOBase):
    """A connection's incoming bytes, read only until the current request's `deadline` (a monotonic time).

    Each read waits at most the time left before the deadline; once it has passed, reads raise TimeoutError
    (and `expired` is set). Once `cut_off` is set, reads raise ConnectionAbortedError. `received` counts the
    bytes read since the caller last reset it.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.deadline = math.inf
        self.received = 0
        self.expired = False
        self.cut_off = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.cut_off:
            raise ConnectionAbortedError("closed to give its slot to another connection")
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError("the request did not arrive whole before its deadline")
        self.sock.settimeout(left)
        try:
            n = self.sock.recv_into(buffer)
        except TimeoutError:
            self.expired = True
            raise
        if self.cut_off:  # woken by the shutdown that cut it off
            raise ConnectionAbortedError("closed to give its slot to another connection")
        self.received += n
        return n


def _body_length(value: str | None) -> int | None:
    """The Content-Length as a number, or None when it is not a plain non-negative integer."""
    if value is None:
        return 0
    value = value.strip()
    return int(value) if value.isdigit() and len(value) <= 12 else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the ledger records what matters."""

    def setup(self) -> None:
        """Read the connection through an `_Arrival`, so that each request has one deadline for all its reads."""
        super().setup()
        self.rfile.close()
        self.arrival = _Arrival(self.connection)
        self.rfile = io.BufferedReader(self.arrival)

    def handle(self) -> None:
        """Serve the connection's requests; once this returns, the server can no longer cut it off."""
        try:
            super().handle()
        finally:
            self.server.arrived(self)

    def handle_one_request(self) -> None:
        """Wait at most the server's `request_seconds` for one whole request, then answer it; a request still
        arriving at its deadline has its connection closed unanswered (counted as `too_slow` when some of it
        had arrived; a connection idle between requests is closed uncounted)."""
        arrival = self.arrival
        arrival.deadline = time.monotonic() + self.server.request_seconds
        arrival.received, arrival.expired = 0, False
        self.server.arriving(self)
        try:
            super().handle_one_request()
        finally:
            self.server.arrived(self)
        if arrival.expired and arrival.received and not arrival.cut_off:  # a cut-off is counted where it is cut
            self.server.tally.add("too_slow")

    def cut_off(self) -> None:
        """Close the connection unanswered, waking a read that waits on it (called by the server, which holds
        its arrivals lock, so the connection is still open)."""
        self.arrival.cut_off = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _read_chunked(self) -> bytes | None:
        """The body of a chunked request, or None when it is malformed or larger than MAX_BODY."""
        out = bytearray()
        while True:
            line = self.rfile.readline(64).strip().split(b";", 1)[0]
            try:
                size = int(line, 16)
            except ValueError:
                return None
            if size < 0 or len(out) + size > MAX_BODY:
                return None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers, up to the blank line
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline(8)  # the CRLF after each chunk

    def do_POST(self) -> None:
        srv = self.server
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked()
            if body is None:
                self._refused("malformed", Answer(400, "a malformed or oversized chunked body"))
                return
        else:
            length = _body_length(self.headers.get("Content-Length"))
            if length is None:
                self._refused("malformed", Answer(400, "Content-Length is not a number"))
                return
            if length > MAX_BODY:
                self._refused("too_large", Answer(413, "body too large"))
                return
            body = self.rfile.read(length) if length > 0 else b""
            if len(body) < length:
                self.close_connection = True
                return
        srv.arrived(self)  # arrived whole: from here on it keeps its slot until it is answered
        self.connection.settimeout(srv.request_seconds)  # for writing the answer
        with srv.lock:
            try:
                answer = receive(srv.conn, srv.config, srv.secrets, body, dict(self.headers.items()),
                                 clock=srv.clock, tally=srv.tally)
            except Exception as e:  # the ledger is locked or gone: the sender retries later
                answer = Answer(503, f"{type(e).__name__}: {e}"[:200])
            srv.flush_if_due()
        self._answer(answer)

    def do_GET(self) -> None:
        self._answer(Answer(405, "POST webhook deliveries here"))

    def _refused(self, reason: str, answer: Answer) -> None:
        self.server.tally.add(reason)
        self.close_connection = True
        self._answer(answer)

    def _answer(self, answer: Answer) -> None:
        data = json.dumps({"status": answer.status, "message": answer.message}).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    conn: Connection
    config: Config
    secrets: Mapping[str, str]
    clock: Clock
    lock: threading.Lock
    tally: Tally
    slots: threading.BoundedSemaphore
    request_seconds: float
    arrivals: dict[_Handler, float]
    """The connections whose request is still arriving, by when the receiver began waiting for it."""
    arrivals_lock: threading.Lock

    def arriving(self, handler: _Handler) -> None:
        """`handler` is waiting for a request, from now on."""
        with self.arrivals_lock:
            self.arrivals[handler] = time.monotonic()

    def arrived(self, handler: _Handler) -> None:
        """`handler` is no longer waiting for a request; the server no longer cuts it off."""
        with self.arrivals_lock:
            self.arrivals.pop(handler, None)

    def cut_off_longest_arrival(self) -> bool:
        """Close the connection whose request has been arriving the longest (counted as `too_slow` when some of
        it had arrived); False when no request is arriving."""
        with self.arrivals_lock:
            if not self.arrivals:
                return False
            handler = min(self.arrivals, key=self.arrivals.__getitem__)
            del self.arrivals[handler]
            handler.cut_off()
            if handler.arrival.received:
                self.tally.add("too_slow")
            return True

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread in a free slot, else in the slot of the connection whose request has
        been arriving the longest (closed); when no request is arriving, close this one at once (`busy`)."""
        if not self.slots.acquire(blocking=False) and not (
            self.cut_off_longest_arrival() and self.slots.acquire(timeout=SLOT_WAIT)
        ):
            self.tally.add("busy")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or was too slow is not an error worth a traceback; anything else gets one line."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, socket.timeout, TimeoutError)):
            return
        print(f"reclaim receiver: {type(exc).__name__}: {exc}", file=sys.stderr)

    def service_actions(self) -> None:
        """Between requests (every poll interval of serve_forever): write counts that waited long enough."""
        with self.lock:
            self.flush_if_due()

    def flush_if_due(self) -> None:
        """Write the counted refusals when FLUSH_SECONDS passed (a failed write keeps them for later)."""
        if self.tally.due():
            try:
                self.tally.flush(self.conn)
            except Exception:  # the ledger is busy: the counts wait in memory
                pass

    def server_close(self) -> None:
        """Stop listening; write what the tally still holds."""
        super().server_close()
        with self.lock:
            try:
                self.tally.flush(self.conn)
            except Exception as e:
                print(f"reclaim receiver: refusal counts not written: {e}", file=sys.stderr)


def make_server(ledger: str | Path, config: Config, *, clock: Clock, host: str = "127.0.0.1", port: int = 0,
                request_seconds: float = REQUEST_SECONDS, max_connections: int = MAX_CONNECTIONS) -> _Server:
    """A bound receiver (not yet serving): `server.serve_forever()`; `server.server_address` has the port. Each
    request must arrive whole within `request_seconds`; at most `max_connections` are served at once.

    Raises ConfigError when no remote names a webhook secret, or its variable is not set.
    """
    found = secrets(config)
    if not found:
        raise ConfigError("no remote names webhook_secret_env: set it on the gemini remote to receive webhooks")
    server = _Server((host, port), _Handler)
    server.conn = connect(ledger, check_same_thread=False)
    server.config = config
    server.secrets = found
    server.clock = clock
    server.lock = threading.Lock()
    server.tally = Tally()
    server.slots = threading.BoundedSemaphore(max_connections)
    server.request_seconds = request_seconds
    server.arrivals = {}
    server.arrivals_lock = threading.Lock()
    return server
