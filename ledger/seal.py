"""What makes the audit chain more than a hash anyone can recompute: the audit key, each event's MAC and seal.

The audit key is a 32-byte secret in a file outside the ledger (`[audit] key_file`, or the file named by
RECLAIM_AUDIT_KEY_FILE), made by `reclaim init` with mode 0600 and readable only by the accounts that send
and approve. A process that can read it authenticates every event it writes: `mac` = HMAC-SHA256(key, the
event's chain hash). Whoever can write the ledger file but not read the key can still recompute the sha256
chain, but not the MACs, so `reclaim verify` (run with the key) names any event they added or rewrote.

Each event also carries a seal, covered by its chain hash and so by its MAC: the digest of its job's row
after the event (the columns that matter: idem key, target, payload, handle, result, owner, due, quota day,
held reason, last error, next try, tries) and the heads of the hash chains of the side tables the rules write (evidence, fenced writes). An edit of a
job's row, or a removed evidence or fenced-write row, no longer matches the last seal that covered it.

The key is held per process (`use_key`): the CLI loads it once from the config; library callers and tests
pass bytes. A process without it writes events without a MAC (a triage account, usually).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

from ledger import jsontext
from ledger.errors import ConfigError
from ledger.files import read_private

KEY_ENV = "RECLAIM_AUDIT_KEY_FILE"
"""The variable naming the audit key file; wins over `[audit] key_file`."""
KEY_BYTES = 32

_key: bytes | None = None
_SEAL_BODY = jsontext.encoder(sort_keys=True, separators=(",", ":"), check_circular=False)


def use_key(key: bytes | None) -> None:
    """Authenticate every event this process writes from now on with `key` (None: write events unauthenticated)."""
    global _key
    if key is not None and len(key) < 16:
        raise ValueError("an audit key must be at least 16 bytes")
    _key = key


def current_key() -> bytes | None:
    """The audit key this process holds, or None."""
    return _key


def mac(key: bytes, chain_hash: str) -> str:
    """HMAC-SHA256 of an event's chain hash under `key`, as hex."""
    return hmac.new(key, chain_hash.encode("ascii"), hashlib.sha256).hexdigest()


def mac_ok(key: bytes, chain_hash: str, given: str) -> bool:
    """True when `given` is the MAC of `chain_hash` under `key` (compared in constant time)."""
    return hmac.compare_digest(mac(key, chain_hash), given)


ROW_COLUMNS = ("idem_key", "target", "payload", "handle", "result", "owner", "due_at", "quota_day",
               "held_reason", "last_error", "next_try_at", "tries", "lease_owner", "lease_until", "send_started_at")
"""The job columns an event seals, beside the state, epoch and attempt its own fields replay. Every change of
any of them is an event's (ledger.transitions' `apply()` is the jobs table's only writer), so the row always
equals what its last event sealed. A seal written before a column was added does not name it, and verify
compares only the columns a seal names."""

_FLOAT_COLUMNS = frozenset({"due_at", "next_try_at", "lease_until", "send_started_at"})
_INT_COLUMNS = frozenset({"tries"})
_NONE_DIGEST = hashlib.sha256(_SEAL_BODY([None]).encode("utf-8")).hexdigest()[:16]


def row_digest(job_columns: dict[str, Any]) -> dict[str, str]:
    """Per column of ROW_COLUMNS (payload and result decoded), a short sha256 of its value: what every event on
    a job seals, and what verify recomputes from the jobs table to name the column that was edited.

    A time digests as repr(float) and a count as an int, so the number a writer gave and the one SQLite's REAL
    or INTEGER or PostgreSQL's double precision or bigint gives back digest alike."""
    out: dict[str, str] = {}
    for column in ROW_COLUMNS:
        value = job_columns[column]
        if value is None:
            out[column] = _NONE_DIGEST  # most columns of most rows: the same digest, computed once
            continue
        if column in _FLOAT_COLUMNS:
            value = repr(float(value))
        elif column in _INT_COLUMNS:
            value = int(value)
        out[column] = hashlib.sha256(_SEAL_BODY([value]).encode("utf-8")).hexdigest()[:16]
    return out


def seal_text(row: dict[str, str] | None, evidence_head: str | None, fenced_head: str | None) -> str:
    """An event's seal: the job row's digest (None for an event without a job row) and the side chains' heads."""
    return str(_SEAL_BODY({"row": row, "evidence": evidence_head, "fenced": fenced_head}))


def side_hash(prev: str | None, values: list[Any]) -> str:
    """The hash a side-table row (evidence, a fenced write) carries: sha256 of the previous row's and its values."""
    body = _SEAL_BODY([prev, *[repr(float(v)) if isinstance(v, float) else v for v in values]])
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def key_path(configured: Path | None) -> Path | None:
    """Where this process looks for the audit key: RECLAIM_AUDIT_KEY_FILE, else the config's `[audit] key_file`."""
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env)
    return configured


def read_key(path: Path) -> bytes | None:
    """The key in `path`; None when the file is missing or this account may not read it (not a key holder).

    Raises ConfigError for a key file others may read or write (the key must stay with the accounts that
    send and approve), for something that is not a regular file, or for a file too short to be a key.
    """
    data = read_private(path, "audit key file", others=0o007, limit=4096,
                        fix=f"chmod o-rwx {path} (only the accounts that send and approve may hold the key)")
    if data is None:
        return None
    key = data.strip()
    try:
        raw = bytes.fromhex(key.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(f"audit key file {path}: not a hex key; restore it from its backup") from None
    if len(raw) < 16:
        raise ConfigError(f"audit key file {path}: shorter than 16 bytes; restore it from its backup")
    return raw


def create_key(path: Path) -> bytes:
    """Write a new random key to `path` (mode 0600, refusing to overwrite one) and return it."""
    key = secrets.token_bytes(KEY_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"audit key file {path}: exists already; keep it, or move it away first") from None
    except OSError as e:
        raise ConfigError(f"audit key file {path}: cannot be created ({e.strerror})") from None
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key.hex().encode("ascii") + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key
