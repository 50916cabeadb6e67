"""The Gemini Interactions API subset: create, get, cancel, delete; statuses; the API key check.

It speaks the current Interactions API as google-genai 3.6.1 models it: replies carry ``steps`` (no
legacy ``outputs``), every documented status is reachable (``force_status``, or an ``end_status``
fault on a create), ids are long opaque strings, the API key is checked (``x-goog-api-key`` or
``?key=``), and errors come in the simulator's ``error_shape`` (``errors``: the Interactions API's by
default). A background create answers ``in_progress``, as documented. On ``v1beta`` a create may carry
``webhook_config: {"user_metadata": {...}, "uris": [...]}`` (stored; the URIs unused: the simulator plays the
project webhook); the v1 reference does not document the field, so a v1 create carrying it is refused as the
error page says an unknown field is (400 ``parameter_unknown``), and nothing is created.
"""

from __future__ import annotations

import base64
import collections
import json
import random
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from ledger.simulator.base import _Close, _now_iso
from ledger.simulator.errors import _model_not_found_message
from ledger.simulator.faults import FaultsMixin
from ledger.simulator.webhooks import WebhooksMixin

if TYPE_CHECKING:
    from ledger.simulator.server import _Handler

INTERACTION_STATUSES: tuple[str, ...] = (
    "in_progress",
    "completed",
    "failed",
    "cancelled",
    "requires_action",
    "incomplete",
    "budget_exceeded",
    "queued",
    "idle",
    "requires_continuation",
)
"""Every status google-genai 3.6.1 documents for an interaction (``InteractionStatus`` in
``google/genai/_gaos/types/interactions/interaction.py``)."""

DEFAULT_API_KEY = "simulator"
"""The key the simulator accepts by default: what reclaim's Gemini adapter sends when a
``base_url`` is configured and no key variable is set."""

_ANSWERED = frozenset({"completed", "incomplete", "requires_continuation"})
_FAILED_ERROR: dict[str, str] = {"code": "internal", "message": "the simulated model run failed"}

WEBHOOK_CONFIG_NEEDS_BACKGROUND = "webhook_config is only supported for background interactions; set background to true."
"""The 400 a create with ``webhook_config`` and without ``background: true`` gets. The documentation states the rule
(webhook_config needs background=true), not the exact sentence: this wording is the simulator's."""

STORE_FALSE_WITH_BACKGROUND = "background=true requires store=true; an interaction that is not stored cannot run in the background."
"""The 400 a create with ``background: true`` and ``store: false`` gets (rule documented, sentence the simulator's)."""

_INTERACTION_PATH = re.compile(
    r"^/(?P<version>v\d+(?:alpha|beta)?\d*)/interactions(?:/(?P<id>[^/:]+)(?P<cancel>/cancel|:cancel)?)?/?$"
)

V1_UNDOCUMENTED_CREATE_FIELDS: frozenset[str] = frozenset({"webhook_config"})
"""Create fields only the v1beta reference lists: a v1 create carrying one is refused (400 parameter_unknown)."""

DEFAULT_RETENTION_SECONDS = 86_400.0
"""How long an interaction is kept by default: one day, the free tier's documented retention (paid: 55 days)."""


