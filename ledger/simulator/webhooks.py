"""Signed webhook deliveries, as Gemini's static project webhook sends them (Standard Webhooks).

When a webhook URL and a ``whsec_`` secret are set, every interaction that reaches ``completed``,
``failed``, ``cancelled`` or ``requires_action`` gets one event, POSTed in the envelope Gemini documents
(a thin payload: the receiver fetches the interaction by id for anything else)::

    {"type": "interaction.completed", "version": "v1", "timestamp": "2026-01-02T03:04:05.678Z",
     "data": {"id": "<interaction id>"}}

``interaction.failed`` adds ``data.error_code`` and ``data.error_message``. Nothing else: no status,
no ``user_metadata`` (the documentation promises neither in a delivery). Headers: ``webhook-id``
(``msg_<uuid hex>``, the same on every attempt of one event), ``webhook-timestamp`` (unix seconds of
the attempt) and ``webhook-signature`` (``v1,<base64 HMAC>`` from ``standardwebhooks``), timestamp
and signature fresh on each attempt. An interaction whose create reply was lost, or whose create
hung, is delivered all the same: the remote ran it.

Deliveries are at least once, as Gemini's are: a POST answered with a non-2xx status, or failing to
connect, is retried with exponential backoff (``GEMINI_RETRY_SCHEDULE``) until ``WEBHOOK_RETRY_WINDOW``
(24 h) has passed since the first attempt; then it is given up (logged). ``webhook_time_compression``
divides every wait (1440: the 24 h window passes in 60 s), for the demo and tests; an explicit
``webhook_retry_delays`` tuple (real seconds, one per retry) replaces the schedule. Order is not
promised. ``webhook_first_attempt_fail_rate`` makes that share of first attempts fail (never sent, as
if the POST had timed out) so they arrive on a retry; ``receiver_down(seconds)`` makes every attempt
in that period fail to connect, so a delivery is lost only when the receiver stays unreachable for
longer than the retry window. One daemon thread does it all, outside the lock: it notices completions
and cancels falling due (a heap of due times, so it sleeps until the next one), sends what is due, and
schedules retries; API handlers only queue. ``stop()`` ends it.

Webhook fault rules (``add_webhook_fault``) act on one event each: see ``WEBHOOK_FAULT_KINDS``.
"""

from __future__ import annotations

import base64
import heapq
import http.client
import json
import secrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ledger.simulator.base import is_loopback_host
from ledger.simulator.faults import FaultsMixin

if TYPE_CHECKING:
    from ledger.simulator.gemini import _Interaction

WEBHOOK_EVENTS: dict[str, str] = {
    "completed": "interaction.completed",
    "failed": "interaction.failed",
    "cancelled": "interaction.cancelled",
    "requires_action": "interaction.requires_action",
}
"""Interaction status -> the webhook event type sent when an interaction reaches it."""

WEBHOOK_RETRY_WINDOW = 86_400.0
"""Seconds (remote time) after the first attempt during which a failed delivery is retried: Gemini's 24 h."""

GEMINI_RETRY_SCHEDULE: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0, 3600.0)
"""Seconds (remote time) before each retry, exponential backoff capped at an hour; the last value repeats
until ``WEBHOOK_RETRY_WINDOW`` is used up. Gemini documents the 24 h and the backoff, not the steps."""

WEBHOOK_RETRY_DELAYS: tuple[float, ...] | None = None
"""The default ``webhook_retry_delays``: None, the Gemini schedule (compressed by ``webhook_time_compression``)."""

WEBHOOK_EVENT_VERSION = "v1"
"""The ``version`` of every delivery's envelope."""

WEBHOOK_TIMEOUT = 5.0
"""Seconds one delivery POST may take (connect, send, answer)."""

_IDLE_WAIT = 30.0  # the thread's longest sleep when nothing is due (it is woken for anything new)


def _iso_now_ms() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def webhook_event(event: str, interaction_id: str, error: tuple[str, str] | None = None) -> dict[str, Any]:
    """The documented delivery envelope for ``event`` about ``interaction_id``; ``error`` (code, message)
    adds ``data.error_code`` / ``data.error_message`` (``interaction.failed``)."""
    data: dict[str, Any] = {"id": interaction_id}
    if error is not None:
        data["error_code"], data["error_message"] = error
    return {"type": event, "version": WEBHOOK_EVENT_VERSION, "timestamp": _iso_now_ms(), "data": data}


