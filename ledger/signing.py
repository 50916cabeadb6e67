"""Per-person signatures: each account's Ed25519 key, and what an event's proof says about who wrote it.

Every operator, sender account and browser seat has its own key pair. The private key is a file in the
account's own home (`~/.config/reclaim/signing-key`, or the file RECLAIM_SIGNING_KEY_FILE names), mode 0600,
made by `reclaim keys new`; only the kernel's file permissions keep it, so a caller who fakes their uid inside
their own process (an `LD_PRELOAD` shim, a `sitecustomize.py`) still signs with their own key. Its public half
is registered in the ledger's policy (`[keys]` in the shared config, recorded by the owner with `reclaim policy
set --from-config`), and `reclaim init` signs the first policy with the owner's key.

A process that holds a key signs every event it writes: the event's proof (the events table's `mac` column)
is `ed25519:ACCOUNT:SIGNATURE`, the signature over the event's chain hash. A ledger made before signatures
may still hold an HMAC there (64 hex digits, the retired shared audit key, ledger.seal), alone or before the
signature (`HEX;ed25519:...`). Checking a signature needs public keys only (`signer_of`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import ConfigError
from ledger.files import read_private

if TYPE_CHECKING:  # cryptography is imported when a key is read, made or checked, not at start
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_ENV = "RECLAIM_SIGNING_KEY_FILE"
"""The variable naming this account's private key file; wins over `~/.config/reclaim/signing-key`."""
PUBLIC_PREFIX = "ed25519:"
"""How a registered public key is written: `ed25519:` and the 32-byte key in base64."""
_PROOF_PREFIX = "ed25519:"


class Signer:
    """This process's account and its private key: what signs every event the process writes. The key file's
    text is parsed on first use, so a command that writes nothing never loads the cryptography it needs."""

    def __init__(self, account: str, pem: bytes) -> None:
        self.account = account
        self._pem = pem

    @functools.cached_property
    def key(self) -> Ed25519PrivateKey:
        """The private key. Raises ConfigError when the file's text is not an unencrypted PEM Ed25519 key."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        try:
            key = serialization.load_pem_private_key(self._pem, password=None)
        except (ValueError, TypeError):
            raise ConfigError(f"signing key of {self.account}: not an unencrypted PEM private key; restore it from "
                              "its backup, or make a new one with 'reclaim keys new' and have it registered") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"signing key of {self.account}: not an Ed25519 key; make one with 'reclaim keys new'")
        return key

    @property
    def public(self) -> str:
        """The public key as registered: `ed25519:BASE64`."""
        return public_text(self.key.public_key())

    def sign(self, chain_hash: str) -> str:
        """The proof for an event with `chain_hash`: `ed25519:ACCOUNT:SIGNATURE` (base64)."""
        sig = self.key.sign(chain_hash.encode("ascii"))
        return f"{_PROOF_PREFIX}{self.account}:{base64.b64encode(sig).decode('ascii')}"


_signer: Signer | None = None


def use_signer(signer: Signer | None) -> None:
    """Sign every event this process writes from now on with `signer` (None: write events unsigned)."""
    global _signer
    _signer = signer


def current_signer() -> Signer | None:
    """The signer this process holds, or None."""
    return _signer


def key_path() -> Path:
    """Where this account's private key is: RECLAIM_SIGNING_KEY_FILE, else `~/.config/reclaim/signing-key`."""
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env)
    return Path.home() / ".config" / "reclaim" / "signing-key"


