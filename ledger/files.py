"""Making a file whole or not at all: a file built under a temporary name in its folder is linked into
place only once finished, never over an existing one, and the folder is fsynced so the name survives a
power cut. A failure before that leaves nothing under the real name. And a private key file (a signing key, an
older ledger's audit key) is read only when no one else may read or write it (`read_private`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ledger.errors import ConfigError


def place_new(tmp: Path, final: Path) -> bool:
    """Give the finished file `tmp` the name `final` unless that name exists; remove `tmp` either way.

    True when `final` is now our file, False when another file already had the name (it is kept).
    A hard link is used so an existing file is never replaced; where the filesystem has no hard links,
    a rename after an existence check does the same for a single writer.
    """
    try:
        try:
            os.link(tmp, final)
        except FileExistsError:
            return False
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV):
                raise
            if final.exists():
                return False
            os.rename(tmp, final)
        fsync_dir(final.parent)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def fsync_dir(folder: Path) -> None:
    """fsync a folder, so the names just made in it are durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_all(*paths: Path) -> None:
    """Remove each path that exists; errors are ignored (clean-up after a failure must not mask it)."""
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError:
            pass


def read_private(path: Path, what: str, *, others: int, fix: str, limit: int = 8192) -> bytes | None:
    """The first `limit` bytes of the key file `path`; None when it is missing or this account may not read it.

    Raises ConfigError, naming `what` and the file, for something that is not a regular file, or one whose mode
    has any bit of `others` set (others may read or write it: `fix` says what to do).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.ENOTDIR):
            return None
        raise ConfigError(f"{what} {path}: cannot be read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{what} {path}: not a regular file")
        if st.st_mode & others:
            raise ConfigError(f"{what} {path}: others may read or write it; {fix}")
        return os.read(fd, limit)
    finally:
        os.close(fd)

