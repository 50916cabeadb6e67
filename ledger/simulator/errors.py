"""Error answers in both documented shapes.

- ``google`` (Google's front end, AIP-193): ``{"error": {"code": <int>, "message", "status", "details":
  [ErrorInfo, RetryInfo]}}``;
- ``interactions`` (the Interactions API's own errors): ``{"error": {"code": "<string>", "message"}}``.

Each error fault kind answers as Google's front end does (invalid key, billing, region, permission,
disabled service, payment, unknown model, rate limit, redirect), or, for ``echo_key``, as a careless one
that quotes the request's credential back; nothing is created. A fault's ``error_shape`` picks the shape.
"""

from __future__ import annotations

from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from ledger.simulator.faults import FaultRule
    from ledger.simulator.server import _Handler

DEFAULT_RETRY_DELAY = 7.0
"""``RetryInfo.retryDelay`` (seconds) of a ``rate_limited`` fault that gives none."""

_ERROR_DOMAIN = "googleapis.com"
_SERVICE = "generativelanguage.googleapis.com"

_GRPC_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "UNKNOWN",  # Google maps no google.rpc code to 402; its fallback is UNKNOWN
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def google_error(
    code: int,
    message: str,
    *,
    status: str | None = None,
    reason: str | None = None,
    retry_delay: float | None = None,
) -> dict[str, Any]:
    """The body Google APIs answer an error with: ``{"error": {code, message, status, details}}``."""
    details: list[dict[str, Any]] = []
    if reason:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": _ERROR_DOMAIN,
                "metadata": {"service": _SERVICE},
            }
        )
    if retry_delay is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_delay:g}s"}
        )
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or _GRPC_STATUS.get(code, "UNKNOWN"),
    }
    if details:
        error["details"] = details
    return {"error": error}


ERROR_SHAPES: tuple[str, ...] = ("google", "interactions")
"""The error body shapes a fault can answer with."""

_INTERACTIONS_CODE: dict[int, str] = {
    400: "invalid_request",
    401: "unauthenticated",
    402: "payment_required",
    403: "permission_denied",
    404: "not_found",
    408: "deadline_exceeded",
    409: "aborted",
    429: "resource_exhausted",
    500: "internal_error",
    501: "unimplemented",
    503: "unavailable",
    504: "deadline_exceeded",
}


def interactions_error(code: int, message: str) -> dict[str, Any]:
    """The body the Interactions API answers its own errors with: ``{"error": {"code": "<string>", "message"}}``."""
    return {"error": {"code": _INTERACTIONS_CODE.get(code, "unknown"), "message": message}}


def error_body(
    code: int,
    message: str,
    *,
    shape: str = "google",
    status: str | None = None,
    reason: str | None = None,
    retry_delay: float | None = None,
) -> dict[str, Any]:
    """An error body in ``shape`` ("google" or "interactions"; the latter has no status or details)."""
    if shape == "interactions":
        return interactions_error(code, message)
    return google_error(code, message, status=status, reason=reason, retry_delay=retry_delay)


def _retry_headers(fault: FaultRule) -> dict[str, str]:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(int(fault.retry_after_ms))
    return headers


def _model_not_found_message(model: str) -> str:
    return (
        f"models/{model} is not found for API version v1beta, or is not supported for "
        "createInteraction. Call ListModels to see the list of available models."
    )


def send_status_fault(h: _Handler, fault: FaultRule) -> None:
    """Answer a ``status`` fault: its HTTP code, a body in the fault's shape, optional Retry-After /
    retry-after-ms / ErrorInfo / RetryInfo."""
    headers = _retry_headers(fault)
    try:
        phrase = HTTPStatus(fault.status).phrase
    except ValueError:
        phrase = "error"
    h.send_error_json(
        fault.status, f"simulated fault: {fault.status} {phrase}", headers,
        reason=fault.reason, retry_delay=fault.retry_delay, shape=fault.error_shape,
    )


def _credential(h: _Handler) -> str:
    """The credential a request carried: its x-goog-api-key, else its Authorization, else its ?key=."""
    keys = parse_qs(urlsplit(h.path).query).get("key") or []
    return h.headers.get("x-goog-api-key") or h.headers.get("Authorization") or (keys[-1] if keys else "")


def send_echo_key(h: _Handler, fault: FaultRule) -> None:
    """Answer ``fault.status`` with an error that quotes the request's credential back (message and metadata)."""
    key = _credential(h)
    body = google_error(fault.status, f"simulated fault: the request carried the credential {key}",
                        reason=fault.reason or "ECHOED_CREDENTIAL")
    for detail in body["error"].get("details", []):
        detail.setdefault("metadata", {})["credential"] = key
    h.send_json(fault.status, body)


def send_error_fault(h: _Handler, fault: FaultRule, base_url: str, model: str | None = None) -> None:
    """Answer one of the error kinds (or a redirect) in the fault's ``error_shape``; nothing is created."""
    kind = fault.kind
    headers = _retry_headers(fault)
    err = partial(h.send_error_json, shape=fault.error_shape)
    if kind == "redirect":
        h.send_redirect(fault.status, fault.location or f"{base_url}/v1beta/moved/interactions")
    elif kind == "api_key_invalid":
        err(400, "API key not valid. Please pass a valid API key.",
            status="INVALID_ARGUMENT", reason=fault.reason or "API_KEY_INVALID")
    elif kind == "billing":
        err(
            400, "Billing is not enabled for this project; enable billing to use this model.",
            status="FAILED_PRECONDITION", reason=fault.reason,
        )
    elif kind == "location":
        err(400, "User location is not supported for the API use.",
            status="FAILED_PRECONDITION", reason=fault.reason)
    elif kind == "permission_denied":
        err(403, "The caller does not have permission", status="PERMISSION_DENIED",
            reason=fault.reason)
    elif kind == "service_disabled":
        err(
            403, f"Generative Language API has not been used in this project before or it is disabled "
            f"({_SERVICE}).", status="PERMISSION_DENIED", reason=fault.reason or "SERVICE_DISABLED",
        )
    elif kind == "payment_required":
        err(402, "Payment required: the prepaid credit of this project is used up.",
            reason=fault.reason)
    elif kind == "model_not_found":
        err(404, _model_not_found_message(model or "unknown"), status="NOT_FOUND",
            reason=fault.reason)
    elif kind == "echo_key":
        send_echo_key(h, fault)
    elif kind == "rate_limited":
        delay = DEFAULT_RETRY_DELAY if fault.retry_delay is None else fault.retry_delay
        err(
            429, "You exceeded your current quota, please check your plan and billing details.",
            headers, status="RESOURCE_EXHAUSTED", reason=fault.reason, retry_delay=delay,
        )
    else:  # pragma: no cover - ERROR_KINDS and this chain are kept in step
        raise AssertionError(kind)