def public_text(public: Ed25519PublicKey) -> str:
    """`ed25519:BASE64` of a public key (its 32 raw bytes)."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_PREFIX + base64.b64encode(raw).decode("ascii")


def fingerprint(public: str) -> str:
    """`SHA256:...` of a registered public key (as `ssh-keygen -l` shows keys): to compare out of band."""
    raw = _public_bytes(public)
    return "SHA256:" + base64.b64encode(hashlib.sha256(raw).digest()).decode("ascii").rstrip("=")


def _public_bytes(public: str) -> bytes:
    if not isinstance(public, str) or not public.startswith(PUBLIC_PREFIX):
        raise ValueError(f"{str(public)[:40]!r} is not a public key: expected ed25519:BASE64 (what "
                         "'reclaim keys show' prints)")
    try:
        raw = base64.b64decode(public[len(PUBLIC_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{public[:40]!r}: not base64 after ed25519:") from None
    if len(raw) != 32:
        raise ValueError(f"{public[:40]!r}: an Ed25519 public key is 32 bytes, this is {len(raw)}")
    return raw


def check_public(public: str) -> str:
    """`public` unchanged when it is a well-formed `ed25519:BASE64` key; ValueError (saying what is wrong)
    otherwise."""
    _public_bytes(public)
    return public


def read_key(path: Path, account: str) -> Signer | None:
    """The signer kept in `path` for `account`; None when there is no such file or this account may not read it.

    Raises ConfigError for a key file others (group or world) may read or write, something that is not a
    regular file, or a file that holds no PEM private key (the key itself is parsed when it first signs).
    """
    data = read_private(path, "signing key file", others=0o077,
                        fix=f"chmod 600 {path} (it signs as you: only your account may read it)")
    if data is None:
        return None
    if b"PRIVATE KEY-----" not in data:
        raise ConfigError(f"signing key file {path}: not a PEM private key; restore it from its backup, or make a "
                          "new one with 'reclaim keys new' and have it registered")
    return Signer(account, data)


def new_key(path: Path, account: str) -> Signer:
    """Make a new key pair and write its private half to `path` (mode 0600; its folder made 0700 when missing),
    refusing to overwrite a key. Raises ConfigError when the file exists or cannot be written."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"signing key file {path}: exists already; 'reclaim keys show' prints its public key "
                          "(move it away first to make a new one, then have the new one registered)") from None
    except OSError as e:
        raise ConfigError(f"signing key file {path}: cannot be created ({e.strerror})") from None
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    return Signer(account, pem)


@dataclass(frozen=True)
class Proof:
    """What an event's proof column holds: an HMAC of the retired audit key, a signature, both or neither."""

    hmac: str | None = None
    signer: str | None = None
    signature: bytes | None = None

    @classmethod
    def parse(cls, text: str | None) -> Proof:
        """Read a proof column (None or unreadable parts: what is missing is None)."""
        if not text:
            return cls()
        hmac_part: str | None = None
        signer = signature = None
        for part in text.split(";"):
            if part.startswith(_PROOF_PREFIX):
                account, sep, b64 = part[len(_PROOF_PREFIX):].rpartition(":")
                if sep and account:
                    try:
                        signer, signature = account, base64.b64decode(b64, validate=True)
                    except (binascii.Error, ValueError):
                        signer, signature = account, b""
            elif part:
                hmac_part = part
        return cls(hmac_part, signer, signature)


def join_proof(hmac: str | None, signature: str | None) -> str | None:
    """The proof column for an event: the HMAC (older ledgers' processes holding the audit key) and the signature,
    `;`-joined; None when there is neither."""
    parts = [p for p in (hmac, signature) if p]
    return ";".join(parts) if parts else None


def verifies(public: str, chain_hash: str, signature: bytes) -> bool:
    """True when `signature` is `public`'s over `chain_hash` (False for a malformed key or signature)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(_public_bytes(public)).verify(signature, chain_hash.encode("ascii"))
    except (InvalidSignature, ValueError):
        return False
    return True


def signer_of(proof: Proof, chain_hash: str | None, keys: dict[str, str]) -> str | None:
    """The account whose registered key (`keys`: account -> public key) signed the event with `chain_hash`;
    None when the event is unsigned, names an account with no registered key, or the signature does not verify."""
    if proof.signer is None or not proof.signature or not isinstance(chain_hash, str):
        return None
    public = keys.get(proof.signer)
    if public is None or not verifies(public, chain_hash, proof.signature):
        return None
    return proof.signer
