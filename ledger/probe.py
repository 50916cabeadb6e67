"""`reclaim remotes probe NAME`: check, against the live Gemini remote, every assumption reclaim makes of it.

reclaim trusts a remote's answers as evidence only because of a few facts about the remote that its
documentation states and that no test against the bundled simulator can prove of the real service:

- a create with `background=True` and our `labels` {idem, attempt} is accepted (one create, never retried);
- a GET by handle echoes those labels (how a webhook delivery, which names only an interaction id, is
  attributed to its job);
- every status the remote answers is one reclaim maps (`REMOTE_STATE_OF_STATUS`);
- a cancel is accepted (how a duplicate interaction is stopped while it runs);
- a GET of an id the remote does not know answers 404 with an error body in one of the two documented
  shapes (how a lost handle is told from a failed read);
- with a project webhook configured (`webhook_secret_env`): a delivery for the interaction reaches
  `reclaim receiver`, in the documented envelope, signed the Standard Webhooks way under the secret.

The probe costs one tiny interaction: one create (input `PROBE_INPUT`, labelled with a fresh `probe-` idem
key that names no job), cancelled at once, read back once, and one GET of an id that does not exist. It
reserves nothing and writes nothing to the ledger; with a webhook configured it reads the ledger (the
receiver's evidence for its interaction) until the delivery arrives or `wait_seconds` pass.

Each assumption is reported as holds / does not hold / unknown, with what was seen and whether this
config relies on it; `ProbeReport.ok` is true only when every assumption relied on holds.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import quote

from ledger.clock import iso, parse_time
from ledger.config import Config, RemoteConfig
from ledger.db import connect
from ledger.errors import BadInput
from ledger.model import Evidence
from ledger.redaction import Redactor
from ledger.store import evidence as evidence_store

if TYPE_CHECKING:
    from ledger.remotes.base import RemoteStatus, SendOutcome

PROBE_INPUT: Final = "Reply with the one word: ok"
"""The probe's whole input: a tiny interaction."""

PROBE_KEY_PREFIX: Final = "probe-"
"""The probe's idem keys start with this; reclaim's own keys are hex hashes, so a probe names no job."""

DEFAULT_WAIT_SECONDS: Final = 60.0
"""How long the probe waits for its webhook delivery to reach the ledger, unless told."""

POLL_SECONDS: Final = 0.2
"""How often the ledger is read while the probe waits for its delivery."""

TERMINAL_STATUSES: Final = frozenset({"completed", "failed", "cancelled", "incomplete", "budget_exceeded"})
"""Gemini statuses after which there is nothing left to cancel."""

WEBHOOK_EVENTS: Final = ("interaction.completed", "interaction.failed", "interaction.cancelled",
                         "interaction.requires_action")
"""The events the project webhook must be subscribed to (the ones `reclaim receiver` records)."""

Verdict = Literal["holds", "does not hold", "unknown"]


@dataclass(frozen=True)
class Assumption:
    """One thing reclaim assumes of the remote, and what the probe found."""

    key: str  # stable id: create_labels, get_labels, statuses, cancel, error_body, delivery, envelope, signature
    name: str
    verdict: Verdict
    seen: str
    relied_on: bool
    why: str  # why this config relies on it, or why not

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ProbeReport:
    """What one probe of one remote found."""

    remote: str
    idem_key: str
    handle: str | None
    assumptions: tuple[Assumption, ...] = field(default_factory=tuple)

    @property
    def failing(self) -> list[Assumption]:
        """The assumptions this config relies on that were not seen to hold."""
        return [a for a in self.assumptions if a.relied_on and a.verdict != "holds"]

    @property
    def ok(self) -> bool:
        """True when every assumption this config relies on holds."""
        return not self.failing

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"remote": self.remote, "idem_key": self.idem_key, "handle": self.handle, "ok": self.ok,
                "failing": [a.name for a in self.failing], "assumptions": [a.to_dict() for a in self.assumptions]}


def probe_target(config: Config, name: str) -> RemoteConfig:
    """The remote `name` as the config declares it, if the probe can check it; BadInput (nothing sent) if not."""
    rc = config.remotes.get(name)
    if rc is None:
        declared = ", ".join(sorted(config.remotes)) or "none"
        raise BadInput(f"remotes probe: no remote named {name!r} in the config (declared: {declared}); "
                       "nothing was sent")
    if rc.kind != "gemini":
        raise BadInput(f"remotes probe: remote {name!r} is of kind {rc.kind!r}; the probe is for gemini remotes "
                       "only; nothing was sent")
    return rc


