"""Loopback simulator of the Gemini Interactions HTTP API and a storage clean-up API.

The simulator serves on 127.0.0.1 (or another loopback address) and is meant
for tests and demos of reclaim: it lets the real ``google-genai`` SDK talk to
it (``HttpOptions(base_url=sim.url)``), counts every API request when it
arrives (before any fault is applied), and injects faults that reproduce the
ambiguous outcomes a reservation ledger must survive (request lost, reply
lost, hung connection, HTTP errors, slowness).

It speaks the current Interactions API as google-genai 3.6.1 models it: replies
carry ``steps`` (no legacy ``outputs``), every documented status is reachable
(``force_status``, or an ``end_status`` fault on a create), ids are long opaque
strings, the API key is checked (``x-goog-api-key`` or ``?key=``), replies copy the
documented resource (``object``, ``usage``, the ``user_input`` step on GET; a background create answers
``in_progress``; the ``labels`` and v1beta ``webhook_config`` echoes, which no documented reply shows, each
switchable), a v1 create carrying a field only v1beta documents is refused 400 ``parameter_unknown``,
interactions expire after ``retention_seconds`` (one day by default, the free tier's), a cancel may take
``cancel_delay``, and errors come in the Interactions API's documented shape ``{"error": {"code":
"<snake_case>", "message"}}`` with the error page's codes and no RetryInfo, or, as a robustness case chosen per
simulator or per fault (``error_shape``), Google's front end ``{"error": {"code": <int>, "message", "status",
"details"}}``; fault kinds cover each answer that makes a remote unusable (invalid key, billing, region,
permission, unknown model), rate limits, quota and redirects. ``tests/documented/`` holds the documented
examples they are checked against.

What the remote did can be found out the ways Gemini offers: a GET by handle, signed Standard
Webhooks deliveries from the project webhook (``webhook_url`` / ``webhook_secret``, with faults of
their own), and a read-only console listing interactions by label (``console_url``).

Modules, one concern each: ``server`` (HTTP server, handler, routing, lifecycle), ``gemini``
(the Interactions API, statuses), ``errors`` (Google-shaped errors), ``cleanup`` (the clean-up API),
``webhooks`` (deliveries), ``faults`` (fault rules, rates, picking), ``console`` (the listing by
label), ``control`` (settings, counters, inspection, ``/_sim`` endpoints), ``cli``; ``base`` holds
the shared state and primitives. Stdlib only, except ``standardwebhooks``, imported once a delivery
is signed. One lock guards all state; nothing sleeps, hangs or sends while holding it.
"""

from __future__ import annotations

from ledger.simulator.base import MAX_HANG_SECONDS, METHODS, Method, is_loopback_host
from ledger.simulator.cleanup import DEFAULT_CLEANUP_SELECTED
from ledger.simulator.cli import main, serve
from ledger.simulator.console import CONSOLE_PATH
from ledger.simulator.errors import (
    DEFAULT_RETRY_DELAY,
    ERROR_SHAPES,
    INTERACTIONS_CODES,
    google_error,
    interactions_error,
)
from ledger.simulator.faults import (
    ERROR_KINDS,
    FAULT_KINDS,
    RANDOM_SLOW_SECONDS,
    WEBHOOK_FAULT_KINDS,
    FaultKind,
    FaultRule,
    WebhookFaultKind,
    WebhookFaultRule,
)
from ledger.simulator.gemini import (
    DEFAULT_API_KEY,
    DEFAULT_RETENTION_SECONDS,
    INTERACTION_STATUSES,
    STORE_FALSE_WITH_BACKGROUND,
    WEBHOOK_CONFIG_NEEDS_BACKGROUND,
)
from ledger.simulator.server import Simulator
from ledger.simulator.server import _Handler as _Handler  # scripts/bench_tick.py tunes its socket option
from ledger.simulator.webhooks import (
    GEMINI_RETRY_SCHEDULE,
    WEBHOOK_EVENT_VERSION,
    WEBHOOK_EVENTS,
    WEBHOOK_RETRY_DELAYS,
    WEBHOOK_RETRY_WINDOW,
    WEBHOOK_TIMEOUT,
    webhook_event,
)

__all__ = [
    "CONSOLE_PATH",
    "DEFAULT_API_KEY",
    "DEFAULT_CLEANUP_SELECTED",
    "DEFAULT_RETENTION_SECONDS",
    "DEFAULT_RETRY_DELAY",
    "ERROR_KINDS",
    "ERROR_SHAPES",
    "FAULT_KINDS",
    "GEMINI_RETRY_SCHEDULE",
    "INTERACTIONS_CODES",
    "INTERACTION_STATUSES",
    "MAX_HANG_SECONDS",
    "METHODS",
    "RANDOM_SLOW_SECONDS",
    "STORE_FALSE_WITH_BACKGROUND",
    "WEBHOOK_CONFIG_NEEDS_BACKGROUND",
    "WEBHOOK_EVENTS",
    "WEBHOOK_EVENT_VERSION",
    "WEBHOOK_FAULT_KINDS",
    "WEBHOOK_RETRY_DELAYS",
    "WEBHOOK_RETRY_WINDOW",
    "WEBHOOK_TIMEOUT",
    "FaultKind",
    "FaultRule",
    "Method",
    "Simulator",
    "WebhookFaultKind",
    "WebhookFaultRule",
    "google_error",
    "interactions_error",
    "is_loopback_host",
    "main",
    "serve",
    "webhook_event",
]
