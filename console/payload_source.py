"""Where `reclaim submit --payload` takes its JSON text from: the value itself, `@FILE`, or `-` (stdin)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from ledger import BadInput

MAX_PAYLOAD_READ_BYTES = 64 * 1024 * 1024
"""The most `--payload @FILE` or `--payload -` reads (64 MiB): a bound on memory, far above what the payload
size rule (policy.send_margin_seconds * policy.min_send_rate) lets through; that rule is the one that decides."""
_CHUNK = 1024 * 1024


def payload_text(value: str) -> str:
    """The JSON text `--payload VALUE` stands for, not parsed or checked (parse_payload does that, as for any).

    - `@FILE`: the contents of FILE (a regular file or a pipe; `~` expanded, a relative path is from the current
      folder), which must be UTF-8.
    - `-`: all of stdin (a pipe or a redirected file, not a terminal), which must be UTF-8.
    - anything else: VALUE itself, unchanged. A JSON object starts with `{` (after optional whitespace) and no
      JSON text starts with `@` or is `-`, so neither form can be mistaken for a payload.

    At most MAX_PAYLOAD_READ_BYTES are read; a regular file whose size is more is refused before reading it.
    Raises BadInput (exit 2), one line naming the file or stdin and what to do, when FILE is missing, a folder,
    a device or socket, or unreadable, or when what was read is larger than the bound, empty or not UTF-8.
    Reads nothing but FILE or stdin and writes nothing.
    """
    if value == "-":
        what = "--payload - (stdin)"
        return _decoded(_read_stdin(what), what, "pipe the JSON in, e.g. --payload - < payload.json")
    if not value.startswith("@"):
        return value
    if not value[1:]:
        raise BadInput("--payload @: no file named; write --payload @FILE (e.g. @payload.json), or --payload - for stdin")
    path = Path(value[1:]).expanduser()
    what = f"payload file {path}"
    return _decoded(_read_file(path, what), what, "write the JSON payload in it")


def _read_file(path: Path, what: str) -> bytes:
    try:
        mode = os.stat(path).st_mode  # before opening: a device is refused unopened
        if stat.S_ISDIR(mode):
            raise BadInput(f"{what}: is a folder; pass the JSON file itself (--payload @FILE)")
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise BadInput(f"{what}: not a regular file or a pipe (a device or socket); pass a JSON file")
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise BadInput(f"{what}: not found; check the path (a relative path is from the current folder)") from None
    except OSError as e:
        raise BadInput(f"{what}: cannot be read ({e.strerror}); check the path and its permissions") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size > MAX_PAYLOAD_READ_BYTES:
            raise BadInput(f"{what}: {st.st_size:,} bytes, more than the {_mib()} a payload may be read from; "
                           "is it the right file?")
        return _read_at_most(lambda n: os.read(fd, n), what)
    except OSError as e:
        raise BadInput(f"{what}: cannot be read ({e.strerror}); check the file") from None
    finally:
        os.close(fd)


def _read_stdin(what: str) -> bytes:
    stream = sys.stdin
    if stream is None or stream.closed:
        raise BadInput(f"{what}: there is no stdin to read; pipe the JSON in, or pass --payload @FILE")
    if stream.isatty():
        raise BadInput(f"{what}: stdin is a terminal; pipe the JSON in (--payload - < payload.json), "
                       "or pass --payload @FILE")
    try:
        return _read_at_most(stream.buffer.read, what)
    except (OSError, ValueError, AttributeError) as e:  # a closed or text-only stream: nothing to read bytes from
        raise BadInput(f"{what}: cannot be read ({getattr(e, 'strerror', None) or e}); pipe the JSON in, "
                       "or pass --payload @FILE") from None


def _read_at_most(read: Callable[[int], bytes], what: str) -> bytes:
    """All of `read` until end of file, refusing (BadInput) more than MAX_PAYLOAD_READ_BYTES."""
    data = bytearray()
    while len(data) <= MAX_PAYLOAD_READ_BYTES:
        chunk = read(min(_CHUNK, MAX_PAYLOAD_READ_BYTES + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    raise BadInput(f"{what}: more than the {_mib()} a payload may be read from; is it the right input?")


def _decoded(data: bytes, what: str, fill: str) -> str:
    if not data.strip():
        raise BadInput(f"{what}: is empty, no JSON payload in it; {fill}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start:,}); "
                       "save it as UTF-8, or check it is the right file") from None


def _mib() -> str:
    return f"{MAX_PAYLOAD_READ_BYTES // (1024 * 1024)} MiB"
