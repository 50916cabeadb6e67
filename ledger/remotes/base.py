"""What every remote adapter promises: one send, a lookup, and an honest list of what it can answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ledger.send_window import SendWindow

# accepted: the remote took it (handle). not_delivered: nothing accepted for now, due again later.
# invalid: the remote (or its SDK, before a byte left) refused this payload for good. unknown: it may
# have run -> held. abandoned: the send window refused to write the request; nothing left the process.
# remote_unusable: the remote refuses every job (key, permission, billing, region, unknown model):
# nothing was accepted, the job stays reserving and the remote is paused.
SendKind = Literal["accepted", "not_delivered", "invalid", "unknown", "abandoned", "remote_unusable"]
# needs_person: the remote answered something no rule may act on (waiting for input, an unknown
# status): the job is held with `error` as the reason.
RemoteState = Literal["running", "completed", "failed", "not_found", "error", "needs_person"]


@dataclass(frozen=True)
class Capabilities:
    """What a person (or the recovery pass) can ask this remote."""

    lookup_by_handle: bool
    search_by_key: bool
    dedupes_by_key: bool

    def explain(self) -> list[str]:
        """Plain sentences for the console: what can and cannot be asked."""
        out = [
            "can look a job up by its handle" if self.lookup_by_handle else "cannot look a job up by handle",
            "can search by idem key" if self.search_by_key else "cannot be searched by idem key (no list or search)",
            "treats a repeated idem key as the same request"
            if self.dedupes_by_key
            else "does not promise to dedupe a repeated idem key",
        ]
        return out


@dataclass(frozen=True)
class SendOutcome:
    """How one send ended: accepted (with handle), not delivered, rejected as invalid, or unknown."""

    kind: SendKind
    handle: str | None = None
    error: str | None = None
    reason: str | None = None  # for unknown: timeout, reset, 5xx, ...; for remote_unusable: why, in words
    retry_after: float | None = None  # for not_delivered: the delay the remote asked for (seconds)


@dataclass(frozen=True)
class RemoteStatus:
    """What the remote said about one job, with the raw snapshot to record."""

    state: RemoteState
    result: Any = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    handle: str | None = None


class Remote(Protocol):
    """An adapter to one remote service."""

    name: str
    kind: str
    capabilities: Capabilities

    def send(self, payload: dict[str, Any], idem_key: str, attempt: int, window: SendWindow | None = None
    ) -> SendOutcome:
        """Send once, with no retries or redirects of a create; call `window.check()` last thing before
        the request is written (SendWindowClosed -> `abandoned`; None means an OpenWindow, for tools and
        tests outside a claim); classify every failure."""
        ...

    def lookup(self, handle: str) -> RemoteStatus:
        """Ask the remote about a job by handle (reads may retry)."""
        ...

    def search(self, idem_key: str) -> RemoteStatus:
        """Find a job by idem key; only when capabilities.search_by_key."""
        ...


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes/contexts, outermost first, without loops."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def is_not_delivered(exc: BaseException) -> bool:
    """True when the chain shows the request never left: connection refused, DNS failure, connect timeout."""
    names = {type(e).__name__ for e in exception_chain(exc)}
    if names & {"ConnectError", "ConnectTimeout", "ConnectionRefusedError", "gaierror"}:
        return True
    return False


def status_outcome(status: int, message: str) -> SendOutcome:
    """Classify an HTTP status from a create per the design: 400 invalid; 401/403/404/429 not delivered."""
    if status == 400:
        return SendOutcome("invalid", error=f"HTTP 400: {message}")
    if status in (401, 403, 404, 429):
        return SendOutcome("not_delivered", error=f"HTTP {status}: {message}")
    return SendOutcome("unknown", error=f"HTTP {status}: {message}", reason=f"HTTP {status}")
