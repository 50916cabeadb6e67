"""Google-shaped error answers: ``{"error": {"code", "message", "status", "details": [ErrorInfo, RetryInfo]}}``.

Each error fault kind answers as Google's front end does (invalid key, billing, region, permission,
disabled service, payment, unknown model, rate limit, redirect), or, for ``echo_key``, as a careless one
that quotes the request's credential back; nothing is created.
"""

from __future__ import annotations

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


def _model_not_found_message(model: str) -> str:
    return (
        f"models/{model} is not found for API version v1beta, or is not supported for "
        "createInteraction. Call ListModels to see the list of available models."
    )


def send_status_fault(h: _Handler, fault: FaultRule) -> None:
    """Answer a ``status`` fault: its HTTP code, Google's body, optional Retry-After / ErrorInfo / RetryInfo."""
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    try:
        phrase = HTTPStatus(fault.status).phrase
    except ValueError:
        phrase = "error"
    h.send_error_json(
        fault.status, f"simulated fault: {fault.status} {phrase}", headers,
        reason=fault.reason, retry_delay=fault.retry_delay,
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
    """Answer one of the Google-shaped error kinds (or a redirect); nothing is created."""
    kind = fault.kind
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    if kind == "redirect":
        h.send_redirect(fault.status, fault.location or f"{base_url}/v1beta/moved/interactions")
    elif kind == "api_key_invalid":
        h.send_error_json(400, "API key not valid. Please pass a valid API key.",
                          status="INVALID_ARGUMENT", reason=fault.reason or "API_KEY_INVALID")
    elif kind == "billing":
        h.send_error_json(
            400, "Billing is not enabled for this project; enable billing to use this model.",
            status="FAILED_PRECONDITION", reason=fault.reason,
        )
    elif kind == "location":
        h.send_error_json(400, "User location is not supported for the API use.",
                          status="FAILED_PRECONDITION", reason=fault.reason)
    elif kind == "permission_denied":
        h.send_error_json(403, "The caller does not have permission", status="PERMISSION_DENIED",
                          reason=fault.reason)
    elif kind == "service_disabled":
        h.send_error_json(
            403, f"Generative Language API has not been used in this project before or it is disabled "
            f"({_SERVICE}).", status="PERMISSION_DENIED", reason=fault.reason or "SERVICE_DISABLED",
        )
    elif kind == "payment_required":
        h.send_error_json(402, "Payment required: the prepaid credit of this project is used up.",
                          reason=fault.reason)
    elif kind == "model_not_found":
        h.send_error_json(404, _model_not_found_message(model or "unknown"), status="NOT_FOUND",
                          reason=fault.reason)
    elif kind == "echo_key":
        send_echo_key(h, fault)
    elif kind == "rate_limited":
        delay = DEFAULT_RETRY_DELAY if fault.retry_delay is None else fault.retry_delay
        h.send_error_json(
            429, "You exceeded your current quota, please check your plan and billing details.",
            headers, status="RESOURCE_EXHAUSTED", reason=fault.reason, retry_delay=delay,
        )
    else:  # pragma: no cover - ERROR_KINDS and this chain are kept in step
        raise AssertionError(kind)