def _check_webhook_url(url: str) -> str:
    """The URL, if it is ``http://`` on a loopback host with a port; ValueError otherwise."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"webhook_url must be an http:// URL, got {url!r}")
    if not is_loopback_host(parts.hostname):
        raise ValueError(f"webhook_url must name a loopback host (the simulator only talks to loopback), got {url!r}")
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"webhook_url has a bad port: {url!r}") from exc
    return url


def _check_webhook_secret(secret: str) -> str:
    """The secret, if it is ``whsec_`` and base64 Standard Webhooks accepts; ValueError otherwise."""
    if not isinstance(secret, str) or not secret.startswith("whsec_"):
        raise ValueError("webhook_secret must be a Standard Webhooks secret: 'whsec_' then base64")
    try:
        key = base64.b64decode(secret.removeprefix("whsec_") + "==", validate=False)
    except ValueError as exc:
        raise ValueError("webhook_secret: the part after 'whsec_' is not base64") from exc
    if not key:
        raise ValueError("webhook_secret must not be empty after 'whsec_'")
    return secret


def _sign(secret: str, msg_id: str, timestamp: int, body: str) -> str:
    from standardwebhooks.webhooks import Webhook  # only needed once webhooks are configured

    signature: str = Webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body)
    return signature


def _other_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


@dataclass
class _Delivery:
    msg_id: str
    type: str
    interaction_id: str
    idem: str | None
    body: str
    due: float
    fault: str | None = None
    hold_seconds: float = 0.0
    attempts: int = 0
    copy: bool = False  # the second send of a `duplicate` fault
    released: bool = False  # an `out_of_order` delivery let go
    first_at: float | None = None  # time.monotonic() of the first attempt (the retry window starts there)
    fail_first: bool = False  # the first attempt fails without being sent (webhook_first_attempt_fail_rate)


class WebhooksMixin(FaultsMixin):
    """The project webhook: events on status changes, signed POSTs, retries, faults, a delivery log."""

    webhook_url: str | None
    webhook_secret: str | None
    webhook_retry_delays: tuple[float, ...] | None
    webhook_time_compression: float
    webhook_first_attempt_fail_rate: float
    _receiver_down_until: float
    _watch: list[tuple[float, int, str]]
    _watch_seq: int
    _outbox: list[_Delivery]
    _held: list[tuple[_Delivery, float | None]]
    _inflight: int
    _delivery_log: list[dict[str, Any]]
    _webhook_wake: threading.Event
    _webhook_thread: threading.Thread | None
    _webhook_conn: http.client.HTTPConnection | None

    def _init_webhooks(self, webhook_url: str | None, webhook_secret: str | None) -> None:
        self.webhook_url = _check_webhook_url(webhook_url) if webhook_url else None
        self.webhook_secret = _check_webhook_secret(webhook_secret) if webhook_secret else None
        self.webhook_retry_delays = WEBHOOK_RETRY_DELAYS
        self.webhook_time_compression = 1.0
        self.webhook_first_attempt_fail_rate = 0.0
        self._receiver_down_until = 0.0
        self._watch = []
        self._watch_seq = 0
        self._outbox = []
        self._held = []
        self._inflight = 0
        self._delivery_log = []
        self._webhook_wake = threading.Event()
        self._webhook_thread = None
        self._webhook_conn = None

    # -- public ----------------------------------------------------------------
    @property
    def webhooks_enabled(self) -> bool:
        """True when both a webhook URL and a secret are set (deliveries are made)."""
        return bool(self.webhook_url and self.webhook_secret)

    def webhook_deliveries(self) -> list[dict[str, Any]]:
        """Every delivery attempt (and every dropped event), oldest first.

        Each: ``msg_id``, ``type``, ``interaction_id``, ``idem``, ``attempt`` (1, 2, ...; 0 for a drop),
        ``status`` (the receiver's HTTP status, or None), ``error`` (why there was no 2xx, or None),
        ``ok``, ``sent`` (ISO UTC of the attempt, None for a drop), ``fault`` (the webhook fault acting
        on this attempt, or None).
        """
        with self._lock:
            return [dict(d) for d in self._delivery_log]

    def receiver_down(self, seconds: float) -> None:
        """From now on, for ``seconds`` (real seconds), every delivery attempt fails as if the receiver refused
        the connection (nothing is sent); failed deliveries are retried as usual. 0 ends the outage."""
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise ValueError("receiver_down seconds must be a number >= 0")
        with self._lock:
            self._receiver_down_until = time.monotonic() + float(seconds)
            self._webhook_wake.set()

    def pending_webhooks(self) -> int:
        """Events not settled yet: queued, being sent, waiting for a retry or a delay, or held back.

        0 means every event so far was delivered, dropped or given up (and logged)."""
        with self._lock:
            return len(self._outbox) + len(self._held) + self._inflight

    # -- configuration (the lock is held by the caller) ---------------------------
    def _set_webhook_target_locked(self, webhook_url: str | None, webhook_secret: str | None) -> None:
        """None leaves a setting as it is; "" turns it off. Values must be valid (checked by the caller)."""
        if webhook_url is not None:
            self.webhook_url = webhook_url or None
        if webhook_secret is not None:
            self.webhook_secret = webhook_secret or None
        self._webhook_wake.set()

    def _webhook_config_locked(self) -> dict[str, Any]:
        return {
            "webhook_url": self.webhook_url,
            "webhook_secret_set": self.webhook_secret is not None,
            "webhook_time_compression": self.webhook_time_compression,
            "webhook_first_attempt_fail_rate": self.webhook_first_attempt_fail_rate,
            "receiver_down_seconds_left": round(max(0.0, self._receiver_down_until - time.monotonic()), 3),
        }

    def _reset_webhooks_locked(self) -> None:
        self._watch.clear()
        self._outbox.clear()
        self._held.clear()
        self._delivery_log.clear()
        self._webhook_rules.clear()
        self._receiver_down_until = 0.0

    # -- events (the lock is held by the caller) ------------------------------------
    def _watch_locked(self, rec: _Interaction, at: float | None = None) -> None:
        """Remember when a stored interaction completes (or ``at``, e.g. a cancel falling due), so its event
        goes out then."""
        self._watch_seq += 1
        heapq.heappush(self._watch, (rec.complete_at if at is None else at, self._watch_seq, rec.id))
        if self._watch[0][2] == rec.id:
            self._webhook_wake.set()

    def _emit_locked(self, rec: _Interaction, now: float) -> None:
        """Queue the event for ``rec``'s status if it is a webhook status not yet announced."""
        status = rec.status(now)
        event = WEBHOOK_EVENTS.get(status)
        if event is None or status == rec.webhook_status:
            return
        rec.webhook_status = status
        if not self.webhooks_enabled:
            return
        body = json.dumps(webhook_event(event, rec.id, rec.error_code_message() if status == "failed" else None))
        delivery = _Delivery(
            msg_id=f"msg_{uuid.uuid4().hex}", type=event, interaction_id=rec.id, idem=rec.idem, body=body, due=now
        )
        if self.webhook_first_attempt_fail_rate > 0 and self._rng.random() < self.webhook_first_attempt_fail_rate:
            delivery.fail_first = True
        rule = self._pick_webhook_fault_locked(rec.idem)
        if rule is not None:
            delivery.fault = rule.kind
            if rule.kind == "drop":
                self._log_locked(delivery, status=None, error="dropped (webhook fault)", sent=None, attempt=0,
                                 fault="drop")
                return
            if rule.kind == "delay":
                delivery.due = now + rule.seconds
            delivery.hold_seconds = rule.seconds
        self._outbox.append(delivery)
        self._webhook_wake.set()

    def _log_locked(
        self, d: _Delivery, *, status: int | None, error: str | None, sent: str | None, attempt: int,
        fault: str | None,
    ) -> None:
        self._delivery_log.append(
            {
                "msg_id": d.msg_id,
                "type": d.type,
                "interaction_id": d.interaction_id,
                "idem": d.idem,
                "attempt": attempt,
                "status": status,
                "error": error,
                "ok": status is not None and 200 <= status < 300,
                "sent": sent,
                "fault": fault,
            }
        )

    # -- the delivery thread -----------------------------------------------------
    def _start_webhooks(self) -> None:
        if self._webhook_thread is not None:
            return
        self._webhook_thread = threading.Thread(
            target=self._webhook_loop, name=f"reclaim-simulator-webhooks:{self.port}", daemon=True
        )
        self._webhook_thread.start()

    def _stop_webhooks(self) -> None:
        """End the delivery thread (``_stopping`` is set by the caller); aborts a POST under way."""
        self._webhook_wake.set()
        conn = self._webhook_conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        thread, self._webhook_thread = self._webhook_thread, None
        if thread is not None:
            thread.join(timeout=2.0)

    def _webhook_loop(self) -> None:
        while not self._stopping.is_set():
            self._webhook_wake.clear()
            due, next_at = self._take_due()
            for i, delivery in enumerate(due):
                if self._stopping.is_set():
                    with self._lock:  # kept for a restart
                        self._outbox.extend(due[i:])
                        self._inflight -= len(due) - i
                    break
                self._attempt(delivery)
            if due:
                continue
            timeout = _IDLE_WAIT if next_at is None else min(_IDLE_WAIT, max(0.0, next_at - time.monotonic()))
            self._webhook_wake.wait(timeout)

    def _take_due(self) -> tuple[list[_Delivery], float | None]:
        """Announce interactions whose completion time passed; take the deliveries due now."""
        now = time.monotonic()
        due: list[_Delivery] = []
        with self._lock:
            while self._watch and self._watch[0][0] <= now:
                _, _, iid = heapq.heappop(self._watch)
                rec = self._interactions.get(iid)
                if rec is not None:
                    self._emit_locked(rec, now)
            still_held: list[tuple[_Delivery, float | None]] = []
            for d, until in self._held:
                if until is not None and until <= now:
                    d.released = True
                    self._outbox.append(d)
                else:
                    still_held.append((d, until))
            self._held = still_held
            waiting: list[_Delivery] = []
            for d in self._outbox:
                if d.due > now:
                    waiting.append(d)
                elif d.fault == "out_of_order" and not d.released:
                    self._held.append((d, now + d.hold_seconds if d.hold_seconds > 0 else None))
                else:
                    due.append(d)
            self._outbox = waiting
            self._inflight += len(due)
            times = [d.due for d in waiting] + [u for _, u in self._held if u is not None]
            if self._watch:
                times.append(self._watch[0][0])
        return due, (min(times) if times else None)

    def _attempt(self, d: _Delivery) -> None:
        """One POST of ``d`` (outside the lock); then log it and schedule what follows."""
        with self._lock:
            url, secret = self.webhook_url, self.webhook_secret
        if not url or not secret:
            with self._lock:
                self._inflight -= 1
                self._log_locked(d, status=None, error="webhooks turned off before delivery", sent=None,
                                 attempt=0, fault=None)
            return
        d.attempts += 1
        if d.first_at is None:
            d.first_at = time.monotonic()
        bad = d.fault == "bad_signature" and d.attempts == 1
        timestamp = int(time.time())
        sent = _iso_now_ms()
        status: int | None
        error: str | None
        with self._lock:
            down = time.monotonic() < self._receiver_down_until
        if down:
            status, error = None, "ConnectionRefusedError: the receiver is down (receiver_down fault); not sent"
        elif d.fail_first and d.attempts == 1:
            status, error = None, "TimeoutError: first attempt failed (webhook_first_attempt_fail_rate); not sent"
        else:
            status, error = self._sign_and_post(d, url, secret, bad, timestamp)
        ok = status is not None and 200 <= status < 300
        if status is not None and not ok:
            error = f"HTTP {status}"
        acting = d.copy or (d.attempts == 1 and d.fault in ("delay", "bad_signature", "out_of_order"))
        fault = d.fault if acting else None
        if down:
            fault = "receiver_down"
        elif d.fail_first and d.attempts == 1:
            fault = "first_attempt_fails"
        now = time.monotonic()
        with self._lock:
            self._inflight -= 1
            retry_in = None if ok else self._retry_delay_locked(d, now)
            if not ok and retry_in is None:
                error = f"{error}; given up after attempt {d.attempts} (retry window used up)"
            self._log_locked(d, status=status, error=error, sent=sent, attempt=d.attempts, fault=fault)
            if ok and d.fault == "duplicate" and not d.copy:
                self._outbox.append(replace(d, copy=True, due=now))
            elif retry_in is not None:
                d.due = now + retry_in
                self._outbox.append(d)
            if self._held:
                for held, _ in self._held:  # the next delivery was sent: let the held ones go
                    held.released = True
                    held.due = now
                    self._outbox.append(held)
                self._held = []

    def _retry_delay_locked(self, d: _Delivery, now: float) -> float | None:
        """Real seconds until the next attempt of failed ``d``, or None when it is given up."""
        if self.webhook_retry_delays is not None:
            delays = self.webhook_retry_delays
            return delays[d.attempts - 1] if d.attempts <= len(delays) else None
        scale = self.webhook_time_compression
        step = GEMINI_RETRY_SCHEDULE[min(d.attempts, len(GEMINI_RETRY_SCHEDULE)) - 1]
        first = d.first_at if d.first_at is not None else now
        if (now - first) * scale + step > WEBHOOK_RETRY_WINDOW:
            return None
        return step / scale

    def _sign_and_post(
        self, d: _Delivery, url: str, secret: str, bad: bool, timestamp: int
    ) -> tuple[int | None, str | None]:
        try:
            signature = _sign(_other_secret() if bad else secret, d.msg_id, timestamp, d.body)
        except Exception as exc:  # e.g. standardwebhooks is not installed: logged, retried like a failed POST
            return None, f"cannot sign: {type(exc).__name__}: {exc}"
        else:
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "reclaim-simulator-webhooks",
                "webhook-id": d.msg_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": signature,
            }
            return self._post(url, d.body.encode(), headers)

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None]:
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=WEBHOOK_TIMEOUT)
        self._webhook_conn = conn
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            return resp.status, None
        except (OSError, http.client.HTTPException) as exc:
            return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        finally:
            self._webhook_conn = None
            conn.close()
