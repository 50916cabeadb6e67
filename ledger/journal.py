"""The outcome journal: where a send's outcome goes when the ledger cannot take it.

An accepted send's handle is the most precious thing a worker holds. When its outcome cannot be
committed (the ledger locked past the timeout, the disk full, an I/O error), the worker appends it here
and fsyncs before it exits, and every pass replays the journal before anything else.

The file sits beside a SQLite ledger (`<ledger>.outcomes`). A PostgreSQL ledger's sits on each host, named after the
database's identity (`HostJournal`), so every spelling of its URL finds the same file; one named after the URL's
text, as older versions wrote it, is read and replayed too. Its space is allocated in advance, so an
append overwrites blocks the file already owns and succeeds on a full disk. Records are lines
`<checksum> <json>\\n` written from the start of the file; the first NUL byte ends them. Appends and
replays hold an exclusive `flock`, so workers on one host never interleave.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.files import place_new
from ledger.store import Connection

if TYPE_CHECKING:

    from ledger.config import Config

JOURNAL_BYTES = 256 * 1024
"""Space allocated in advance: about 800 outcomes of 300 bytes."""

SUFFIX = ".outcomes"


class JournalFull(Exception):
    """The journal has no room left (or could not be opened): the record was not written."""


@dataclass(frozen=True)
class OutcomeRecord:
    """One send outcome that the ledger could not take, as the worker saw it."""

    job_id: str
    operation: str
    epoch: int
    owner: str
    attempt: int
    tries: int
    kind: str
    handle: str | None
    error: str | None
    reason: str | None
    retry_after: float | None
    at: float
    cause: str

    def to_json(self) -> str:
        """The record as compact, sorted JSON."""
        return json.dumps(self.__dict__, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    @classmethod
    def from_json(cls, text: str) -> OutcomeRecord:
        """Parse a record written by `to_json`; raises ValueError or TypeError when malformed."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        return cls(**doc)


@dataclass(frozen=True)
class HostJournal:
    """A PostgreSQL ledger's journal on this host: named after the database's identity, not the URL's text."""

    identity: str
    """`<system identifier>-<database oid>` (`Connection.journal_identity`)."""
    url: str
    """The URL as the connection shows it (password hidden): what older versions named the journal after."""


Where = str | Path | HostJournal
"""What names a journal: a ledger file's path, a PostgreSQL ledger (`HostJournal`), or a URL (named after its text)."""


def of(conn: Connection) -> Where:
    """The journal that belongs to the ledger `conn` reaches, named without asking the database (it is known while
    the database refuses): the file's path, or the PostgreSQL database's identity read when `conn` opened."""
    from ledger import store
    from ledger.errors import LedgerError

    identity = conn.journal_identity()
    try:
        location = store.ledger_file(conn)
    except LedgerError:
        location = conn.ledger_name
    return location if identity is None else HostJournal(identity, location)


def _host_folder() -> Path:
    folder = Path(os.environ.get("RECLAIM_JOURNAL_DIR") or Path.home() / ".local" / "state" / "reclaim")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def journal_path(ledger: Where) -> Path:
    """The journal file that belongs to a ledger: beside a ledger file; for a PostgreSQL ledger, a file on this
    host under $RECLAIM_JOURNAL_DIR (default ~/.local/state/reclaim) named after the database's identity
    (`HostJournal`), or after the URL's text when only a URL is known."""
    if isinstance(ledger, HostJournal):
        return _host_folder() / f"pg-{ledger.identity}{SUFFIX}"
    if str(ledger).startswith(("postgresql://", "postgres://")):
        return _host_folder() / f"pg-{hashlib.sha256(str(ledger).encode()).hexdigest()[:16]}{SUFFIX}"
    return Path(f"{ledger}{SUFFIX}")


def _paths(ledger: Where) -> list[Path]:
    """The journal's file, then the one older versions named after the URL's text (when it differs)."""
    path = journal_path(ledger)
    if isinstance(ledger, HostJournal):
        older = journal_path(ledger.url)
        if older != path:
            return [path, older]
    return [path]


