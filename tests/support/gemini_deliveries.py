"""Webhook deliveries in the envelope Gemini documents, signed the Standard Webhooks way, for tests.

Each delivery is the documented example for its event (`tests/documented/webhook_interaction_*.json`, the
envelope `{"type", "version", "timestamp", "data": {"id"}}`; `interaction.failed` adds `data.error_code` and
`data.error_message`) with the interaction id and the time filled in. Nothing in it names reclaim's job: no
`user_metadata`.
"""

from __future__ import annotations

import http.client
import json
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from documented import example, interaction_events
from standardwebhooks.webhooks import Webhook


def envelope(interaction_id: str, kind: str = "interaction.completed", **data: Any) -> dict[str, Any]:
    """The documented delivery body of event `kind` for `interaction_id` (an interaction event: its documented
    example; any other type: the guide's envelope); `data` sets fields of `data` (e.g. error_code)."""
    name = f"webhook_{kind.replace('.', '_')}.json"
    doc = example(name) if kind in interaction_events() else {**example("webhook_batch_succeeded.json"), "type": kind}
    doc["timestamp"] = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    doc["data"] = {**doc["data"], "id": interaction_id, **data}
    return doc


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
