"""A loopback webhook receiver for tests: counts POSTs by X-Reclaim-Event-Id and injects faults.

Faults (FIFO, each for the next `count` POSTs): "drop_reply" reads the whole request, then closes the
connection without a reply; "status" replies with an HTTP error (default 503); "gate" holds the reply until
`open_gate()` (bounded). `refuse()` stops listening (connection refused) and `start()` listens again on the
same port. Every POST is counted when it has been read, before any fault applies.
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

EVENT_ID_HEADER = "X-Reclaim-Event-Id"
GATE_LIMIT_SECONDS = 10.0


@dataclass
class Received:
    """One request as it arrived."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    event_id: str | None


@dataclass
class _Fault:
    kind: str
    count: int
    status: int = 503


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    received: list[Received] = field(default_factory=list)
    faults: list[_Fault] = field(default_factory=list)
    reply_status: int = 200
    reply_body: Any = field(default_factory=lambda: {"ok": True})
    gate: threading.Event = field(default_factory=threading.Event)
    gated: threading.Event = field(default_factory=threading.Event)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not worth a traceback."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _record(self, method: str) -> _Fault | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        st = self.server.state
        with st.lock:
            st.received.append(
                Received(method, self.path, dict(self.headers.items()), body, self.headers.get(EVENT_ID_HEADER))
            )
            if method != "POST" or not st.faults:
                return None
            fault = st.faults[0]
            fault.count -= 1
            if fault.count <= 0:
                st.faults.pop(0)
            return _Fault(fault.kind, 1, fault.status)

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_POST(self) -> None:
        fault = self._record("POST")
        st = self.server.state
        if fault is not None and fault.kind == "drop_reply":
            self.close_connection = True
            return
        if fault is not None and fault.kind == "status":
            self._reply(fault.status, {"error": {"code": fault.status, "message": "injected fault"}})
            return
        if fault is not None and fault.kind == "gate":
            st.gated.set()
            st.gate.wait(GATE_LIMIT_SECONDS)
        with st.lock:
            status, body, last = st.reply_status, st.reply_body, st.received[-1]
        self._reply(status, body(last) if callable(body) else body)

    def do_GET(self) -> None:
        self._record("GET")
        st = self.server.state
        with st.lock:
            body, last = st.reply_body, st.received[-1]
        self._reply(200, body(last) if callable(body) else body)


class WebhookReceiver:
    """`with WebhookReceiver().start() as rx:` ... `rx.count(event_id)`; `rx.url` is where to POST."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._state = _State()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> Self:
        """Listen (again) on the same port; returns self once bound."""
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), _Handler)
        server.state = self._state
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def refuse(self) -> None:
        """Stop listening: the next connection is refused. Counts and faults are kept."""
        server, self._server = self._server, None
        if server is None:
            return
        self._state.gate.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        self._state.gate.clear()

    stop = refuse

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.refuse()

    @property
    def url(self) -> str:
        """Where to POST notifications."""
        return f"http://{self.host}:{self.port}/hook"

    @staticmethod
    def free_port(host: str = "127.0.0.1") -> int:
        """A port nothing listens on right now (for a receiver that starts later)."""
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])

    # -- faults and replies
    def add_fault(self, kind: str, *, count: int = 1, status: int = 503) -> None:
        """Queue a fault for the next `count` POSTs: drop_reply, status or gate."""
        if kind not in ("drop_reply", "status", "gate"):
            raise ValueError(f"unknown fault {kind!r}")
        with self._state.lock:
            self._state.faults.append(_Fault(kind, count, status))

    def set_reply(self, body: Any, status: int = 200) -> None:
        """What a request without a fault is answered with: a JSON value, or a function of the Received."""
        with self._state.lock:
            self._state.reply_status, self._state.reply_body = status, body

    def wait_gated(self, timeout: float = 5.0) -> bool:
        """Wait until a POST is held at the gate."""
        return self._state.gated.wait(timeout)

    def open_gate(self) -> None:
        """Let held POSTs get their reply."""
        self._state.gate.set()

    # -- counts
    def received(self) -> list[Received]:
        """Every request so far, in arrival order."""
        with self._state.lock:
            return list(self._state.received)

    def count(self, event_id: str | None = None) -> int:
        """POSTs received (for one event id, or all)."""
        with self._state.lock:
            return sum(
                1 for r in self._state.received if r.method == "POST" and (event_id is None or r.event_id == event_id)
            )

    def by_event_id(self) -> dict[str | None, int]:
        """POST counts keyed by X-Reclaim-Event-Id."""
        out: dict[str | None, int] = {}
        for r in self.received():
            if r.method == "POST":
                out[r.event_id] = out.get(r.event_id, 0) + 1
        return out
