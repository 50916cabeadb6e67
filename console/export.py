"""Writing an export: rows (from `ledger.export`) as CSV, JSON lines or one JSON array, to a file made
whole or not at all, or to stdout.

Formats (UTF-8 always, whatever the locale):
- `csv`: the csv module's default dialect (RFC 4180: quoted when needed, CRLF line ends), a header row,
  None as an empty cell, numbers as Python writes them (a float's shortest exact form).
- `jsonl`: one JSON object per line, keys in column order.
- `json`: one JSON array of those objects, one per line.
JSON is written with non-ASCII text readable and every control, C1, separator and bidi code point as a
`\\uXXXX` escape (`console.sanitize.escape_json_controls`): it decodes to exactly the stored value, and
printing it cannot drive a terminal. CSV cells are written as stored, except on a terminal: when the
output is stdout and stdout is a TTY, control characters in cells are shown as visible escapes
(`console.sanitize.escape_controls`), the same rule as every other line the CLI prints.

A file is written under a temporary name in its folder, fsynced, then given its name: a failure leaves
nothing under that name (and an existing file untouched). An existing file is replaced only with `force`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from console.sanitize import escape_controls, escape_json_controls
from ledger import BadInput, fsync_dir, place_new

FORMATS = ("csv", "jsonl", "json")
"""The formats `reclaim export --format` takes."""
_BY_SUFFIX = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json"}


def choose_format(fmt: str | None, output: str) -> str:
    """The format: `fmt` when given (BadInput naming it when unknown), else from the output file's suffix
    (.csv, .jsonl / .ndjson, .json), else jsonl."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise BadInput(f"--format {fmt[:40]!r}: unknown; give {', '.join(FORMATS)}")
        return fmt
    return _BY_SUFFIX.get(Path(output).suffix.lower(), "jsonl") if output != "-" else "jsonl"


@dataclass(frozen=True)
class Target:
    """Where an export goes: stdout (`path` None) or a file, checked before anything is read."""

    path: Path | None
    force: bool = False

    @property
    def shown(self) -> str:
        """How the summary names it."""
        return "stdout" if self.path is None else str(self.path)


def check_target(output: str, *, force: bool, ledger: str | Path | None = None) -> Target:
    """The destination `output` ('-' is stdout), refused (BadInput, one line, nothing written) when the file
    exists without `force`, is anything but a regular file (a FIFO, a device, a socket, a symbolic link: even
    with `force`), is a folder, is the ledger itself, or its folder does not exist."""
    if output == "-":
        return Target(None)
    if not output.strip():
        raise BadInput("--output: empty; give a file name, or - for stdout")
    path = Path(output)
    if path.is_dir():
        raise BadInput(f"--output {output}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise BadInput(f"--output {output}: folder {path.parent} does not exist; create it first")
    if ledger is not None and isinstance(ledger, Path) and path.exists() and ledger.exists():
        for own in (ledger, Path(f"{ledger}-wal"), Path(f"{ledger}-shm"), Path(f"{ledger}-journal")):
            if own.exists() and path.resolve() == own.resolve():
                raise BadInput(f"--output {output}: is the ledger's own file; give another name")
    try:
        mode: int | None = path.lstat().st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise BadInput(f"--output {output}: is {kind}, not a regular file; --force replaces only a regular file, "
                       "give another name")
    if (path.exists() or path.is_symlink()) and not force:
        raise BadInput(f"--output {output}: already exists; pass --force to replace it, or give another name")
    return Target(path, force)


@contextmanager
def opened(target: Target) -> Iterator[IO[str]]:
    """A UTF-8 text stream to write the export to. For a file: a temporary file in its folder, fsynced and
    given its name when the block ends without error, removed otherwise. For stdout: its byte stream."""
    if target.path is None:
        out = sys.stdout
        if isinstance(out, io.TextIOWrapper):  # the command ends after the export: stdout is ours
            out.reconfigure(encoding="utf-8", errors="backslashreplace", newline="")
        yield out
        out.flush()
        return
    final = target.path
    try:
        fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    except OSError as e:
        raise BadInput(f"--output {final}: cannot write in {final.parent} ({e.strerror}); choose another folder") from None
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as a shell redirection would make it (mkstemp makes 0600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if target.force:
            os.replace(tmp, final)
            fsync_dir(final.parent)
        elif not place_new(tmp, final):
            raise BadInput(f"--output {final}: another process created it meanwhile; pass --force to replace it")
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _json(row: dict[str, Any]) -> str:
    return escape_json_controls(json.dumps(row, ensure_ascii=False, separators=(",", ":")))


def write_rows(out: IO[str], fmt: str, columns: Iterable[str], rows: Iterable[dict[str, Any]], *,
               terminal: bool = False) -> int:
    """Write `rows` (dicts keyed by `columns`) to `out` in `fmt`; return how many were written. `terminal`:
    the stream is a TTY, so CSV cells show control characters escaped (JSON always escapes them)."""
    n = 0
    if fmt == "csv":
        writer = csv.writer(out)
        cols = list(columns)
        writer.writerow(cols)
        for row in rows:
            cells = [row[c] for c in cols]
            if terminal:
                cells = [escape_controls(v) if isinstance(v, str) else v for v in cells]
            writer.writerow(cells)
            n += 1
        return n
    if fmt == "jsonl":
        for row in rows:
            out.write(_json(row) + "\n")
            n += 1
        return n
    if fmt != "json":
        raise BadInput(f"--format {fmt!r}: unknown; give {', '.join(FORMATS)}")
    out.write("[")
    for row in rows:
        out.write(("\n" if n == 0 else ",\n") + _json(row))
        n += 1
    out.write("\n]\n" if n else "]\n")
    return n
