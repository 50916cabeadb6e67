"""Adapters to remote services, and the choice of adapter for an operation."""

from __future__ import annotations

from ledger.config import Config
from ledger.redaction import Redactor
from ledger.remotes.base import Remote


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