def probe_remote(
    config: Config, name: str, *, ledger: str | Path | None = None, wait_seconds: float = DEFAULT_WAIT_SECONDS,
    notice: Callable[[str], None] | None = None,
) -> ProbeReport:
    """Probe the gemini remote `name`: one create (never retried), its cancel, two GETs, and with a webhook
    configured the wait (at most `wait_seconds`) for its delivery to appear in `ledger` (read only).

    Raises BadInput (nothing sent) for a remote that is not declared or not a gemini one, or a webhook config
    without a ledger to read; ConfigError (nothing sent) when the API key's variable is not set; LedgerUnusable
    (nothing sent) when the ledger cannot be read. `notice` is told, in words, what the probe is waiting for.
    """
    rc = probe_target(config, name)
    webhook = bool(rc.webhook_secret_env)
    refused_before: dict[str, int] = {}
    if webhook:
        if ledger is None:
            raise BadInput(f"remotes probe: remote {name!r} has a webhook; give the ledger its receiver writes to")
        refused_before = _refusals(ledger)  # the ledger must be readable before anything is sent
    from ledger.remotes.gemini import GeminiRemote

    adapter = GeminiRemote(rc)  # ConfigError when the key's variable is not set: nothing sent
    idem = f"{PROBE_KEY_PREFIX}{secrets.token_hex(8)}"
    try:
        outcome = adapter.send({"input": PROBE_INPUT}, idem, 1)  # one create: the adapter never retries it
        handle = outcome.handle if outcome.kind == "accepted" else None
        cancelled = adapter.cancel(handle) if handle else None  # at once, while it likely still runs
        looked = adapter.lookup(handle) if handle else None
    finally:
        adapter.close()
    rows = [
        _create_row(outcome, idem),
        _labels_row(looked, idem),
        _statuses_row(cancelled, looked),
        _cancel_row(cancelled, looked),
        _error_body_row(rc, handle),
    ]
    if not webhook:
        why = "not configured (this remote names no webhook_secret_env)"
        rows += [Assumption(key, label, "unknown", why, False, "no webhook is configured for this remote")
                 for key, label in (("delivery", DELIVERY), ("envelope", ENVELOPE), ("signature", SIGNATURE))]
    else:
        assert ledger is not None
        rows += _webhook_rows(rc, ledger, handle, refused_before, wait_seconds, notice)
    return ProbeReport(remote=name, idem_key=idem, handle=handle, assumptions=tuple(rows))


# -- the rows -----------------------------------------------------------------------------------------------------

CREATE = "create accepted with labels"
LABELS = "GET echoes labels"
STATUSES = "statuses seen are ones reclaim maps"
CANCEL = "cancel accepted"
ERROR_BODY = "unknown id: 404, error body readable"
DELIVERY = "webhook delivery reaches the receiver"
ENVELOPE = "delivery envelope as documented"
SIGNATURE = "Standard Webhooks signature verifies"

_ALWAYS = "every send"


def _create_row(outcome: SendOutcome, idem: str) -> Assumption:
    why = f"{_ALWAYS}: a create carries background=True and labels {{idem, attempt}}"
    if outcome.kind == "accepted":
        return Assumption("create_labels", CREATE, "holds",
                          f"accepted as {outcome.handle} (background, labels idem={idem}, attempt=1)", True, why)
    said = "; ".join(p for p in (outcome.error, outcome.reason) if p) or outcome.kind
    if outcome.kind == "unknown":
        said += f"; an interaction labelled idem={idem} may exist; the create was not retried"
    return Assumption("create_labels", CREATE, "does not hold", f"{outcome.kind}: {said}", True, why)


def _labels_row(looked: RemoteStatus | None, idem: str) -> Assumption:
    why = "attribution: a webhook delivery names only an interaction id; its GET's labels name the job"
    if looked is None:
        return Assumption("get_labels", LABELS, "unknown", "no interaction was created to GET", True, why)
    if looked.state in ("error", "not_found"):
        return Assumption("get_labels", LABELS, "does not hold", f"the GET failed: {looked.error}", True, why)
    labels = looked.snapshot.get("labels")
    if not isinstance(labels, dict) or not labels:
        return Assumption("get_labels", LABELS, "does not hold", "the GET's reply carries no labels", True, why)
    shown = json.dumps(labels, sort_keys=True)[:300]
    if labels.get("idem") == idem and str(labels.get("attempt")) == "1":
        return Assumption("get_labels", LABELS, "holds", f"labels {shown}", True, why)
    return Assumption("get_labels", LABELS, "does not hold",
                      f"labels {shown} do not carry idem={idem}, attempt=1", True, why)


