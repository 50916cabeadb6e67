"""Signed webhook deliveries, as Gemini's static project webhook sends them (Standard Webhooks).

When a webhook URL and a ``whsec_`` secret are set, every interaction that reaches ``completed``,
``failed``, ``cancelled`` or ``requires_action`` gets one event, POSTed as JSON::

    {"type": "interaction.completed", "timestamp": "2026-01-02T03:04:05.678Z",
     "data": {"id": "<interaction id>", "status": "completed", "user_metadata": {...}}}

with the headers ``webhook-id`` (``msg_<uuid hex>``, the same on every attempt of one event),
``webhook-timestamp`` (unix seconds of the attempt) and ``webhook-signature`` (``v1,<base64 HMAC>``
from ``standardwebhooks.Webhook(secret).sign``). ``user_metadata`` is the create's
``webhook_config.user_metadata`` (``{}`` without one). An interaction whose create reply was lost,
or whose create hung, is delivered all the same: the remote ran it.

Deliveries are at least once: a POST answered with a non-2xx status, or failing to connect, is tried
again after ``webhook_retry_delays`` (so up to ``1 + len(webhook_retry_delays)`` attempts). One
daemon thread does it all, outside the lock: it notices ``complete_after`` passing (a heap of due
times, so it sleeps until the next one), sends what is due, and schedules retries; API handlers only
queue. ``stop()`` ends it.

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

WEBHOOK_RETRY_DELAYS: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)
"""Seconds before each retry of a failed delivery (so at most 5 attempts)."""

WEBHOOK_TIMEOUT = 5.0
"""Seconds one delivery POST may take (connect, send, answer)."""

_IDLE_WAIT = 30.0  # the thread's longest sleep when nothing is due (it is woken for anything new)


def _iso_now_ms() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


class WebhooksMixin(FaultsMixin):
    """The project webhook: events on status changes, signed POSTs, retries, faults, a delivery log."""

    webhook_url: str | None
    webhook_secret: str | None
    webhook_retry_delays: tuple[float, ...]
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
        return {"webhook_url": self.webhook_url, "webhook_secret_set": self.webhook_secret is not None}

    def _reset_webhooks_locked(self) -> None:
        self._watch.clear()
        self._outbox.clear()
        self._held.clear()
        self._delivery_log.clear()
        self._webhook_rules.clear()

    # -- events (the lock is held by the caller) ------------------------------------
    def _watch_locked(self, rec: _Interaction) -> None:
        """Remember when a stored interaction completes, so its event goes out then."""
        self._watch_seq += 1
        heapq.heappush(self._watch, (rec.complete_at, self._watch_seq, rec.id))
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
        body = json.dumps(
            {
                "type": event,
                "timestamp": _iso_now_ms(),
                "data": {"id": rec.id, "status": status, "user_metadata": rec.user_metadata},
            }
        )
        delivery = _Delivery(
            msg_id=f"msg_{uuid.uuid4().hex}", type=event, interaction_id=rec.id, idem=rec.idem, body=body, due=now
        )
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
        bad = d.fault == "bad_signature" and d.attempts == 1
        timestamp = int(time.time())
        sent = _iso_now_ms()
        status: int | None
        error: str | None
        try:
            signature = _sign(_other_secret() if bad else secret, d.msg_id, timestamp, d.body)
        except Exception as exc:  # e.g. standardwebhooks is not installed: logged, retried like a failed POST
            status, error = None, f"cannot sign: {type(exc).__name__}: {exc}"
        else:
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "reclaim-simulator-webhooks",
                "webhook-id": d.msg_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": signature,
            }
            status, error = self._post(url, d.body.encode(), headers)
        ok = status is not None and 200 <= status < 300
        if status is not None and not ok:
            error = f"HTTP {status}"
        acting = d.copy or (d.attempts == 1 and d.fault in ("delay", "bad_signature", "out_of_order"))
        fault = d.fault if acting else None
        now = time.monotonic()
        with self._lock:
            self._inflight -= 1
            self._log_locked(d, status=status, error=error, sent=sent, attempt=d.attempts, fault=fault)
            if ok and d.fault == "duplicate" and not d.copy:
                self._outbox.append(replace(d, copy=True, due=now))
            elif not ok and d.attempts <= len(self.webhook_retry_delays):
                d.due = now + self.webhook_retry_delays[d.attempts - 1]
                self._outbox.append(d)
            if self._held:
                for held, _ in self._held:  # the next delivery was sent: let the held ones go
                    held.released = True
                    held.due = now
                    self._outbox.append(held)
                self._held = []

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
