"""Settings, counters and inspection, and the ``/_sim/...`` control endpoints that expose them over HTTP.

Control requests are not API calls: they are never counted, need no key, and no fault applies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger.simulator.cleanup import CleanupMixin
from ledger.simulator.console import RemoteConsoleMixin
from ledger.simulator.errors import ERROR_SHAPES
from ledger.simulator.gemini import GeminiMixin, check_cancel_delay, check_retention
from ledger.simulator.webhooks import _check_webhook_secret, _check_webhook_url

if TYPE_CHECKING:
    from ledger.simulator.server import _Handler

class Unset:
    """The type of ``UNSET``: a setting not given (for settings where None is a value)."""


UNSET = Unset()

_FAULT_FIELDS = frozenset(
    {"kind", "count", "match_idem", "method", "status", "seconds", "retry_after", "reason", "retry_delay",
     "location", "end_status", "text", "error_shape", "retry_after_ms"}
)
_WEBHOOK_FAULT_FIELDS = frozenset({"kind", "count", "match_idem", "seconds"})
_CONFIG_FIELDS = frozenset(
    {"dedupes_by_key", "cleanup_seconds", "complete_after", "cleanup_selected", "api_key", "unknown_models",
     "webhook_url", "webhook_secret", "webhook_drop_rate", "echo_labels", "echo_webhook_config", "retention_seconds",
     "cancel_delay", "webhook_time_compression", "webhook_first_attempt_fail_rate", "receiver_down_seconds",
     "error_shape"}
)


class ControlMixin(GeminiMixin, CleanupMixin, RemoteConsoleMixin):
    """configure / reset / calls / count / inspection, and the control endpoints."""

    # -- config ------------------------------------------------------------------
    def configure(
        self,
        *,
        dedupes_by_key: bool | None = None,
        cleanup_seconds: float | None = None,
        complete_after: float | None = None,
        cleanup_selected: int | None = None,
        api_key: str | None = None,
        unknown_models: Sequence[str] | None = None,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        webhook_drop_rate: float | None = None,
        echo_labels: bool | None = None,
        echo_webhook_config: bool | None = None,
        retention_seconds: float | Unset | None = UNSET,
        cancel_delay: float | None = None,
        webhook_time_compression: float | None = None,
        webhook_first_attempt_fail_rate: float | None = None,
        receiver_down_seconds: float | None = None,
        error_shape: str | None = None,
    ) -> dict[str, Any]:
        """Change runtime settings (only the ones given); returns the resulting config.

        ``api_key=""`` turns the key check off (None leaves it as it is). ``webhook_url`` (``http://``
        on loopback) and ``webhook_secret`` (``whsec_...``): deliveries are made while both are set;
        ``""`` unsets one. The secret is never echoed (``webhook_secret_set`` says whether there is one).
        ``echo_labels`` / ``echo_webhook_config``: whether replies carry the create's labels / webhook_config.
        ``retention_seconds``: a GET (or cancel) answers 404 once an interaction is that old (None: kept for
        good). ``cancel_delay``: seconds from an accepted cancel to ``cancelled``. ``webhook_time_compression``:
        divides the Gemini retry schedule's waits (> 0). ``webhook_first_attempt_fail_rate``: share of first
        delivery attempts that fail (then retried). ``receiver_down_seconds``: every delivery attempt fails to
        connect for that long from now (0 ends it). ``error_shape``: the body of the API's errors and of faults
        that name none, "interactions" (documented; the default) or "google" (a robustness case). Bad values
        raise ValueError and change nothing.
        """
        if error_shape is not None and error_shape not in ERROR_SHAPES:
            raise ValueError(f"error_shape must be one of {', '.join(ERROR_SHAPES)}")
        if retention_seconds is not UNSET:
            retention_seconds = check_retention(retention_seconds)
        if cancel_delay is not None:
            cancel_delay = check_cancel_delay(cancel_delay)
        if webhook_time_compression is not None and (
            isinstance(webhook_time_compression, bool) or not isinstance(webhook_time_compression, (int, float))
            or webhook_time_compression <= 0
        ):
            raise ValueError("webhook_time_compression must be a number > 0 (1: real time)")
        for name, rate in (("webhook_first_attempt_fail_rate", webhook_first_attempt_fail_rate),
                           ("webhook_drop_rate", webhook_drop_rate)):
            if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                     or not 0.0 <= float(rate) <= 1.0):
                raise ValueError(f"{name} must be a number within [0, 1]")
        for name, flag in (("echo_labels", echo_labels), ("echo_webhook_config", echo_webhook_config)):
            if flag is not None and not isinstance(flag, bool):
                raise ValueError(f"{name} must be true or false")
        if receiver_down_seconds is not None:
            self.receiver_down(receiver_down_seconds)  # validates; takes the lock itself
        if webhook_url:
            _check_webhook_url(webhook_url)
        if webhook_secret:
            _check_webhook_secret(webhook_secret)
        with self._lock:
            if webhook_drop_rate is not None:
                self.webhook_drop_rate = float(webhook_drop_rate)
            if echo_labels is not None:
                self.echo_labels = echo_labels
            if error_shape is not None:
                self.error_shape = error_shape
            if echo_webhook_config is not None:
                self.echo_webhook_config = echo_webhook_config
            if not isinstance(retention_seconds, Unset):
                self.retention_seconds = retention_seconds
            if cancel_delay is not None:
                self.cancel_delay = cancel_delay
            if webhook_time_compression is not None:
                self.webhook_time_compression = float(webhook_time_compression)
            if webhook_first_attempt_fail_rate is not None:
                self.webhook_first_attempt_fail_rate = float(webhook_first_attempt_fail_rate)
            if api_key is not None:
                self.api_key = api_key or None
            if unknown_models is not None:
                self.unknown_models = {str(m).removeprefix("models/") for m in unknown_models}
            if dedupes_by_key is not None:
                self.dedupes_by_key = bool(dedupes_by_key)
            if cleanup_seconds is not None:
                self.cleanup_seconds = float(cleanup_seconds)
            if complete_after is not None:
                self.complete_after = float(complete_after)
            if cleanup_selected is not None:
                self.cleanup_selected = int(cleanup_selected)
            if webhook_url is not None or webhook_secret is not None:
                self._set_webhook_target_locked(webhook_url, webhook_secret)
            return self._config_locked()

    def _config_locked(self) -> dict[str, Any]:
        return {
            "dedupes_by_key": self.dedupes_by_key,
            "cleanup_seconds": self.cleanup_seconds,
            "complete_after": self.complete_after,
            "cleanup_selected": self.cleanup_selected,
            "webhook_drop_rate": self.webhook_drop_rate,
            "echo_labels": self.echo_labels,
            "echo_webhook_config": self.echo_webhook_config,
            "error_shape": self.error_shape,
            "retention_seconds": self.retention_seconds,
            "cancel_delay": self.cancel_delay,
            "api_key_checked": self.api_key is not None,
            "unknown_models": sorted(self.unknown_models),
            **self._webhook_config_locked(),
        }

    def reset(self) -> None:
        """Clear counters, fault rules/rates, stored interactions and jobs, webhook faults, queued deliveries
        and the delivery log (ids keep growing; settings, webhook URL and secret stay)."""
        with self._lock:
            self._reset_counts()
            self._create_fields.clear()
            self._rules.clear()
            self._rates = {}
            self._method_rates = {}
            self._interactions.clear()
            self._jobs.clear()
            self._reset_webhooks_locked()

    # -- counters ------------------------------------------------------------------
    def calls(self) -> dict[str, Any]:
        """Snapshot of request counts: ``{"total", "by_method", "by_idem"}``."""
        with self._lock:
            return {
                "total": self._total,
                "by_method": dict(self._by_method),
                "by_idem": {k: dict(v) for k, v in self._by_idem.items()},
            }

    def create_field_count(self, name: str) -> int:
        """How many creates carried the top-level field ``name`` (counted when the create arrives, whatever
        it was answered)."""
        with self._lock:
            return self._create_fields.get(name, 0)

    def count(self, method: str | None = "create", idem: str | None = None) -> int:
        """Number of requests of ``method`` (None = all methods), optionally for one idem/key."""
        with self._lock:
            if idem is None:
                return self._total if method is None else self._by_method.get(method, 0)
            per = self._by_idem.get(idem, {})
            return sum(per.values()) if method is None else per.get(method, 0)

    # -- inspection -------------------------------------------------------------------
    def interactions(self) -> list[dict[str, Any]]:
        """All stored interactions (with idem, attempt, input, user_metadata), oldest first."""
        now = time.monotonic()
        with self._lock:
            return [i.debug_json(now) for i in self._interactions.values()]

    def interaction(self, interaction_id: str) -> dict[str, Any] | None:
        """One stored interaction as a dict, or None."""
        now = time.monotonic()
        with self._lock:
            rec = self._interactions.get(interaction_id)
            return rec.debug_json(now) if rec else None

    def interaction_arrival(self, interaction_id: str) -> float:
        """``time.monotonic()`` when the create of this interaction was stored; KeyError if unknown."""
        with self._lock:
            return self._interactions[interaction_id].created_mono

    def find_by_idem(self, idem: str) -> list[dict[str, Any]]:
        """Stored interactions whose ``labels.idem`` equals ``idem``, oldest first."""
        return [i for i in self.interactions() if i["idem"] == idem]

    def cleanup_jobs(self) -> list[dict[str, Any]]:
        """All stored clean-up jobs, oldest first."""
        now = time.monotonic()
        with self._lock:
            return [j.to_json(now) for j in self._jobs.values()]

    # -- control endpoints ----------------------------------------------------------
    def _control(self, h: _Handler, verb: str, path: str, raw: bytes) -> None:
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            h.send_error_json(400, "control body must be JSON")
            return
        route = (verb, path.rstrip("/"))
        try:
            if route == ("GET", "/_sim/calls"):
                h.send_json(200, self.calls())
            elif route == ("POST", "/_sim/reset"):
                self.reset()
                h.send_json(200, {"ok": True})
            elif route == ("GET", "/_sim/faults"):
                h.send_json(200, {"faults": self.faults(), "rates": self.fault_rates(),
                                  "cleanup_rates": self.fault_rates("cleanup")})
            elif route == ("POST", "/_sim/faults"):
                _need_object(body, "fault body")
                if "rates" in body:
                    self.set_fault_rates(body["rates"], seed=body.get("seed"), method=body.get("method", "create"))
                else:
                    _only(body, _FAULT_FIELDS, "fault")
                    if "kind" not in body:
                        raise ValueError("fault needs a kind")
                    self.add_fault(**body)
                h.send_json(200, {"ok": True, "faults": self.faults()})
            elif route == ("DELETE", "/_sim/faults"):
                self.clear_faults()
                h.send_json(200, {"ok": True})
            elif route == ("GET", "/_sim/config"):
                h.send_json(200, self.configure())
            elif route == ("POST", "/_sim/config"):
                _need_object(body, "config body")
                _only(body, _CONFIG_FIELDS, "config")
                h.send_json(200, self.configure(**body))
            elif route == ("GET", "/_sim/interactions"):
                h.send_json(200, {"interactions": self.interactions()})
            elif route == ("GET", "/_sim/cleanup"):
                h.send_json(200, {"jobs": self.cleanup_jobs()})
            elif route == ("GET", "/_sim/webhooks"):
                h.send_json(200, self._webhooks_json())
            elif route == ("POST", "/_sim/webhooks"):
                _need_object(body, "webhook fault body")
                _only(body, _WEBHOOK_FAULT_FIELDS, "webhook fault")
                if "kind" not in body:
                    raise ValueError("webhook fault needs a kind")
                self.add_webhook_fault(**body)
                h.send_json(200, {"ok": True, "faults": self.webhook_faults()})
            elif route == ("DELETE", "/_sim/webhooks"):
                self.clear_webhook_faults()
                h.send_json(200, {"ok": True})
            else:
                h.send_error_json(404, f"no such control endpoint: {verb} {path}")
        except (ValueError, TypeError) as exc:
            h.send_error_json(400, str(exc))

    def _webhooks_json(self) -> dict[str, Any]:
        with self._lock:
            config = self._webhook_config_locked()
        return {
            **config,
            "deliveries": self.webhook_deliveries(),
            "pending": self.pending_webhooks(),
            "faults": self.webhook_faults(),
        }


def _need_object(body: Any, what: str) -> None:
    if not isinstance(body, dict):
        raise ValueError(f"{what} must be a JSON object")


def _only(body: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise ValueError(f"unknown {what} fields: {sorted(unknown)}")
