"""Webhook deliveries in the envelope Gemini documents, signed the Standard Webhooks way, for tests.

The envelope is `{"type", "version", "timestamp", "data": {"id"}}`; `interaction.failed` adds
`data.error_code` and `data.error_message`. Nothing in it names reclaim's job: no `user_metadata`.
"""

from __future__ import annotations

import http.client
import json
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from standardwebhooks.webhooks import Webhook


def envelope(interaction_id: str, kind: str = "interaction.completed", **data: Any) -> dict[str, Any]:
    """The documented delivery body for `interaction_id`; `data` adds fields to `data` (e.g. error_code)."""
    if kind == "interaction.failed":
        data.setdefault("error_code", "INTERNAL")
        data.setdefault("error_message", "The interaction failed.")
    return {"type": kind, "version": "v1", "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "data": {"id": interaction_id, **data}}


def signed(doc: dict[str, Any] | bytes, secret: str | list[str], *, msg_id: str | None = None,
           at: datetime | None = None) -> tuple[bytes, dict[str, str]]:
    """The body bytes and Standard Webhooks headers; several secrets give several space-separated signatures
    (as during secret rotation)."""
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    msg = msg_id or f"msg_{uuid.uuid4().hex}"
    when = at or datetime.now(UTC)
    secrets = [secret] if isinstance(secret, str) else secret
    signature = " ".join(Webhook(s).sign(msg, when, body.decode()) for s in secrets)
    return body, {"webhook-id": msg, "webhook-timestamp": str(int(when.timestamp())), "webhook-signature": signature}


def delivery(interaction_id: str, secret: str | list[str], kind: str = "interaction.completed", *,
             msg_id: str | None = None, at: datetime | None = None, **data: Any) -> tuple[bytes, dict[str, str]]:
    """A signed documented delivery: (body, headers)."""
    return signed(envelope(interaction_id, kind, **data), secret, msg_id=msg_id, at=at)


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    """POST raw bytes to the receiver at `url`; (status, JSON answer). Headers go exactly as given."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        conn.putrequest("POST", parts.path or "/", skip_accept_encoding=True)
        if not any(k.lower() in ("content-length", "transfer-encoding") for k in headers):
            conn.putheader("Content-Length", str(len(body)))
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        conn.send(body)
        reply = conn.getresponse()
        text = reply.read()
        return reply.status, json.loads(text) if text else {}
    finally:
        conn.close()
