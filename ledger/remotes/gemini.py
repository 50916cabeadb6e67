"""Gemini background interactions through the google-genai SDK, with create retries off."""

from __future__ import annotations

import os
from typing import Any

from google import genai
from google.genai import types

from ledger.config import RemoteConfig
from ledger.remotes.base import (
    Capabilities,
    RemoteStatus,
    SendOutcome,
    exception_chain,
    is_not_delivered,
    status_outcome,
)

_RUNNING = {"in_progress", "requires_action", "pending", "running", "queued"}
_FAILED = {"failed", "cancelled", "expired", "incomplete"}


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


class GeminiRemote:
    """Adapter for `kind = "gemini"`: one POST per send; GET by handle; no search by label."""

    kind = "gemini"
    capabilities = Capabilities(lookup_by_handle=True, search_by_key=False, dedupes_by_key=False)

    def __init__(self, rc: RemoteConfig) -> None:
        self.name = rc.name
        self.model = rc.model
        key = os.environ.get(rc.api_key_env) or ("simulator" if rc.base_url else None)
        if key is None:
            from ledger.errors import ConfigError

            raise ConfigError(f"remote {rc.name}: environment variable {rc.api_key_env} is not set (the API key)")
        timeout_ms = int(rc.timeout_seconds * 1000)
        # attempts=1: the SDK would otherwise POST a create up to five times on a 5xx.
        self._create_client = genai.Client(
            api_key=key,
            http_options=types.HttpOptions(
                base_url=rc.base_url, timeout=timeout_ms, retry_options=types.HttpRetryOptions(attempts=1)
            ),
        )
        self._read_client = genai.Client(
            api_key=key,
            http_options=types.HttpOptions(
                base_url=rc.base_url, timeout=timeout_ms, retry_options=types.HttpRetryOptions(attempts=3)
            ),
        )

    def send(self, payload: dict[str, Any], idem_key: str, attempt: int) -> SendOutcome:
        """POST one interactions.create(background=True) labelled with the idem key; classify the result."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": payload["input"],
            "background": True,
            "labels": {"idem": idem_key, "attempt": str(attempt)},
        }
        if "system_instruction" in payload:
            kwargs["system_instruction"] = payload["system_instruction"]
        if "generation_config" in payload:
            kwargs["generation_config"] = payload["generation_config"]
        try:
            interaction = self._create_client.interactions.create(**kwargs)
        except Exception as exc:
            return classify(exc)
        handle = getattr(interaction, "id", None)
        if not handle:
            return SendOutcome("unknown", error="accepted without an id in the reply", reason="no handle in reply")
        return SendOutcome("accepted", handle=str(handle))

    def lookup(self, handle: str) -> RemoteStatus:
        """GET the interaction; map its status to running / completed / failed / not_found / error."""
        try:
            interaction = self._read_client.interactions.get(id=handle)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status == 404:
                return RemoteStatus("not_found", snapshot={"status_code": 404}, error=_message(exc), handle=handle)
            return RemoteStatus("error", snapshot={"error": _message(exc)}, error=_message(exc), handle=handle)
        snap = interaction.model_dump(mode="json", exclude_none=True)
        status = str(snap.get("status", ""))
        if status == "completed":
            text = _output_text(snap)
            return RemoteStatus("completed", result={"text": text, "interaction": snap}, snapshot=snap, handle=handle)
        if status in _FAILED:
            return RemoteStatus("failed", snapshot=snap, error=f"remote status {status}", handle=handle)
        return RemoteStatus("running", snapshot=snap, handle=handle)

    def search(self, idem_key: str) -> RemoteStatus:
        """Gemini Interactions has no list or search: always an error saying so."""
        return RemoteStatus("error", error="Gemini interactions cannot be searched by label")

    def cancel(self, handle: str) -> RemoteStatus:
        """Ask the remote to cancel a running interaction."""
        try:
            interaction = self._read_client.interactions.cancel(id=handle)
        except Exception as exc:
            return RemoteStatus("error", error=_message(exc), handle=handle)
        return RemoteStatus("running", snapshot=interaction.model_dump(mode="json", exclude_none=True), handle=handle)


def _output_text(snap: dict[str, Any]) -> str:
    parts = []
    for out in snap.get("outputs") or []:
        if isinstance(out, dict) and isinstance(out.get("text"), str):
            parts.append(out["text"])
    if not parts and isinstance(snap.get("output_text"), str):
        parts.append(snap["output_text"])
    return "".join(parts)


def classify(exc: BaseException) -> SendOutcome:
    """Turn an SDK exception from a create into not_delivered / invalid / unknown, per the design."""
    if is_not_delivered(exc):
        return SendOutcome("not_delivered", error=_message(exc))
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status_outcome(status, str(exc)[:300])
    names = {type(e).__name__ for e in exception_chain(exc)}
    if names & {"APITimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"}:
        reason = "timeout"
    elif names & {"RemoteProtocolError", "ReadError", "WriteError", "ConnectionResetError"}:
        reason = "connection reset after the request was sent"
    else:
        reason = "unexpected error"
    return SendOutcome("unknown", error=_message(exc), reason=reason)