def _status_of(status: RemoteStatus | None) -> str | None:
    raw = status.snapshot.get("status") if status is not None else None
    return raw if isinstance(raw, str) else None


def _statuses_row(cancelled: RemoteStatus | None, looked: RemoteStatus | None) -> Assumption:
    from ledger.remotes.gemini import REMOTE_STATE_OF_STATUS

    why = "polling and the receiver map each status to running / completed / failed / a person"
    seen = [(where, s) for where, s in (("cancel", _status_of(cancelled)), ("GET", _status_of(looked))) if s]
    if not seen:
        return Assumption("statuses", STATUSES, "unknown", "no status was answered", True, why)
    shown = ", ".join(f"{s} ({where})" for where, s in seen)
    odd = sorted({s for _where, s in seen if s not in REMOTE_STATE_OF_STATUS})
    if odd:
        return Assumption("statuses", STATUSES, "does not hold", f"{shown}; not mapped: {', '.join(odd)}", True, why)
    return Assumption("statuses", STATUSES, "holds", shown, True, why)


def _cancel_row(cancelled: RemoteStatus | None, looked: RemoteStatus | None) -> Assumption:
    why = "a second interaction for one idem key is cancelled while it runs"
    if cancelled is None:
        return Assumption("cancel", CANCEL, "unknown", "no interaction was created to cancel", True, why)
    status = _status_of(cancelled)
    if cancelled.state not in ("error", "not_found") and status is not None:
        return Assumption("cancel", CANCEL, "holds", f"answered status {status}", True, why)
    after = _status_of(looked)
    if after in TERMINAL_STATUSES and after != "cancelled":
        return Assumption("cancel", CANCEL, "unknown", f"the interaction finished ({after}) before the cancel, "
                          f"which answered: {cancelled.error}; run the probe again", True, why)
    return Assumption("cancel", CANCEL, "does not hold", f"the cancel failed: {cancelled.error}", True, why)


def missing_id(handle: str | None) -> str:
    """An interaction id shaped like `handle` (its last characters changed) that no interaction has; a random
    one when there is no handle to copy."""
    if handle is None or len(handle) < 12:
        return f"v1_{PROBE_KEY_PREFIX}missing-{secrets.token_hex(12)}"
    tail = "".join("0" if c != "0" else "1" for c in handle[-8:])
    return handle[:-8] + tail


