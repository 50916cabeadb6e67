"""Adapters to remote services, and the choice of adapter for an operation."""

from __future__ import annotations

from ledger.config import Config
from ledger.remotes.base import Remote


def remote_for(config: Config, operation: str) -> Remote:
    """Build the adapter for `operation`'s remote as the config describes it."""
    rc = config.remotes[config.operations[operation].remote]
    if rc.kind == "gemini":
        from ledger.remotes.gemini import GeminiRemote

        return GeminiRemote(rc)
    from ledger.remotes.http import HttpRemote

    return HttpRemote(rc)
