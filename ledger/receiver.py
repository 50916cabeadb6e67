"""The webhook receiver: verified deliveries from the remote become evidence; nothing else gets in.

Gemini's static project webhook signs each delivery the Standard Webhooks way (`webhook-id`,
`webhook-timestamp`, `webhook-signature`, HMAC-SHA256 under a `whsec_` secret); the `standardwebhooks`
package verifies it, including the 5-minute timestamp window. A delivery that is unsigned, wrongly
signed, stale, malformed, or an exact replay of one already taken gets a 4xx and changes nothing but a
refusal counter. A verified delivery is recorded once per webhook id (a redelivery with a fresh
signature is answered 200 and changes nothing), as evidence and as an event on the job it names.
The receiver makes no remote call: the next worker pass acts on the evidence.

Delivery body: `{"type": "interaction.completed" | ...failed | ...cancelled | ...requires_action,
"data": {"id": <interaction id>, "status": ..., "user_metadata": {"idem": <key>, "attempt": "<N>"}}}`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook

from ledger import evidence
from ledger.clock import Clock
from ledger.config import Config
from ledger.db import connect, write_tx
from ledger.errors import ConfigError
from ledger.model import Job
from ledger.redaction import Redactor
from ledger.transitions import apply

MAX_BODY = 256 * 1024
_STATE_OF = {
    "interaction.completed": "completed",
    "interaction.failed": "failed",
    "interaction.cancelled": "failed",
    "interaction.requires_action": "running",
}


@dataclass(frozen=True)
class Answer:
    """The HTTP answer to one delivery."""

    status: int
    message: str


def secrets(config: Config) -> dict[str, str]:
    """The signing secret of every remote that names `webhook_secret_env`, by remote name.

    Raises ConfigError naming the variable when one is not set.
    """
    out: dict[str, str] = {}
    for name, rc in config.remotes.items():
        if rc.webhook_secret_env:
            value = os.environ.get(rc.webhook_secret_env)
            if not value:
                raise ConfigError(
                    f"remote {name}: environment variable {rc.webhook_secret_env} (the webhook signing secret) is not set"
                )
            out[name] = value
    return out


def _verify(secret_by_remote: Mapping[str, str], body: bytes, headers: Mapping[str, str]) -> tuple[str, Any] | None:
    for remote, secret in secret_by_remote.items():
        try:
            return remote, Webhook(secret).verify(body, dict(headers))
        except Exception:  # wrong signature, stale or missing headers, malformed values: not this secret
            continue
    return None


def _refuse(conn: sqlite3.Connection, reason: str, status: int, message: str) -> Answer:
    with write_tx(conn):
        evidence.count_refusal(conn, reason)
    return Answer(status, message)


def receive(
    conn: sqlite3.Connection, config: Config, secret_by_remote: Mapping[str, str], body: bytes,
    headers: Mapping[str, str], *, clock: Clock,
) -> Answer:
    """Verify one delivery and record it; the Answer says what the sender is told.

    What is recorded has every secret the config names replaced by `[redacted:NAME]`.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    if not all(lower.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature")):
        return _refuse(conn, "unsigned", 401, "missing webhook-id, webhook-timestamp or webhook-signature")
    verified = _verify(secret_by_remote, body, lower)
    if verified is None:
        return _refuse(conn, "bad_signature_or_stale", 401, "signature does not verify (or timestamp outside 5 min)")
    remote, doc = verified
    # The delivery is verified; now take out any secret the config names before a byte of it is stored.
    redactor = Redactor.from_config(config)
    doc, lower = redactor.redact_value(doc), redactor.redact_value(lower)
    data = doc.get("data") if isinstance(doc, dict) else None
    kind = doc.get("type") if isinstance(doc, dict) else None
    meta = data.get("user_metadata") if isinstance(data, dict) else None
    if not isinstance(data, dict) or kind not in _STATE_OF or not isinstance(data.get("id"), str):
        return _refuse(conn, "malformed", 400, "not an interaction event with an id")
    idem = meta.get("idem") if isinstance(meta, dict) else None
    if "\x00" in data["id"] or (isinstance(idem, str) and "\x00" in idem):  # no ledger can store it (PostgreSQL)
        return _refuse(conn, "malformed", 400, "an id holding a NUL character")
    attempt_raw = meta.get("attempt") if isinstance(meta, dict) else None
    attempt = int(attempt_raw) if isinstance(attempt_raw, str) and attempt_raw.isdigit() else None
    webhook_id, signature = lower["webhook-id"], lower["webhook-signature"]
    now = clock.now()
    with write_tx(conn):
        seen = conn.execute(
            "SELECT signature FROM webhook_deliveries WHERE webhook_id = ?", (webhook_id,)
        ).fetchone()
        if seen is not None:
            if seen[0] == signature:
                evidence.count_refusal(conn, "replayed")
                return Answer(409, "replayed: this exact delivery was already taken")
            evidence.count_refusal(conn, "redelivered")
            return Answer(200, "already received")
        row = conn.execute("SELECT * FROM jobs WHERE idem_key = ?", (idem,)).fetchone() if idem else None
        job = Job.from_row(row) if row is not None else None
        ev_id = evidence.record(
            conn, at=now, source="webhook", idem_key=idem or "", attempt=attempt, handle=data["id"],
            remote_state=_STATE_OF[kind], job=job.key if job else None, ref=webhook_id,
            detail={"type": kind, "status": data.get("status"), "remote": remote,
                    "timestamp": lower["webhook-timestamp"]},
        )
        conn.execute(
            "INSERT INTO webhook_deliveries (webhook_id, received_at, signature, type, evidence_id) "
            "VALUES (?, ?, ?, ?, ?)",
            (webhook_id, now, signature, kind, ev_id),
        )
        if job is not None:
            apply(conn, job.key, "evidence", actor="reclaim-receiver", now=now, expected_state=job.state,
                  detail={"source": "webhook", "webhook_id": webhook_id, "type": kind, "handle": data["id"],
                          "attempt": attempt, "evidence_id": ev_id})
    return Answer(202, "recorded")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the ledger records what matters."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer(Answer(413, "body too large"))
            return
        body = self.rfile.read(length) if length > 0 else b""
        srv = self.server
        with srv.lock:
            try:
                answer = receive(srv.conn, srv.config, srv.secrets, body, dict(self.headers.items()), clock=srv.clock)
            except Exception as e:  # the ledger is locked or gone: the sender retries later
                answer = Answer(503, f"{type(e).__name__}: {e}"[:200])
        self._answer(answer)

    def do_GET(self) -> None:
        self._answer(Answer(405, "POST webhook deliveries here"))

    def _answer(self, answer: Answer) -> None:
        data = json.dumps({"status": answer.status, "message": answer.message}).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    conn: sqlite3.Connection
    config: Config
    secrets: Mapping[str, str]
    clock: Clock
    lock: threading.Lock


def make_server(ledger: str | Path, config: Config, *, clock: Clock, host: str = "127.0.0.1",
                port: int = 0) -> _Server:
    """A bound receiver (not yet serving): `server.serve_forever()`; `server.server_address` has the port.

    Raises ConfigError when no remote names a webhook secret, or its variable is not set.
    """
    found = secrets(config)
    if not found:
        raise ConfigError("no remote names webhook_secret_env: set it on the gemini remote to receive webhooks")
    server = _Server((host, port), _Handler)
    server.conn = connect(ledger, check_same_thread=False)
    server.config = config
    server.secrets = found
    server.clock = clock
    server.lock = threading.Lock()
    return server
