"""Error answers in both shapes.

- ``interactions`` (the default; the Interactions API's error page): ``{"error": {"code": "<snake_case>",
  "message"}}``, with the page's codes (``INTERACTIONS_CODES``): ``invalid_request``, ``parameter_unknown``,
  ``failed_precondition``, ``authentication``, ``payment_required``, ``permission_denied``, ``not_found``,
  ``model_not_found``, ``rate_limit_exceeded``, ``quota_exceeded``, ``api_error``, ``service_unavailable``,
  ``deadline_exceeded``, ... and no RetryInfo;
- ``google`` (Google's front end, AIP-193; kept as a robustness case, the Interactions API does not document
  it): ``{"error": {"code": <int>, "message", "status", "details": [ErrorInfo, RetryInfo]}}``.

Each error fault kind answers as the chosen shape would (invalid key, billing, region, permission, disabled
service, payment, unknown model, rate limit, quota, redirect), or, for ``echo_key``, as a careless front end
that quotes the request's credential back; nothing is created. A fault's ``error_shape`` picks the shape,
else the simulator's ``error_shape``.
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

INTERACTIONS_CODES: dict[str, int] = {
    "invalid_request": 400,
    "failed_precondition": 400,
    "parameter_unknown": 400,
    "authentication": 401,
    "payment_required": 402,
    "permission_denied": 403,
    "not_found": 404,
    "model_not_found": 404,
    "out_of_range": 416,
    "rate_limit_exceeded": 429,
    "quota_exceeded": 429,
    "cancelled": 499,
    "api_error": 500,
    "service_unavailable": 503,
    "deadline_exceeded": 504,
}
"""The Interactions API's error codes and their HTTP statuses, as its error page lists them
(https://ai.google.dev/gemini-api/docs/api-errors)."""

_CODE_OF_STATUS: dict[int, str] = {
    400: "invalid_request", 401: "authentication", 402: "payment_required", 403: "permission_denied",
    404: "not_found", 416: "out_of_range", 429: "rate_limit_exceeded", 499: "cancelled", 500: "api_error",
    503: "service_unavailable", 504: "deadline_exceeded",
}


def interactions_code(http_status: int) -> str:
    """The error page's code for an HTTP status; a status the page does not list gets its class's general code
    (``invalid_request`` for 4xx, ``api_error`` otherwise)."""
    return _CODE_OF_STATUS.get(http_status, "invalid_request" if 400 <= http_status < 500 else "api_error")


def interactions_error(code: int, message: str, word: str | None = None) -> dict[str, Any]:
    """The body the Interactions API answers errors with: ``{"error": {"code": "<snake_case>", "message"}}``;
    ``word`` is the code (default: the page's code for the HTTP status ``code``)."""
    return {"error": {"code": word or interactions_code(code), "message": message}}


def error_body(
    code: int,
    message: str,
    *,
    shape: str = "google",
    status: str | None = None,
    reason: str | None = None,
    retry_delay: float | None = None,
    word: str | None = None,
) -> dict[str, Any]:
    """An error body in ``shape``: "interactions" (``word`` or the status's code, the message; no status or
    details) or "google" (``status``, an ErrorInfo for ``reason``, a RetryInfo for ``retry_delay``)."""
    if shape == "interactions":
        return interactions_error(code, message, word)
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
        f"models/{model} is not found for API version v1, or is not supported for "
        "createInteraction. Call ListModels to see the list of available models."
    )


def send_status_fault(h: _Handler, fault: FaultRule, shape: str) -> None:
    """Answer a ``status`` fault: its HTTP code, a body in ``shape``, optional Retry-After / retry-after-ms (and,
    in the google shape, ErrorInfo / RetryInfo)."""
    headers = _retry_headers(fault)
    try:
        phrase = HTTPStatus(fault.status).phrase
    except ValueError:
        phrase = "error"
    h.send_error_json(
        fault.status, f"simulated fault: {fault.status} {phrase}", headers,
        reason=fault.reason, retry_delay=fault.retry_delay, shape=shape,
    )


def _credential(h: _Handler) -> str:
    """The credential a request carried: its x-goog-api-key, else its Authorization, else its ?key=."""
    keys = parse_qs(urlsplit(h.path).query).get("key") or []
    return h.headers.get("x-goog-api-key") or h.headers.get("Authorization") or (keys[-1] if keys else "")


def send_echo_key(h: _Handler, fault: FaultRule, shape: str) -> None:
    """Answer ``fault.status`` with an error that quotes the request's credential back (its message and, in the
    google shape, its ErrorInfo metadata)."""
    key = _credential(h)
    message = f"simulated fault: the request carried the credential {key}"
    if shape == "interactions":
        h.send_json(fault.status, interactions_error(fault.status, message))
        return
    body = google_error(fault.status, message, reason=fault.reason or "ECHOED_CREDENTIAL")
    for detail in body["error"].get("details", []):
        detail.setdefault("metadata", {})["credential"] = key
    h.send_json(fault.status, body)


def send_error_fault(h: _Handler, fault: FaultRule, base_url: str, shape: str, model: str | None = None) -> None:
    """Answer one of the error kinds (or a redirect) in ``shape``; nothing is created.

    The interactions shape uses the error page's codes (an invalid key is 401 ``authentication``, billing and
    region ``failed_precondition``, a rate limit ``rate_limit_exceeded`` with no RetryInfo); the google shape
    Google's front end (400 INVALID_ARGUMENT with API_KEY_INVALID, FAILED_PRECONDITION, RESOURCE_EXHAUSTED with a
    RetryInfo, ``retry_delay`` default 7 s)."""
    kind = fault.kind
    headers = _retry_headers(fault)
    err = partial(h.send_error_json, shape=shape)
    google = shape == "google"
    if kind == "redirect":
        h.send_redirect(fault.status, fault.location or f"{base_url}/v1beta/moved/interactions")
    elif kind == "api_key_invalid":
        err(400 if google else 401, "API key not valid. Please pass a valid API key.",
            status="INVALID_ARGUMENT", reason=fault.reason or "API_KEY_INVALID", word="authentication")
    elif kind == "billing":
        err(
            400, "Billing is not enabled for this project; enable billing to use this model.",
            status="FAILED_PRECONDITION", reason=fault.reason, word="failed_precondition",
        )
    elif kind == "location":
        err(400, "User location is not supported for the API use.",
            status="FAILED_PRECONDITION", reason=fault.reason, word="failed_precondition")
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
            reason=fault.reason, word="model_not_found")
    elif kind == "echo_key":
        send_echo_key(h, fault, shape)
    elif kind == "rate_limited":
        delay = DEFAULT_RETRY_DELAY if fault.retry_delay is None else fault.retry_delay
        err(
            429, "You exceeded your current quota, please check your plan and billing details.",
            headers, status="RESOURCE_EXHAUSTED", reason=fault.reason, retry_delay=delay if google else None,
            word="rate_limit_exceeded",
        )
    elif kind == "quota_exceeded":
        err(429, "You have exceeded your daily quota.", headers, status="RESOURCE_EXHAUSTED",
            reason=fault.reason or "QUOTA_EXCEEDED", word="quota_exceeded")
    else:  # pragma: no cover - ERROR_KINDS and this chain are kept in step
        raise AssertionError(kind)
