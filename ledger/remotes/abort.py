"""Abort, do not close: a create's connection is reset when its send is given up, so no further byte leaves.

Closing a socket does not stop a request: the kernel keeps sending what the process had handed it, after the
sending thread gave up and even after the process exited, and a remote that reads the whole body runs it. So
every connection that carries a create is opened with two socket options (`CREATE_SOCKET_OPTIONS`):

- `SO_LINGER` on with a zero timeout: the socket's last close resets the connection (RST) and throws away
  whatever was not yet sent, instead of sending it first. That close is the sending thread's, or the
  kernel's when the process exits or is killed.
- `TCP_NOTSENT_LOWAT` (Linux, macOS): the kernel holds at most `NOTSENT_LOWAT` bytes of the body that have not
  yet gone out; the sending thread waits for the link instead of filling a send buffer of megabytes. The
  write of the body therefore finishes only once the body has (nearly all) left, and what the kernel could
  still send on its own while the process is stopped is bounded by it.

`ConnectionAbort` holds a duplicate of the connected socket, so another thread can act on the connection
whatever the sending thread does with its own: `abort()` shuts it down both ways (the sending thread's write
fails at once; the kernel queues nothing more), and the last close, the sending thread's or `close()`'s,
resets it. What a reset cannot stop: bytes already on the wire or in the remote's buffers when it goes out
(about one round trip of data), and a body that had fully left before the send was given up (docs/design.md).
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Final

NOTSENT_LOWAT: Final = 16 * 1024
"""Bytes of a create's body the kernel may hold not yet sent (TCP_NOTSENT_LOWAT)."""

_LINGER_RESET: Final = struct.pack("ii", 1, 0)  # struct linger {l_onoff = 1, l_linger = 0}: close resets

CREATE_SOCKET_OPTIONS: Final[list[tuple[int, int, int] | tuple[int, int, bytes]]] = [
    (socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET),
]
if hasattr(socket, "TCP_NOTSENT_LOWAT"):
    CREATE_SOCKET_OPTIONS.append((socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, NOTSENT_LOWAT))
"""The options every create's socket gets, as (level, option, value), in httpcore's `socket_options` form."""


def set_create_options(sock: socket.socket) -> None:
    """Give a connected socket `CREATE_SOCKET_OPTIONS` (for a client that takes no socket options, http.client)."""
    for level, option, value in CREATE_SOCKET_OPTIONS:
        sock.setsockopt(level, option, value)


class ConnectionAbort:
    """The means to reset one create's connection from any thread.

    Built from the connected socket, plain or TLS (a duplicate of its descriptor is a plain socket on the same
    connection: a TLS socket cannot be duplicated as such), it keeps that duplicate, so the connection outlives
    the sender's own close until `close()` here: the reset then comes from whichever close is last. `abort()`
    and `close()` are idempotent and never raise.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._lock = threading.Lock()
        self._dup: socket.socket | None = socket.fromfd(sock.fileno(), sock.family, sock.type, sock.proto)
        self.aborted = False

    def abort(self) -> None:
        """Shut the connection down both ways: no further byte of the request is queued, the sender's blocked
        write fails at once, and the sender's close resets the connection (SO_LINGER 0)."""
        with self._lock:
            self.aborted = True
            if self._dup is None:
                return
            try:
                self._dup.shutdown(socket.SHUT_RDWR)
            except OSError:  # already reset or closed by the peer: nothing more can leave
                pass

    def close(self) -> None:
        """Drop the duplicate; once the sender has closed its socket too, the connection is gone (reset)."""
        with self._lock:
            dup, self._dup = self._dup, None
        if dup is not None:
            dup.close()