def _checksum(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest()[:16].encode("ascii")


def allocate(ledger: Where) -> bool:
    """Make sure the journal exists with its space allocated; True when this call made it. Raises OSError
    when it cannot.

    A new journal is built under a temporary name beside the ledger, allocated and fsynced, then linked
    into place, so a full disk or a read-only folder leaves no half-made journal. An existing journal
    is kept (it may hold records) and only extended if it is short.
    """
    path = journal_path(ledger)
    if path.exists():
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size < JOURNAL_BYTES:
                os.posix_fallocate(fd, 0, JOURNAL_BYTES)
                os.fsync(fd)
        finally:
            os.close(fd)
        return False
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        os.posix_fallocate(fd, 0, JOURNAL_BYTES)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return place_new(tmp, path)  # False: another process made it meanwhile; theirs is as good


def reserve_space(ledger: Where) -> bool:
    """Create the journal with its space allocated, if it is not there yet; True when it is ready.

    Never raises: on a full disk or a read-only folder the journal simply is not ready (and nothing
    half-made is left), and an append then reports JournalFull.
    """
    try:
        allocate(ledger)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing drops the lock


def _read(fd: int) -> tuple[bytes, int]:
    """The used part of the file, up to the end of its last complete line, and that length."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    nul = data.find(b"\0")
    used = data if nul < 0 else data[:nul]
    end = used.rfind(b"\n") + 1
    return used[:end], len(used)


def append(ledger: Where, record: OutcomeRecord) -> Path:
    """Append one record and fsync it; return the journal's path. Raises JournalFull when it cannot."""
    path = journal_path(ledger)
    if not path.exists() and not reserve_space(ledger):
        raise JournalFull(f"journal {path}: could not be created")
    line = _line(record)
    try:
        with _locked(path) as fd:
            complete, used = _read(fd)
            size = os.fstat(fd).st_size
            if len(complete) + len(line) >= size:
                raise JournalFull(f"journal {path}: full ({size} bytes)")
            # A torn tail (a crash mid-append) is overwritten by this record.
            tail = max(used - len(complete), 0)
            os.pwrite(fd, line + b"\0" * max(tail - len(line), 0), len(complete))
            os.fsync(fd)
    except OSError as e:
        raise JournalFull(f"journal {path}: {e.strerror or e}") from None
    return path


def pending(ledger: Where) -> list[OutcomeRecord]:
    """The complete, intact records in the journal, and in the one an older version named after the URL (none
    when there is no journal). Raises OSError when a journal cannot be opened or locked."""
    out: list[OutcomeRecord] = []
    for path in _paths(ledger):
        if path.exists():
            with _locked(path) as fd:
                complete, _ = _read(fd)
            out.extend(_parse(complete))
    return out


def _parse(data: bytes) -> list[OutcomeRecord]:
    out: list[OutcomeRecord] = []
    for line in data.splitlines():
        crc, _, body = line.partition(b" ")
        if crc != _checksum(body):
            continue  # torn or damaged: the checksum does not match
        try:
            out.append(OutcomeRecord.from_json(body.decode("ascii")))
        except (ValueError, TypeError, UnicodeDecodeError):
            continue
    return out


class Replay(list[OutcomeRecord]):
    """The records a replay holds; those passed to `keep` stay in the journal when the replay ends."""

    def __init__(self, records: list[OutcomeRecord]) -> None:
        super().__init__(records)
        self.kept: list[OutcomeRecord] = []

    def keep(self, record: OutcomeRecord) -> None:
        """Leave `record` in the journal (it could not be applied now; a later pass tries again)."""
        self.kept.append(record)


def _line(record: OutcomeRecord) -> bytes:
    body = record.to_json().encode("ascii")
    return _checksum(body) + b" " + body + b"\n"


@contextlib.contextmanager
def replaying(ledger: Where) -> Iterator[Replay]:
    """Hold the journal (and the one an older version named after the URL) while the caller applies their
    records; when the block ends cleanly, clear every record except those the caller kept (`Replay.keep`),
    which are written back at the start of the first file.

    The space stays allocated (cleared by writing zeros), so the next append still fits on a full
    disk. When the block raises, nothing is cleared and the records are replayed again next pass.
    """
    paths = [p for p in _paths(ledger) if p.exists()]
    if not paths:
        yield Replay([])
        return
    with contextlib.ExitStack() as held:
        fds = [held.enter_context(_locked(p)) for p in paths]  # always in the same order: no deadlock
        reads = [_read(fd) for fd in fds]
        records = Replay([r for complete, _ in reads for r in _parse(complete)])
        yield records
        kept = b"".join(_line(r) for r in records.kept)
        for i, (fd, (_, used)) in enumerate(zip(fds, reads, strict=True)):
            mine = kept if i == 0 else b""
            if used or mine:
                os.pwrite(fd, mine + b"\0" * max(used - len(mine), 0), 0)
                os.fsync(fd)


@dataclass(frozen=True)
class JournalState:
    """What `reclaim status` says about a ledger's journal."""

    path: Path
    size: int | None
    """Bytes the file holds (None: there is no journal)."""
    records: list[OutcomeRecord]

    @property
    def ready(self) -> bool:
        """True when the journal exists with all its space allocated in advance."""
        return self.size is not None and self.size >= JOURNAL_BYTES


def state(ledger: Where) -> JournalState:
    """The journal's path, allocated size and waiting records, read without changing anything."""
    path = journal_path(ledger)
    try:
        size = path.stat().st_size
    except OSError:
        return JournalState(path, None, [])
    try:
        records = pending(ledger)
    except OSError:
        records = []
    return JournalState(path, size, records)


def kept_reason(conn: Connection, config: Config, record: OutcomeRecord) -> str | None:
    """Why a replay cannot record `record` now (so it stays in the journal), or None when it can."""
    from ledger.model import JobKey
    from ledger.store.jobs import find_job

    if record.operation not in config.operations:
        return f"operation {record.operation!r} is not declared in the config this process runs with"
    if find_job(conn, JobKey(record.job_id, record.operation)) is None:
        return "no such job in the ledger (restored from an older backup, or another ledger's record)"
    return None


def describe(record: OutcomeRecord) -> dict[str, Any]:
    """The record as a dict for an event's detail."""
    return dict(record.__dict__)