@dataclass
class _Interaction:
    id: str
    model: str | None
    agent: str | None
    input: Any
    labels: dict[str, str]
    idem: str | None
    attempt: int
    background: bool
    created_mono: float
    complete_at: float
    created: str
    system_instruction: Any = None
    forced_status: str | None = None
    updated: str = ""
    end_status: str = "completed"
    end_text: str | None = None  # None: the default reply (or, for incomplete, its first half)
    user_metadata: dict[str, Any] = field(default_factory=dict)  # webhook_config.user_metadata
    webhook_uris: list[str] = field(default_factory=list)  # webhook_config.uris (stored, unused)
    webhook_config: dict[str, Any] | None = None  # the create's webhook_config, echoed by replies
    webhook_status: str | None = None  # the last status a webhook event was generated for
    cancel_at: float | None = None  # a cancel was accepted: the interaction is cancelled at this monotonic time

    def status(self, now: float) -> str:
        if self.forced_status is not None:
            return self.forced_status
        if self.cancel_at is not None:
            return "cancelled" if now >= self.cancel_at else "in_progress"
        return self.end_status if now >= self.complete_at else "in_progress"

    def error_code_message(self) -> tuple[str, str]:
        """(error_code, error_message) of a failed interaction, as its delivery carries them."""
        return _FAILED_ERROR["code"], _FAILED_ERROR["message"]

    def usage(self, status: str) -> dict[str, int]:
        """Token counts, deterministic from the input and the answer (whitespace-separated words)."""
        given = len(_input_text(self.input).split())
        produced = len(self._text_for(status).split()) if status in _ANSWERED else 0
        return {"total_input_tokens": given, "total_output_tokens": produced, "total_tokens": given + produced}

    def reply_text(self) -> str:
        return f"simulated reply to: {_input_text(self.input)}"

    def _text_for(self, status: str) -> str:
        if self.end_text is not None:
            return self.end_text
        full = self.reply_text()
        return full[: max(1, len(full) // 2)] if status in ("incomplete", "requires_continuation") else full

    def to_json(
        self, now: float, *, labels: bool = True, webhook_config: bool = True, user_input: bool = False,
        as_created: bool = False,
    ) -> dict[str, Any]:
        """The interaction as the Interactions API answers it (``object: "interaction"``, ``usage``, the answer
        in ``steps``). ``labels`` / ``webhook_config``: echo them (when the create gave them); ``user_input``:
        the steps start with the caller's input, as a GET answers; ``as_created``: the reply to a background
        create, ``in_progress`` with no steps or usage yet (as documented)."""
        status = self.status(now)
        body: dict[str, Any] = {
            "id": self.id,
            "object": "interaction",
            "status": status,
            "created": self.created,
            "updated": self.updated or self.created,
        }
        if labels:
            body["labels"] = dict(self.labels)
        if self.model is not None:
            body["model"] = self.model
        if self.agent is not None:
            body["agent"] = self.agent
        if webhook_config and self.webhook_config is not None:
            body["webhook_config"] = json.loads(json.dumps(self.webhook_config))
        if as_created:
            body["status"] = "in_progress"
            return body
        steps: list[dict[str, Any]] = []
        if user_input:
            steps.append({"type": "user_input", "content": [{"type": "text", "text": _input_text(self.input)}]})
        if status in _ANSWERED:
            text = self._text_for(status)
            content = [{"type": "text", "text": text}] if text else []
            steps.append({"type": "model_output", "content": content})
        elif status == "requires_action":
            steps.append(
                {
                    "type": "function_call",
                    "id": f"call_{self.id[-12:]}",
                    "name": "lookup",
                    "arguments": {"query": _input_text(self.input)},
                }
            )
        elif status == "failed":
            body["errors"] = [dict(_FAILED_ERROR)]
        if steps:
            body["steps"] = steps
        body["usage"] = self.usage(status)
        if status == "requires_continuation":
            body["continuation_token"] = f"ct_{self.id[-16:]}"
        return body

    def debug_json(self, now: float) -> dict[str, Any]:
        body = self.to_json(now)
        body.update(
            idem=self.idem,
            attempt=self.attempt,
            input=self.input,
            background=self.background,
            user_metadata=self.user_metadata,
        )
        return body

    def console_json(self, now: float) -> dict[str, Any]:
        """What the remote console lists: id, status, created, labels, model."""
        return {
            "id": self.id,
            "status": self.status(now),
            "created": self.created,
            "labels": dict(self.labels),
            "model": self.model,
        }


def _input_text(value: Any) -> str:
    """Flatten an Interactions ``input`` into plain text, deterministically."""
    if isinstance(value, str):
        return value
    texts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            texts.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            if isinstance(node.get("text"), str):
                texts.append(node["text"])
            elif "content" in node:
                walk(node["content"])

    walk(value)
    if texts:
        return " ".join(texts)
    return json.dumps(value, sort_keys=True)


def _new_interaction_id() -> str:
    """A long opaque id shaped like Gemini's (``v1_`` and url-safe base64), unique per process."""
    return "v1_" + secrets.token_urlsafe(48)


def _model_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return value.removeprefix("models/")


def check_retention(value: Any) -> float | None:
    """``retention_seconds`` if valid (None: kept for good; else a number > 0); ValueError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError("retention_seconds must be a number of seconds > 0 (or null: kept for good)")
    return float(value)


def check_cancel_delay(value: Any) -> float:
    """``cancel_delay`` if valid (a number >= 0); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError("cancel_delay must be a number of seconds >= 0")
    return float(value)


def _webhook_config_error(value: Any) -> str | None:
    """Why a create's ``webhook_config`` is malformed, or None."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "webhook_config must be an object"
    if "user_metadata" in value and not isinstance(value["user_metadata"], dict):
        return "webhook_config.user_metadata must be an object"
    uris = value.get("uris")
    if uris is not None and not (isinstance(uris, list) and all(isinstance(u, str) for u in uris)):
        return "webhook_config.uris must be a list of strings"
    return None


class GeminiMixin(WebhooksMixin, FaultsMixin):
    """The Interactions API handlers and the interactions' state changes."""

    api_key: str | None
    unknown_models: set[str]
    echo_labels: bool
    echo_webhook_config: bool
    retention_seconds: float | None
    cancel_delay: float
    _create_fields: collections.Counter[str]
    _interaction_seq: int
    _id_rng: random.Random | None

    def _init_gemini(
        self, api_key: str | None, unknown_models: Sequence[str], *, echo_labels: bool = True,
        echo_webhook_config: bool = True, retention_seconds: float | None = None, cancel_delay: float = 0.0,
    ) -> None:
        self.api_key = api_key
        self.unknown_models = {m.removeprefix("models/") for m in unknown_models}
        self.echo_labels = bool(echo_labels)
        self.echo_webhook_config = bool(echo_webhook_config)
        self.retention_seconds = check_retention(retention_seconds)
        self.cancel_delay = check_cancel_delay(cancel_delay)
        self._create_fields = collections.Counter()
        self._interaction_seq = 0
        self._id_rng = None

    def _reply_locked(
        self, rec: _Interaction, now: float, *, user_input: bool, as_created: bool = False
    ) -> dict[str, Any]:
        """``rec`` as a reply, with the echo switches applied."""
        return rec.to_json(now, labels=self.echo_labels, webhook_config=self.echo_webhook_config,
                           user_input=user_input, as_created=as_created)

    def _expired_locked(self, rec: _Interaction, now: float) -> bool:
        """True once ``rec`` is older than ``retention_seconds``: the API answers 404 for it."""
        return self.retention_seconds is not None and now - rec.created_mono >= self.retention_seconds

    def seed_interaction_ids(self, seed: int) -> None:
        """Draw the following interaction ids from `seed` (same shape, same sequence on every run), for pictures
        that must not change between runs; by default ids are random."""
        with self._lock:
            self._id_rng = random.Random(seed)

    def _next_interaction_id_locked(self) -> str:
        if self._id_rng is None:
            return _new_interaction_id()
        return "v1_" + base64.urlsafe_b64encode(self._id_rng.randbytes(48)).decode().rstrip("=")

    def force_status(self, interaction_id: str, status: str, *, allow_unknown: bool = False) -> None:
        """Pin an interaction's status (e.g. "failed"); KeyError if the interaction is unknown.

        Any documented status (``INTERACTION_STATUSES``); ``allow_unknown=True`` also takes a
        status the API does not document (e.g. "expired"), to play a remote that answers one.
        A webhook status (completed, failed, cancelled, requires_action) sends its event.
        """
        if not status or (status not in INTERACTION_STATUSES and not allow_unknown):
            raise ValueError(f"status must be one of {INTERACTION_STATUSES}")
        with self._lock:
            rec = self._interactions[interaction_id]
            rec.forced_status = status
            rec.updated = _now_iso()
            self._emit_locked(rec, time.monotonic())

    def _cancel_locked(self, rec: _Interaction, now: float) -> None:
        """Accept a cancel: ``cancelled`` now, or after ``cancel_delay`` (reads in between say ``in_progress``)."""
        rec.updated = _now_iso()
        if self.cancel_delay <= 0:
            rec.forced_status = "cancelled"
            self._emit_locked(rec, now)
            return
        rec.cancel_at = now + self.cancel_delay
        self._watch_locked(rec, rec.cancel_at)

    # -- request handling ------------------------------------------------------
    def _check_key(self, h: _Handler, query: Mapping[str, list[str]]) -> bool:
        """Answer as Google does when the API key is missing or wrong; True if the key is good."""
        want = self.api_key
        if want is None:
            return True
        keys = query.get("key") or []
        got = h.headers.get("x-goog-api-key") or (keys[-1] if keys else None)
        if not got:
            h.send_error_json(
                401,
                "Method doesn't allow unregistered callers (callers without established identity). "
                "Please use API Key or other form of API consumer identity to call this API.",
                status="UNAUTHENTICATED", reason="CREDENTIALS_MISSING", shape=self.error_shape,
                word="authentication",
            )
            return False
        if got != want:  # the error page: 401 authentication; Google's front end: 400 API_KEY_INVALID
            h.send_error_json(
                400 if self.error_shape == "google" else 401, "API key not valid. Please pass a valid API key.",
                status="INVALID_ARGUMENT", reason="API_KEY_INVALID", shape=self.error_shape, word="authentication",
            )
            return False
        return True

    def _interactions_route(self, h: _Handler, verb: str, path: str, query: dict[str, list[str]], raw: bytes) -> bool:
        """Serve ``/v1*/interactions[/ID[:cancel]]``; False if ``path`` is not one of them."""
        m = _INTERACTION_PATH.match(path)
        if not m:
            return False
        iid, cancel = m.group("id"), m.group("cancel")
        if iid is None and verb == "POST":
            self._create(h, raw, query, m.group("version"))
        elif iid is not None and cancel and verb == "POST":
            self._on_interaction(h, "cancel", iid, query)
        elif iid is not None and not cancel and verb == "GET":
            if query.get("stream", ["false"])[-1].lower() == "true":
                h.send_error_json(400, "the simulator does not support streaming", shape=self.error_shape)
                return True
            self._on_interaction(h, "get", iid, query)
        elif iid is not None and not cancel and verb == "DELETE":
            self._on_interaction(h, "delete", iid, query)
        else:
            h.send_error_json(405, f"{verb} not supported on {path}", shape=self.error_shape)
        return True

    def _new_interaction_locked(
        self, body: dict[str, Any], idem: str | None, attempt: int, completed: bool
    ) -> _Interaction:
        self._interaction_seq += 1
        now = time.monotonic()
        created = _now_iso()
        labels = body.get("labels") if isinstance(body.get("labels"), dict) else {}
        hook_value = body.get("webhook_config")
        hook: dict[str, Any] = hook_value if isinstance(hook_value, dict) else {}
        meta = hook.get("user_metadata") if isinstance(hook.get("user_metadata"), dict) else {}
        uris = hook.get("uris") if isinstance(hook.get("uris"), list) else []
        rec = _Interaction(
            id=self._next_interaction_id_locked(),
            model=body.get("model") if isinstance(body.get("model"), str) else None,
            agent=body.get("agent") if isinstance(body.get("agent"), str) else None,
            input=body.get("input"),
            labels={str(k): str(v) for k, v in cast(dict[str, Any], labels).items()},
            idem=idem,
            attempt=attempt,
            background=bool(body.get("background", False)),
            created_mono=now,
            complete_at=now if completed else now + self.complete_after,
            created=created,
            system_instruction=body.get("system_instruction"),
            updated=created,
            user_metadata=dict(cast(dict[str, Any], meta)),
            webhook_uris=[str(u) for u in cast(list[Any], uris)],
            webhook_config=json.loads(json.dumps(hook_value)) if isinstance(hook_value, dict) else None,
        )
        self._interactions[rec.id] = rec
        self._watch_locked(rec)
        return rec

    def _create(self, h: _Handler, raw: bytes, query: Mapping[str, list[str]], version: str) -> None:
        body: Any
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        idem = None
        if isinstance(body, dict) and isinstance(body.get("labels"), dict):
            value = body["labels"].get("idem")
            idem = str(value) if value is not None else None
        with self._lock:
            attempt = self._count_locked("create", idem)
            if isinstance(body, dict):
                self._create_fields.update(str(k) for k in body)
        if not self._check_key(h, query):
            return  # Google's front end refuses the key before anything else (no fault is used up)
        model = _model_name(body.get("model")) if isinstance(body, dict) else None
        with self._lock:
            fault = self._pick_fault("create", idem)
            unknown_model = model is not None and model in self.unknown_models
        answered, fault = self._front_faults(h, fault, model)
        if answered:
            return
        err = partial(h.send_error_json, shape=self.error_shape)
        if not isinstance(body, dict):
            err(400, "request body must be a JSON object")
            return
        unknown = sorted(V1_UNDOCUMENTED_CREATE_FIELDS & set(body)) if version == "v1" else []
        if unknown:
            err(400, f"Unknown parameter: {unknown[0]}.", word="parameter_unknown", status="INVALID_ARGUMENT")
            return
        if unknown_model:
            err(404, _model_not_found_message(model or ""), status="NOT_FOUND", word="model_not_found")
            return
        if not isinstance(body.get("model"), str) and not isinstance(
            body.get("agent"), str
        ):
            err(400, "model (or agent) is required")
            return
        if "input" not in body:
            err(400, "input is required")
            return
        if body.get("stream") is True:
            err(400, "the simulator does not support streaming")
            return
        problem = _webhook_config_error(body.get("webhook_config"))
        if problem is not None:
            err(400, problem)
            return
        background = body.get("background") is True
        if body.get("webhook_config") is not None and not background:
            h.send_error_json(400, WEBHOOK_CONFIG_NEEDS_BACKGROUND, shape="interactions")
            return
        if background and body.get("store") is False:
            h.send_error_json(400, STORE_FALSE_WITH_BACKGROUND, shape="interactions")
            return
        completed = fault is not None and fault.kind == "complete_lose_reply"
        with self._lock:
            rec = self._new_interaction_locked(body, idem, max(attempt, 1), completed)
            if fault is not None and fault.kind == "end_status" and fault.end_status:
                rec.end_status = fault.end_status
                rec.end_text = fault.text
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if completed:
            raise _Close
        if not rec.background:
            # A foreground create returns once the interaction is done.
            while True:
                with self._lock:
                    remaining = rec.complete_at - time.monotonic()
                    done = rec.forced_status is not None or remaining <= 0
                if done:
                    break
                if self._wait(min(remaining, 0.05)):
                    raise _Close
        with self._lock:
            reply = self._reply_locked(rec, time.monotonic(), user_input=False, as_created=rec.background)
        if fault is not None and fault.kind == "reply_id":
            reply["id"] = fault.text
        h.send_json(200, reply)

    def _on_interaction(self, h: _Handler, method: str, iid: str, query: Mapping[str, list[str]]) -> None:
        with self._lock:
            rec = self._interactions.get(iid)
            idem = rec.idem if rec is not None else None
            self._count_locked(method, idem)
        if not self._check_key(h, query):
            return
        with self._lock:
            fault = self._pick_fault(method, idem)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        with self._lock:
            now = time.monotonic()
            rec = self._interactions.get(iid)
            if rec is None or self._expired_locked(rec, now):
                reply: tuple[int, Any] | None = None
            else:
                if (method == "cancel" and rec.cancel_at is None
                        and rec.status(now) in ("in_progress", "queued", "idle", "requires_action")):
                    self._cancel_locked(rec, now)
                if method == "delete":
                    del self._interactions[iid]
                    reply = (200, {})
                else:
                    reply = (200, self._reply_locked(rec, now, user_input=method == "get"))
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if fault is not None and fault.kind == "complete_lose_reply":
            raise _Close
        if reply is None:
            h.send_error_json(404, f"interaction {iid} not found", shape=self.error_shape)
        else:
            h.send_json(*reply)