def error_shape(body: Any) -> str | None:
    """Which documented error shape `body` (parsed JSON) has: "interactions" (`{"error": {"code": "<string>",
    "message"}}`), "google.rpc" (`{"error": {"code": <int>, "status", "message"}}`), or None (neither)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or not isinstance(err.get("message"), str):
        return None
    code = err.get("code")
    if isinstance(code, str) and code:
        return "interactions"
    if isinstance(code, int) and not isinstance(code, bool) and isinstance(err.get("status"), str):
        return "google.rpc"
    return None


def _error_body_row(rc: RemoteConfig, handle: str | None) -> Assumption:
    """GET an id the remote does not know, raw (so the body is seen as sent), and read its error body."""
    import httpx2

    from ledger.remotes.gemini import API_VERSION, GEMINI_API_BASE_URL, tls_context

    why = "a lost handle (404) is held for a person; an error is classified by its body, in either shape"
    redactor = Redactor.for_remote(rc)
    iid = missing_id(handle)
    url = f"{(rc.base_url or GEMINI_API_BASE_URL).rstrip('/')}/{API_VERSION}/interactions/{quote(iid, safe='')}"
    key = os.environ.get(rc.api_key_env) or ("simulator" if rc.base_url else "")
    try:
        with httpx2.Client(follow_redirects=False, timeout=rc.timeout_seconds, verify=tls_context()) as http:
            reply = http.get(url, headers={"x-goog-api-key": key})
    except Exception as exc:
        said = redactor.redact_value(f"{type(exc).__name__}: {exc}"[:300])
        return Assumption("error_body", ERROR_BODY, "unknown", f"the GET of {iid} failed: {said}", True, why)
    try:
        body: Any = reply.json()
    except ValueError:
        body = None
    shape = error_shape(body)
    text = str(redactor.redact_value(reply.text.strip()))[:200]
    seen = f"HTTP {reply.status_code}, " + (f"{shape} shape" if shape else f"a body in neither shape: {text!r}")
    holds = reply.status_code == 404 and shape is not None
    return Assumption("error_body", ERROR_BODY, "holds" if holds else "does not hold", seen, True, why)


def _refusals(ledger: str | Path) -> dict[str, int]:
    conn = connect(ledger, readonly=True)
    try:
        return evidence_store.refusal_counts(conn)
    finally:
        conn.close()


def _deliveries(ledger: str | Path, handle: str) -> tuple[list[Evidence], dict[str, int]]:
    conn = connect(ledger, readonly=True)
    try:
        return evidence_store.for_handle(conn, handle, source="webhook"), evidence_store.refusal_counts(conn)
    finally:
        conn.close()


def _webhook_rows(
    rc: RemoteConfig, ledger: str | Path, handle: str | None, refused_before: dict[str, int], wait_seconds: float,
    notice: Callable[[str], None] | None,
) -> list[Assumption]:
    """Wait (bounded) for the receiver to record a delivery for `handle`; read its envelope and signature."""
    why = f"webhook_secret_env = {rc.webhook_secret_env}: deliveries are evidence"
    if handle is None:
        return [Assumption(key, label, "unknown", "no interaction was created to deliver", True, why)
                for key, label in (("delivery", DELIVERY), ("envelope", ENVELOPE), ("signature", SIGNATURE))]
    if notice is not None:
        notice(f"waiting up to {wait_seconds:g} s for the webhook delivery for {handle} to reach the ledger "
               "(through `reclaim receiver`)")
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        found, refused = _deliveries(ledger, handle)
        if found or time.monotonic() >= deadline:
            break
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
    grew = {r: n - refused_before.get(r, 0) for r, n in refused.items() if n > refused_before.get(r, 0)}
    refusals = ", ".join(f"{r}: {n}" for r, n in sorted(grew.items()))
    if not found:
        hint = (f"no delivery for {handle} reached the ledger within {wait_seconds:g} s: is `reclaim receiver` "
                f"running on this ledger, reachable from the remote, and the project webhook subscribed to "
                f"{', '.join(WEBHOOK_EVENTS)}?")
        if refusals:
            hint += f" The receiver refused deliveries meanwhile ({refusals})."
        signed = [r for r in grew if r in ("unsigned", "bad_signature_or_stale")]
        signature = (Assumption("signature", SIGNATURE, "does not hold",
                                f"the receiver refused deliveries while the probe waited ({refusals})", True, why)
                     if signed else
                     Assumption("signature", SIGNATURE, "unknown", "no delivery arrived to verify", True, why))
        return [Assumption("delivery", DELIVERY, "does not hold", hint, True, why),
                Assumption("envelope", ENVELOPE, "unknown", "no delivery arrived to read", True, why),
                signature]
    first = found[0]
    detail = first.detail
    kinds = ", ".join(str(ev.detail.get("type")) for ev in found)
    delivered = Assumption("delivery", DELIVERY, "holds",
                           f"{len(found)} recorded for {handle} ({kinds}), the first at {iso(first.at)}", True, why)
    problems: list[str] = []
    if detail.get("type") not in WEBHOOK_EVENTS:
        problems.append(f"type {detail.get('type')!r}")
    if not isinstance(detail.get("version"), str) or not detail.get("version"):
        problems.append("no version")
    sent_at = detail.get("sent_at")
    try:
        parse_time(str(sent_at))
    except (BadInput, ValueError):
        problems.append(f"timestamp {sent_at!r} is not a time")
    shown = (f"type {detail.get('type')}, version {detail.get('version')}, timestamp {sent_at}, "
             f"data.id {first.handle}")
    envelope = Assumption("envelope", ENVELOPE, "does not hold" if problems else "holds",
                          shown + (f"; not as documented: {', '.join(problems)}" if problems else ""), True, why)
    signer = str(detail.get("remote") or "?")
    verified = f"HMAC-SHA256 (webhook-id, webhook-timestamp, webhook-signature) verified under {signer}'s secret"
    if signer != rc.name:
        verified += f" (not {rc.name}'s: two remotes share the project webhook)"
    return [delivered, envelope, Assumption("signature", SIGNATURE, "holds", verified, True, why)]
