"""`reclaim keys`: each account's signing key, kept by its owner alone; what a proof column holds and proves."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import EXIT_BAD_INPUT, ConfigError
from ledger.signing import Proof, join_proof, key_path, new_key, read_key, signer_of


def test_keys_new_writes_a_private_key_only_its_account_may_read_and_show_prints_the_line_to_register(
    run_cli: Callable[..., Any],
) -> None:
    path = key_path()
    made = run_cli("keys", "new", "--json")
    assert made.rc == 0, made
    doc = json.loads(made.stdout)
    assert Path(doc["file"]) == path and path.stat().st_mode & 0o777 == 0o600
    assert doc["public_key"].startswith("ed25519:") and doc["fingerprint"].startswith("SHA256:")
    shown = run_cli("keys", "show")
    assert shown.rc == 0 and f'= "{doc["public_key"]}"' in shown.stdout and "[public_keys]" in shown.stdout, shown
    # A second `keys new` keeps the key it would overwrite, and says how to see it.
    before = path.read_bytes()
    again = run_cli("keys", "new")
    assert again.rc == EXIT_BAD_INPUT and "exists already" in again.stderr and "keys show" in again.stderr, again
    assert path.read_bytes() == before


def test_a_key_others_may_read_is_refused_and_a_missing_one_is_named(run_cli: Callable[..., Any]) -> None:
    missing = run_cli("keys", "show")
    assert missing.rc == EXIT_BAD_INPUT and "reclaim keys new" in missing.stderr, missing
    new_key(key_path(), "me")
    os.chmod(key_path(), 0o640)
    with pytest.raises(ConfigError, match="others may read or write it; chmod 600"):
        read_key(key_path(), "me")
    loose = run_cli("keys", "show")
    assert loose.rc == EXIT_BAD_INPUT and "chmod 600" in loose.stderr, loose


def test_a_signature_proves_its_account_only_under_that_accounts_registered_key(tmp_path: Path) -> None:
    alice, bob = new_key(tmp_path / "a", "alice"), new_key(tmp_path / "b", "bob")
    keys = {"alice": alice.public, "bob": bob.public}
    digest = "ab" * 32
    assert signer_of(Proof.parse(alice.sign(digest)), digest, keys) == "alice"
    # alice's key claiming to be bob, a signature over another event, no signature, an unregistered account.
    forged = alice.sign(digest).replace("ed25519:alice:", "ed25519:bob:")
    assert signer_of(Proof.parse(forged), digest, keys) is None
    assert signer_of(Proof.parse(alice.sign("cd" * 32)), digest, keys) is None
    assert signer_of(Proof.parse(None), digest, keys) is None
    assert signer_of(Proof.parse(alice.sign(digest)), digest, {"bob": bob.public}) is None
    # An older ledger's HMAC travels beside the signature; each is read back apart.
    both = Proof.parse(join_proof("f" * 64, bob.sign(digest)))
    assert both.hmac == "f" * 64 and signer_of(both, digest, keys) == "bob"
