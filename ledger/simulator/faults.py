"""Fault rules, random fault rates, and picking the fault for a request (or a webhook delivery).

API fault rules queue FIFO per method and optional idem key; a rule applies to the next ``count``
matching requests. Random rates apply to creates no rule matches: Gemini's (``create``) and the clean-up API's
(``cleanup``), each method drawing from its own seeded generator. Webhook fault rules are a separate
FIFO queue, consumed when an interaction's event is generated.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from ledger.simulator.base import METHODS, _Close, _SimBase
from ledger.simulator.errors import ERROR_SHAPES, send_error_fault, send_status_fault

if TYPE_CHECKING:
    from ledger.simulator.server import _Handler

FaultKind = Literal[
    "drop_before_accept", "accept_then_hang", "complete_lose_reply", "status", "slow",
    # error answers (nothing is created), in the fault's error shape:
    "api_key_invalid", "billing", "location", "permission_denied", "service_disabled",
    "payment_required", "model_not_found", "rate_limited", "quota_exceeded", "redirect",
    # an error answer (``status``, default 503) whose message quotes the credential the request carried:
    "echo_key",
    # a create that is accepted and whose interaction ends in `end_status` (with `text`):
    "end_status",
    # a create that is accepted, whose reply names the interaction `text` instead of its own id:
    "reply_id",
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

ERROR_KINDS: frozenset[str] = frozenset(
    {
        "api_key_invalid", "billing", "location", "permission_denied", "service_disabled",
        "payment_required", "model_not_found", "rate_limited", "quota_exceeded", "redirect", "echo_key",
    }
)
"""Fault kinds that answer with an error (or a redirect) before anything is created."""

WebhookFaultKind = Literal["drop", "delay", "duplicate", "bad_signature", "out_of_order"]
WEBHOOK_FAULT_KINDS: tuple[str, ...] = get_args(WebhookFaultKind)
"""What a webhook fault does to one delivery: ``drop`` (never sent), ``delay`` (first sent after
``seconds``), ``duplicate`` (sent again, same ``webhook-id``, after it was taken), ``bad_signature``
(first attempt signed with another secret), ``out_of_order`` (held back until the next delivery was
sent, or at most ``seconds`` when given)."""

RATE_METHODS: tuple[str, ...] = ("create", "cleanup")
"""The creates random fault rates can apply to: Gemini's and the clean-up API's."""

RANDOM_SLOW_SECONDS = 1.0
"""Delay used by a ``slow`` fault drawn in random mode."""


@dataclass
class FaultRule:
    """One queued fault: applies to the next ``count`` matching requests."""

    kind: str
    count: int = 1
    match_idem: str | None = None
    method: str = "create"
    status: int = 503
    seconds: float = 0.0
    retry_after: float | None = None
    reason: str | None = None
    retry_delay: float | None = None
    location: str | None = None
    end_status: str | None = None
    text: str | None = None
    error_shape: str | None = None  # None: the simulator's error_shape
    retry_after_ms: float | None = None

    def validate(self) -> None:
        """Raise ValueError if the rule is malformed."""
        if self.error_shape is not None and self.error_shape not in ERROR_SHAPES:
            raise ValueError(f"unknown error_shape {self.error_shape!r}; expected one of {ERROR_SHAPES}")
        if self.retry_after_ms is not None and (
            isinstance(self.retry_after_ms, bool) or not isinstance(self.retry_after_ms, (int, float))
            or self.retry_after_ms < 0
        ):
            raise ValueError("retry_after_ms must be a number of milliseconds >= 0")
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}"
            )
        if self.method not in METHODS:
            raise ValueError(
                f"unknown method {self.method!r}; expected one of {METHODS}"
            )
        if not isinstance(self.count, int) or self.count < 1:
            raise ValueError("count must be a positive integer")
        if not 100 <= int(self.status) <= 599:
            raise ValueError("status must be an HTTP status code")
        if self.seconds < 0:
            raise ValueError("seconds must be >= 0")
        if self.retry_after is not None and self.retry_after < 0:
            raise ValueError("retry_after must be >= 0")
        if self.retry_delay is not None and self.retry_delay < 0:
            raise ValueError("retry_delay must be >= 0")
        if self.kind == "redirect" and not 300 <= int(self.status) <= 399:
            raise ValueError("a redirect fault needs a 3xx status (default 307)")
        if self.kind == "end_status":
            if self.method != "create":
                raise ValueError("an end_status fault applies to creates only")
            if not self.end_status:
                raise ValueError("an end_status fault needs end_status (e.g. 'incomplete')")
        if self.kind == "reply_id":
            if self.method != "create":
                raise ValueError("a reply_id fault applies to creates only")
            if not self.text:
                raise ValueError("a reply_id fault needs text: the id the reply names")


@dataclass
class WebhookFaultRule:
    """One queued webhook fault: applies to the next ``count`` deliveries (of ``match_idem``'s interactions)."""

    kind: str
    count: int = 1
    match_idem: str | None = None
    seconds: float = 0.0

    def validate(self) -> None:
        """Raise ValueError if the rule is malformed."""
        if self.kind not in WEBHOOK_FAULT_KINDS:
            raise ValueError(f"unknown webhook fault kind {self.kind!r}; expected one of {WEBHOOK_FAULT_KINDS}")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise ValueError("count must be a positive integer")
        if not isinstance(self.seconds, (int, float)) or self.seconds < 0:
            raise ValueError("seconds must be a number >= 0")
        if self.kind == "delay" and self.seconds <= 0:
            raise ValueError("a delay webhook fault needs seconds > 0")


class FaultsMixin(_SimBase):
    """Queued and random faults for API requests, and queued faults for webhook deliveries."""

    _rules: list[FaultRule]
    _rates: dict[str, float]
    _rng: random.Random
    _method_rates: dict[str, tuple[dict[str, float], random.Random]]
    """Random fault rates of the other creates (RATE_METHODS but ``create``), each with its own generator."""
    _webhook_rules: list[WebhookFaultRule]
    webhook_drop_rate: float
    error_shape: str  # the shape of the error answers a fault gives none for, and of the API's own errors

    def _init_faults(self) -> None:
        self.error_shape = "interactions"
        self._rules = []
        self._rates = {}
        self._rng = random.Random()
        self._method_rates = {}
        self._webhook_rules = []
        self.webhook_drop_rate = 0.0

    def add_fault(
        self,
        kind: str,
        *,
        count: int = 1,
        match_idem: str | None = None,
        method: str = "create",
        status: int = 503,
        seconds: float = 0.0,
        retry_after: float | None = None,
        reason: str | None = None,
        retry_delay: float | None = None,
        location: str | None = None,
        end_status: str | None = None,
        text: str | None = None,
        error_shape: str | None = None,
        retry_after_ms: float | None = None,
    ) -> FaultRule:
        """Queue a fault for the next ``count`` matching requests (FIFO); returns the rule.

        ``retry_after`` (seconds) adds a ``Retry-After`` header to ``status`` / ``rate_limited``
        faults; in the google shape ``reason`` adds an ErrorInfo and ``retry_delay`` a RetryInfo to their body.
        The error kinds (``ledger.simulator.errors.send_error_fault``): ``api_key_invalid`` (interactions: 401
        authentication; google: 400 INVALID_ARGUMENT, API_KEY_INVALID), ``billing`` / ``location`` (400
        failed_precondition / FAILED_PRECONDITION), ``permission_denied`` (403), ``service_disabled`` (403,
        SERVICE_DISABLED), ``payment_required`` (402), ``model_not_found`` (404), ``rate_limited`` (429
        rate_limit_exceeded; google: RESOURCE_EXHAUSTED with RetryInfo, ``retry_delay`` default 7 s),
        ``quota_exceeded`` (429 quota_exceeded),
        ``redirect`` (``status`` 307 or 308 to ``location``), ``echo_key`` (``status``, default 503, whose
        message and ErrorInfo metadata quote the ``x-goog-api-key`` / ``Authorization`` / ``?key=`` the
        request carried, as a careless front end might). ``end_status`` (creates only): the
        create is accepted and the interaction ends in ``end_status`` (any documented status, or
        any other string to play an undocumented one), with ``text`` as its answer (partial text
        for ``incomplete``; "" for none). ``reply_id`` (creates only): the create is accepted, and its reply
        names the interaction ``text`` instead of its own id (a front end that mangles ids).
        ``error_shape``: the body of an error answer, "interactions" (``{"error": {"code": "<snake_case>",
        "message"}}``, as documented) or "google" (integer code, status, details; a robustness case); None:
        the simulator's ``error_shape``. ``retry_after_ms`` adds a
        ``retry-after-ms`` header (milliseconds).
        """
        if kind == "redirect" and status == 503:  # the default status: a redirect's default is 307
            status = 307
        rule = FaultRule(
            kind=kind,
            count=count,
            match_idem=match_idem,
            method=method,
            status=int(status),
            seconds=float(seconds),
            retry_after=retry_after,
            reason=reason,
            retry_delay=None if retry_delay is None else float(retry_delay),
            location=location,
            end_status=end_status,
            text=text,
            error_shape=error_shape,
            retry_after_ms=retry_after_ms,
        )
        rule.validate()
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_faults(self) -> None:
        """Drop every queued fault rule and disable random fault mode (webhook faults are kept)."""
        with self._lock:
            self._rules.clear()
            self._rates = {}
            self._method_rates = {}

    def set_fault_rates(
        self, rates: Mapping[str, float], seed: int | None = None, method: str = "create"
    ) -> None:
        """Enable random faults for the creates of ``method`` no rule matches: ``{kind: probability}``.

        ``method`` is one of RATE_METHODS: "create" (Gemini's creates) or "cleanup" (the clean-up API's). Each
        method draws from its own generator seeded with ``seed``, so setting one method's rates changes no draw of
        the other's. Raises ValueError for an unknown method or kind, a rate outside [0, 1], or rates summing
        above 1."""
        if method not in RATE_METHODS:
            raise ValueError(f"unknown method {method!r} for fault rates; expected one of {RATE_METHODS}")
        clean: dict[str, float] = {}
        for kind, rate in rates.items():
            if kind.startswith("status:"):
                code = kind.partition(":")[2]
                if not (code.isdigit() and 400 <= int(code) <= 599):
                    raise ValueError(f"fault {kind!r}: use status:NNN with NNN from 400 to 599")
            elif kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault kind {kind!r}")
            elif kind in ("end_status", "reply_id"):
                what = "a status" if kind == "end_status" else "the id to name"
                raise ValueError(f"{kind} needs {what}: queue it with add_fault, not as a rate")
            if not 0.0 <= float(rate) <= 1.0:
                raise ValueError(f"rate for {kind} must be within [0, 1]")
            clean[kind] = float(rate)
        if sum(clean.values()) > 1.0 + 1e-9:
            raise ValueError("fault rates must sum to at most 1")
        with self._lock:
            if method == "create":
                self._rates = clean
                self._rng = random.Random(seed)
            elif clean:
                self._method_rates[method] = (clean, random.Random(seed))
            else:
                self._method_rates.pop(method, None)

    def faults(self) -> list[dict[str, Any]]:
        """Return the pending fault rules (with remaining counts) as dicts."""
        with self._lock:
            return [asdict(r) for r in self._rules]

    def fault_rates(self, method: str = "create") -> dict[str, float]:
        """The random fault rates in force for ``method``'s creates (``{}``: random mode off)."""
        with self._lock:
            if method == "create":
                return dict(self._rates)
            return dict(self._method_rates.get(method, ({}, self._rng))[0])

    # -- webhook faults ------------------------------------------------------
    def add_webhook_fault(
        self, kind: str, count: int = 1, match_idem: str | None = None, seconds: float = 0.0
    ) -> WebhookFaultRule:
        """Queue a fault for the next ``count`` webhook deliveries (of ``match_idem``'s interactions); FIFO.

        Kinds (``WEBHOOK_FAULT_KINDS``): ``drop``, ``delay`` (``seconds`` > 0), ``duplicate``,
        ``bad_signature``, ``out_of_order`` (``seconds`` > 0 bounds how long it is held).
        """
        rule = WebhookFaultRule(kind=kind, count=count, match_idem=match_idem, seconds=seconds)
        rule.validate()
        rule.seconds = float(rule.seconds)
        with self._lock:
            self._webhook_rules.append(rule)
        return rule

    def webhook_faults(self) -> list[dict[str, Any]]:
        """The pending webhook fault rules (with remaining counts) as dicts."""
        with self._lock:
            return [asdict(r) for r in self._webhook_rules]

    def clear_webhook_faults(self) -> None:
        """Drop every queued webhook fault rule."""
        with self._lock:
            self._webhook_rules.clear()

    def _pick_webhook_fault_locked(self, idem: str | None) -> WebhookFaultRule | None:
        """Consume one webhook rule matching ``idem``; caller holds the lock."""
        for i, rule in enumerate(self._webhook_rules):
            if rule.match_idem is not None and rule.match_idem != idem:
                continue
            rule.count -= 1
            if rule.count <= 0:
                del self._webhook_rules[i]
            return WebhookFaultRule(kind=rule.kind, match_idem=rule.match_idem, seconds=rule.seconds)
        if self.webhook_drop_rate > 0 and self._rng.random() < self.webhook_drop_rate:
            return WebhookFaultRule(kind="drop", match_idem=idem)  # the demo's "no webhook came" case
        return None

    # -- picking and applying API faults ---------------------------------------
    def _pick_fault(self, method: str, idem: str | None) -> FaultRule | None:
        """Consume one matching rule (or draw a random fault). Caller holds the lock."""
        for i, rule in enumerate(self._rules):
            if rule.method != method:
                continue
            if rule.match_idem is not None and rule.match_idem != idem:
                continue
            rule.count -= 1
            if rule.count <= 0:
                del self._rules[i]
            return FaultRule(
                kind=rule.kind,
                method=rule.method,
                status=rule.status,
                seconds=rule.seconds,
                retry_after=rule.retry_after,
                reason=rule.reason,
                retry_delay=rule.retry_delay,
                location=rule.location,
                end_status=rule.end_status,
                text=rule.text,
                error_shape=rule.error_shape,
                retry_after_ms=rule.retry_after_ms,
            )
        rates, rng = (self._rates, self._rng) if method == "create" else self._method_rates.get(method, ({}, self._rng))
        if rates:
            draw = rng.random()
            acc = 0.0
            for kind, rate in rates.items():
                acc += rate
                if draw < acc:
                    # "status" draws a 503; "status:400" draws that code.
                    kind_name, _, code = kind.partition(":")
                    return FaultRule(
                        kind=kind_name,
                        method=method,
                        status=int(code) if code else (307 if kind_name == "redirect" else 503),
                        seconds=RANDOM_SLOW_SECONDS,
                    )
        return None

    def _apply_slow(self, fault: FaultRule | None) -> FaultRule | None:
        """Sleep for a ``slow`` fault; returns the fault still to apply (None after slow)."""
        if fault is not None and fault.kind == "slow":
            if self._wait(fault.seconds):
                raise _Close
            return None
        return fault

    def _front_faults(
        self, h: _Handler, fault: FaultRule | None, model: str | None = None
    ) -> tuple[bool, FaultRule | None]:
        """Apply the faults that act before any object is touched (slow, drop, status, error kinds).

        Returns (True, None) when the fault already answered the request, else (False, the fault left
        to apply once the request has been handled).
        """
        fault = self._apply_slow(fault)
        if fault is not None and fault.kind == "drop_before_accept":
            raise _Close
        if fault is not None and fault.kind == "status":
            send_status_fault(h, fault, fault.error_shape or self.error_shape)
            return True, None
        if fault is not None and fault.kind in ERROR_KINDS:
            send_error_fault(h, fault, self.url, fault.error_shape or self.error_shape, model)
            return True, None
        return False, fault
