"""What each remote can answer: the facts that decide how a held job on it can be resolved.

Per declared remote: can a job be looked up by its idem key or only by its handle, does the remote treat a
repeated idem key as the same request, are signed webhooks configured and has one been verified lately, how
long it keeps its records (as the config declares), whether it is paused (its last refused probe and the next),
and when it last answered about a job. Read from the config and the ledger only: no adapter is built, no remote is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.config import Config, RemoteConfig
from ledger.remotes.base import Capabilities
from ledger.store import Connection
from ledger.store import remotes as q
from ledger.store.remote_pauses import paused_remotes

RECENT_SECONDS = 86_400.0
"""A webhook verified within this long counts as verified recently."""
GEMINI_CAPABILITIES = Capabilities(lookup_by_handle=True, search_by_key=False, dedupes_by_key=False)
"""What the Gemini adapter declares (ledger.remotes.gemini.GeminiRemote.capabilities; a test keeps them equal),
known here without importing the SDK."""


def capabilities_of(rc: RemoteConfig) -> Capabilities:
    """What a remote of this config can be asked, as its adapter declares it (without building the adapter)."""
    if rc.kind == "gemini":
        return GEMINI_CAPABILITIES
    from ledger.remotes.http import HttpCapabilities

    template = rc.lookup_url or ""
    return HttpCapabilities(lookup_by_handle="{handle}" in template, search_by_key="{idem_key}" in template,
                        dedupes_by_key=rc.dedupes_by_key)


@dataclass(frozen=True)
class RemoteAnswers:
    """One remote's answers, as `reclaim remotes` and the console show them."""

    name: str
    kind: str
    operations: tuple[str, ...]
    lookup: str
    """'by key' (a search by idem key, and by handle), 'by handle only', or 'none'."""
    dedupes_by_key: bool
    webhooks: str
    """'not configured', 'configured, none verified yet', 'configured, none verified in 24 h', or 'verified'."""
    last_webhook_at: float | None
    keeps_records_days: int | None
    paused: bool
    paused_at: float | None
    pause_reason: str | None
    next_probe_at: float | None
    last_probe_at: float | None
    """When a probe send to the paused remote was last refused (None: not paused, or none refused yet)."""
    last_answer_at: float | None
    last_answer_source: str | None

    def line(self) -> str:
        """One line for the held-job screen: what can be asked of this remote."""
        parts = [
            f"lookup {self.lookup}",
            "idem key honoured" if self.dedupes_by_key else "idem key not honoured",
            f"webhooks {self.webhooks}",
            f"keeps records {self.keeps_records_days} d" if self.keeps_records_days else "retention not declared",
        ]
        if self.paused:
            parts.append("PAUSED")
        return f"{self.name} ({self.kind}): " + "; ".join(parts)

    def beyond_capabilities(self) -> str:
        """What `line()` adds to the sentences a held-job screen already shows for this remote (what it can be asked
        and whether webhooks are on, `ledger.job_detail.remote_lines`): whether a webhook was verified lately, how
        long it keeps its records, and PAUSED when it is paused. Said once, not again beside those sentences."""
        parts = [] if self.webhooks == "not configured" else [f"webhooks {self.webhooks}"]
        parts.append(f"keeps records {self.keeps_records_days} d" if self.keeps_records_days
                     else "retention not declared")
        if self.paused:
            parts.append("PAUSED")
        return f"{self.name}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as epoch seconds)."""
        return {**self.__dict__, "operations": list(self.operations)}


def _lookup(caps: Capabilities) -> str:
    if caps.search_by_key:
        return "by key"
    return "by handle only" if caps.lookup_by_handle else "none"


def answers(conn: Connection, config: Config, now: float, recent: float = RECENT_SECONDS) -> list[RemoteAnswers]:
    """Every declared remote's answers at `now` (reads the ledger; calls no remote), by name."""
    pauses = paused_remotes(conn)
    webhooks = q.last_verified_webhooks(conn)
    evidence = q.last_evidence(conn)
    out: list[RemoteAnswers] = []
    for name, rc in sorted(config.remotes.items()):
        caps = capabilities_of(rc)
        ops = tuple(sorted(op for op, oc in config.operations.items() if oc.remote == name))
        last_hook = webhooks.get(name)
        if not rc.webhook_secret_env:
            hooks = "not configured"
        elif last_hook is None:
            hooks = "configured, none verified yet"
        elif now - last_hook > recent:
            hooks = f"configured, none verified in {recent / 3600:g} h"
        else:
            hooks = "verified"
        heard = [evidence[op] for op in ops if op in evidence]
        last = max(heard) if heard else None
        pause = pauses.get(name)
        out.append(RemoteAnswers(
            name=name, kind=rc.kind, operations=ops, lookup=_lookup(caps), dedupes_by_key=caps.dedupes_by_key,
            webhooks=hooks, last_webhook_at=last_hook, keeps_records_days=rc.keeps_records_days,
            paused=pause is not None, paused_at=pause.paused_at if pause else None,
            pause_reason=pause.reason if pause else None, next_probe_at=pause.probe_at if pause else None,
            last_probe_at=pause.probe_at - config.policy.remote_probe_seconds if pause and pause.refusals > 1 else None,
            last_answer_at=last[0] if last else None, last_answer_source=last[1] if last else None,
        ))
    return out
