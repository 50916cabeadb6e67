"""Adapters to remote services, and the choice of adapter for an operation."""

from __future__ import annotations

import importlib
import os
from typing import Any, Final

from ledger.config import Config, RemoteConfig
from ledger.errors import ConfigError
from ledger.redaction import Redactor
from ledger.remotes.base import Remote, label_console_url


def remote_for(config: Config, operation: str) -> Remote:
    """Build the adapter for `operation`'s remote as the config describes it.

    Its answers come back with every secret the config names replaced by `[redacted:NAME]`.
    """
    rc = config.remotes[config.operations[operation].remote]
    redactor = Redactor.from_config(config)
    if rc.kind == "gemini":
        from ledger.remotes.gemini import GeminiRemote

        return GeminiRemote(rc, redactor)
    from ledger.remotes.http import HttpRemote

    return HttpRemote(rc, redactor)


ADAPTER_MODULES: Final = {"gemini": "ledger.remotes.gemini", "http": "ledger.remotes.http"}
"""The module that holds each kind's adapter (`remote_for` imports it on first use; gemini's brings google-genai)."""


def gemini_api_key(rc: RemoteConfig) -> str:
    """The API key a gemini remote's client is built with: the environment variable its config names, or a
    placeholder when it has a `base_url` (the simulator needs no key). Raises ConfigError when neither is there."""
    key = os.environ.get(rc.api_key_env) or ("simulator" if rc.base_url else None)
    if key is None:
        raise ConfigError(f"remote {rc.name}: environment variable {rc.api_key_env} is not set (the API key)")
    return key


def build_refusal(rc: RemoteConfig) -> str | None:
    """Why `remote_for` would refuse to build this remote's adapter, in the adapter's own words, without importing
    an SDK: for a gemini remote from the config and the environment (its API key variable unset while it has no
    `base_url`; the simulator needs no key), for an http remote by building its stdlib adapter (no connection is
    opened). None when it can be built (the SDK itself could still fail, which the first real call then says)."""
    if rc.kind == "gemini":
        try:
            gemini_api_key(rc)
        except ConfigError as e:
            return str(e)
        return None
    from ledger.remotes.http import HttpRemote

    try:
        HttpRemote(rc)
    except ConfigError as e:
        return str(e)
    return None


def request_body_size(config: Config, operation: str, payload: dict[str, Any], *, idem_key: str, attempt: int
                      ) -> int:
    """The exact number of bytes the body of `operation`'s create for this payload, key and attempt takes on the
    wire, as its remote's adapter builds it (from the config alone: no adapter is built, no key read).

    The size rule (`ledger.send_window.transfer_refusal`) is applied to this, at submit and again before a send.
    """
    rc = config.remotes[config.operations[operation].remote]
    module = importlib.import_module(ADAPTER_MODULES[rc.kind])
    return int(module.request_body_size(rc, payload, idem_key=idem_key, attempt=attempt))


def console_url_for(config: Config, operation: str, idem_key: str) -> str | None:
    """Where a person can check the remote's own records of `idem_key` (a Gemini remote whose `base_url` points
    at the bundled simulator's console), from the config alone: no adapter is built. None when there is none."""
    op = config.operations.get(operation)
    rc = config.remotes.get(op.remote) if op is not None else None
    if rc is None or rc.kind != "gemini" or not rc.base_url:
        return None
    return label_console_url(rc.base_url, idem_key)
