"""The HTTP side: the threaded server, the request handler, routing, and ``Simulator``'s lifecycle."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from ledger.simulator.base import _Close, is_loopback_host
from ledger.simulator.cleanup import DEFAULT_CLEANUP_SELECTED
from ledger.simulator.control import ControlMixin
from ledger.simulator.errors import error_body
from ledger.simulator.gemini import DEFAULT_API_KEY, DEFAULT_RETENTION_SECONDS


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

    def send_body(
        self, code: int, content_type: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer ``code`` with ``data`` as ``content_type``."""
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_json(
        self, code: int, body: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_body(code, "application/json", json.dumps(body).encode(), headers)

    def send_error_json(
        self,
        code: int,
        message: str,
        headers: Mapping[str, str] | None = None,
        *,
        status: str | None = None,
        reason: str | None = None,
        retry_delay: float | None = None,
        shape: str = "google",
        word: str | None = None,
    ) -> None:
        """Answer with an error body in ``shape`` ("google": ``reason`` adds an ErrorInfo, ``retry_delay`` a
        RetryInfo; "interactions": the code ``word``, else the error page's code for ``code``, and the message)."""
        self.send_json(
            code,
            error_body(code, message, shape=shape, status=status, reason=reason, retry_delay=retry_delay, word=word),
            headers,
        )

    def send_redirect(self, code: int, location: str) -> None:
        """Answer a 3xx with ``Location`` and an empty body."""
        self.send_response(code)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()


class Simulator(ControlMixin):
    """A loopback Gemini Interactions + storage clean-up API with faults, counters, webhooks and a console.

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
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        echo_labels: bool = True,
        echo_webhook_config: bool = True,
        retention_seconds: float | None = DEFAULT_RETENTION_SECONDS,
        cancel_delay: float = 0.0,
        webhook_time_compression: float = 1.0,
        webhook_first_attempt_fail_rate: float = 0.0,
        error_shape: str = "interactions",
    ) -> None:
        """Configure (not start) a simulator; raises ValueError for a non-loopback host or a bad setting.

        ``api_key``: the key every Interactions request must carry (``x-goog-api-key`` or ``?key=``);
        None accepts any. ``unknown_models``: model names a create answers with 404 NOT_FOUND.
        ``webhook_url`` (``http://`` on loopback) and ``webhook_secret`` (``whsec_...``): with both,
        signed webhook events are POSTed there (see ``ledger.simulator.webhooks``); by default none.
        The other settings are those of ``configure`` (echo switches, retention, cancel delay, delivery retries,
        error shape). By default an interaction is kept one day (the free tier's documented retention), labels are
        echoed, and errors come in the Interactions API's documented shape.
        """
        if not is_loopback_host(host):
            raise ValueError(
                f"refusing to serve on non-loopback host {host!r}: "
                "the simulator only binds 127.0.0.0/8, ::1 or localhost"
            )
        self._init_base(host, port, complete_after)
        self._init_faults()
        self._init_webhooks(webhook_url, webhook_secret)
        self._init_gemini(api_key, unknown_models)
        self._init_cleanup(dedupes_by_key, cleanup_seconds, cleanup_selected)
        self.configure(
            echo_labels=echo_labels, echo_webhook_config=echo_webhook_config, retention_seconds=retention_seconds,
            cancel_delay=cancel_delay, webhook_time_compression=webhook_time_compression,
            webhook_first_attempt_fail_rate=webhook_first_attempt_fail_rate, error_shape=error_shape,
        )
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

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
        self._start_webhooks()
        return self

    def stop(self) -> None:
        """Stop serving and release hanging requests; returns promptly (idempotent)."""
        server, self._server = self._server, None
        self._stopping.set()
        if server is None:
            return
        self._stop_webhooks()
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

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # -- routing -------------------------------------------------------------
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
        elif self._console_route(h, verb, path, query):
            pass
        elif self._interactions_route(h, verb, path, query, raw):
            pass
        elif self._cleanup_route(h, verb, path, query, raw):
            pass
        else:
            h.send_error_json(404, f"no such endpoint: {verb} {path}")
