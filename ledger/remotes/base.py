"""What every remote adapter promises: one send, a lookup, and an honest list of what it can answer."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from ledger.redaction import Redactor
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


def storable(text: str | None) -> str | None:
    """The remote's own words as every ledger can store them: a NUL character (which PostgreSQL text cannot
    hold) written as the four characters \\x00, alike on every backend; anything else unchanged."""
    return text.replace("\x00", "\\x00") if text and "\x00" in text else text


@dataclass(frozen=True)
class SendOutcome:
    """How one send ended: accepted (with handle), not delivered, rejected as invalid, or unknown. The error
    and reason are the remote's words, kept storable (see `storable`); an accepted send whose handle no ledger
    can store (a NUL, not Unicode) is unknown, the id in its error."""

    kind: SendKind
    handle: str | None = None
    error: str | None = None
    reason: str | None = None  # for unknown: timeout, reset, 5xx, ...; for remote_unusable: why, in words
    retry_after: float | None = None  # for not_delivered: the delay the remote asked for (seconds)
    unanswered: bool = False
    """For unknown: no answer came before the send was given up (a timeout), so what had already left could
    still reach the remote for a moment (`ledger.worker.outcomes.arrival_deadline`); an answer (a 5xx, a reset by the
    remote) means nothing more is on its way."""

    def __post_init__(self) -> None:
        if self.kind == "accepted" and self.handle is not None and not _storable_text(self.handle):
            # The remote took the request but named it with an id no ledger can hold: not a handle to look it up
            # by. The send may have run: uncertain (held), the id kept in words for a person to look it up.
            shown = self.handle[:200].encode("utf-8", "backslashreplace").decode("utf-8")
            object.__setattr__(self, "kind", "unknown")
            object.__setattr__(self, "handle", None)
            object.__setattr__(self, "error", f"accepted, but the reply names it '{shown}', an id no ledger can "
                               "store (a NUL character or text that is not Unicode)")
            object.__setattr__(self, "reason", "unusable handle")
        object.__setattr__(self, "error", storable(self.error))
        object.__setattr__(self, "reason", storable(self.reason))


def _storable_text(text: str) -> bool:
    """True for text every ledger can store as it is: valid Unicode without a NUL character."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class RemoteStatus:
    """What the remote said about one job, with the raw snapshot to record."""

    state: RemoteState
    result: Any = None
    snapshot: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    handle: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "error", storable(self.error))


def redact_outcome(outcome: SendOutcome, redactor: Redactor) -> SendOutcome:
    """The outcome with every secret `redactor` knows replaced in its handle, error and reason."""
    if not redactor:
        return outcome
    return replace(
        outcome, handle=redactor.redact_value(outcome.handle), error=redactor.redact_value(outcome.error),
        reason=redactor.redact_value(outcome.reason),
    )


def redact_status(status: RemoteStatus, redactor: Redactor) -> RemoteStatus:
    """The remote's answer with every secret `redactor` knows replaced in its result, snapshot, error, handle."""
    if not redactor:
        return status
    return replace(
        status, result=redactor.redact_value(status.result), snapshot=redactor.redact_value(status.snapshot),
        error=redactor.redact_value(status.error), handle=redactor.redact_value(status.handle),
    )


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


def label_console_url(base_url: str, idem_key: str) -> str:
    """The read-only console page (the bundled simulator's) that lists the interactions labelled with `idem_key`."""
    return f"{base_url.rstrip('/')}/console/interactions?label=idem={idem_key}&format=html"


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


def status_outcome(status: int, message: str, retry_after: float | None = None) -> SendOutcome:
    """Classify an HTTP status from a create when the body says nothing more precise.

    400/422 invalid; 401/402/403, 404 (no such endpoint or model) and 3xx (we never follow a redirect
    on a create) mean the remote refuses every job: remote_unusable; 408/425/429 not delivered (try
    later, after `retry_after` when given); anything else (5xx) unknown.
    """
    text = f"HTTP {status}: {message}"
    if status in (400, 422):
        return SendOutcome("invalid", error=text)
    if 300 <= status < 400:
        return SendOutcome("remote_unusable", error=text, reason=f"the remote answered a redirect ({status}): check its URL")
    if status in (401, 403):
        return SendOutcome("remote_unusable", error=text, reason=f"the remote refuses our credentials ({status})")
    if status == 402:
        return SendOutcome("remote_unusable", error=text, reason="the remote wants payment (402)")
    if status in (404, 405):
        return SendOutcome("remote_unusable", error=text, reason=f"the remote has no such endpoint ({status}): check its URL")
    if status in (408, 425, 429):
        return SendOutcome("not_delivered", error=text, retry_after=retry_after)
    return SendOutcome("unknown", error=text, reason=f"HTTP {status}")


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (delta form only); None when absent or not a number >= 0."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 and seconds < 86_400 else None
