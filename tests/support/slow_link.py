"""A slow link on loopback: a TCP relay that carries requests to the simulator at a set rate.

Bytes from the client are read at `rate` bytes/s and passed on to the simulator as they come; replies come back
at full speed. The relay's receive buffer is small (`RECEIVE_BUFFER`), so what the link has not carried yet
waits on the client's side, as it does behind a slow link, and not in a buffer here: a reset from the client
stops the request where it is. A request cut short reaches the simulator without the rest of its body (the
simulator then stores nothing); a whole one is answered by the simulator in its documented shapes.

`connections` counts what was opened, `finished` what has ended on both sides, and `carried` the request
bytes each connection passed on, so a test can wait for every connection to end (a bounded wait) before it
counts the creates the simulator stored.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

RECEIVE_BUFFER = 16 * 1024
"""The relay's receive buffer (SO_RCVBUF): about what a slow link holds in flight."""


class SlowLink:
    """A relay from a loopback port to `upstream` (host, port), reading requests at `rate` bytes/s."""

    def __init__(self, upstream: tuple[str, int], rate: float) -> None:
        self.upstream = upstream
        self.rate = rate  # may be changed while it runs: the next chunk uses the new rate
        self._lock = threading.Lock()
        self.connections = 0
        self.finished = 0
        self.carried: list[int] = []
        self.body_sizes: list[int | None] = []  # each request's Content-Length once its headers crossed
        self.bodies_carried: list[int] = []  # bytes of each request's body carried (after its headers)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)  # accepted sockets inherit it
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        """The base URL a remote's config points at."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/"

    def start(self) -> SlowLink:
        """Accept connections on a daemon thread; returns self."""
        thread = threading.Thread(target=self._accept, name="slow-link", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop accepting; connections in progress end on their own."""
        self._stop.set()
        self._listener.close()

    def all_finished(self) -> bool:
        """True when every connection opened so far has ended on both sides."""
        with self._lock:
            return self.finished == self.connections

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                index = len(self.carried)
                self.carried.append(0)
                self.body_sizes.append(None)
                self.bodies_carried.append(0)
            threading.Thread(target=self._relay, args=(client, index), daemon=True).start()

    def _relay(self, client: socket.socket, index: int) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            self._done()
            return
        replies = threading.Thread(target=self._replies, args=(upstream, client), daemon=True)
        replies.start()
        self._requests(client, upstream, index)
        replies.join(timeout=30)
        for sock in (client, upstream):
            sock.close()
        self._done()

    def _requests(self, client: socket.socket, upstream: socket.socket, index: int) -> None:
        """Carry the client's bytes at `rate`, a small chunk at a time, until it closes or resets."""
        started = time.monotonic()
        sent = 0
        head = b""
        head_size: int | None = None
        while True:
            allowed = int((time.monotonic() - started) * self.rate) - sent
            if allowed <= 0:
                time.sleep(min(0.01, -allowed / self.rate + 0.001))
                continue
            try:
                chunk = client.recv(min(allowed, 4096))
            except OSError:  # reset by the client: nothing more comes
                chunk = b""
            if not chunk:
                break
            try:
                upstream.sendall(chunk)
            except OSError:
                break
            sent += len(chunk)
            if head_size is None:
                head += chunk
                end = head.find(b"\r\n\r\n")
                if end >= 0:
                    head_size = end + 4
                    self._note_headers(index, head[:end])
            with self._lock:
                self.carried[index] = sent
                if head_size is not None:
                    self.bodies_carried[index] = sent - head_size
        _shutdown(upstream, socket.SHUT_WR)

    def _note_headers(self, index: int, head: bytes) -> None:
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                with self._lock:
                    self.body_sizes[index] = int(value.strip())

    @staticmethod
    def _replies(upstream: socket.socket, client: socket.socket) -> None:
        while True:
            try:
                data = upstream.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            try:
                client.sendall(data)
            except OSError:
                break
        _shutdown(client, socket.SHUT_RDWR)
        _shutdown(upstream, socket.SHUT_RDWR)

    def _done(self) -> None:
        with self._lock:
            self.finished += 1

    def __enter__(self) -> SlowLink:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _shutdown(sock: socket.socket, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass
