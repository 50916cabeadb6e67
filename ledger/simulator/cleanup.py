"""The storage clean-up API: ``POST /cleanup`` (``Idempotency-Key``), ``GET /cleanup/ID``, ``GET /cleanup?key=K``.

A job selects ``cleanup_selected`` objects and deletes them over ``cleanup_seconds``; with
``dedupes_by_key`` a create carrying a key already seen answers the existing job (200) instead of
starting another (202).
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.simulator.base import _Close, _now_iso
from ledger.simulator.faults import FaultsMixin

if TYPE_CHECKING:
    from ledger.simulator.server import _Handler

DEFAULT_CLEANUP_SELECTED = 100
"""Number of objects every simulated clean-up job selects (deterministic)."""

_CLEANUP_PATH = re.compile(r"^/cleanup(?:/(?P<id>[^/]+))?/?$")


@dataclass
class _CleanupJob:
    id: str
    key: str | None
    payload: Any
    attempt: int
    created_mono: float
    duration: float
    selected: int
    created: str
    forced_complete: bool = False

    def progress(self, now: float) -> tuple[str, int]:
        if self.forced_complete or self.duration <= 0:
            return "completed", self.selected
        fraction = min(1.0, max(0.0, (now - self.created_mono) / self.duration))
        deleted = min(self.selected, math.floor(self.selected * fraction))
        if fraction >= 1.0:
            return "completed", self.selected
        return ("accepted" if deleted == 0 else "running"), deleted

    def to_json(self, now: float) -> dict[str, Any]:
        status, deleted = self.progress(now)
        return {
            "id": self.id,
            "key": self.key,
            "status": status,
            "selected": self.selected,
            "deleted": deleted,
            "created": self.created,
            "attempt": self.attempt,
            "payload": self.payload,
        }


class CleanupMixin(FaultsMixin):
    """The clean-up API handlers."""

    dedupes_by_key: bool
    cleanup_seconds: float
    cleanup_selected: int
    _cleanup_seq: int

    def _init_cleanup(self, dedupes_by_key: bool, cleanup_seconds: float, cleanup_selected: int) -> None:
        self.dedupes_by_key = dedupes_by_key
        self.cleanup_seconds = float(cleanup_seconds)
        self.cleanup_selected = int(cleanup_selected)
        self._cleanup_seq = 0

    def _cleanup_route(self, h: _Handler, verb: str, path: str, query: dict[str, list[str]], raw: bytes) -> bool:
        """Serve ``/cleanup[/ID]``; False if ``path`` is not one of them."""
        m = _CLEANUP_PATH.match(path)
        if not m:
            return False
        jid = m.group("id")
        if jid is None and verb == "POST":
            self._cleanup_create(h, raw)
        elif verb == "GET":
            self._cleanup_get(h, jid, query)
        else:
            h.send_error_json(405, f"{verb} not supported on {path}")
        return True

    def _cleanup_create(self, h: _Handler, raw: bytes) -> None:
        key = h.headers.get("Idempotency-Key") or None
        try:
            payload: Any = json.loads(raw) if raw else {}
        except ValueError:
            payload = None
        with self._lock:
            attempt = self._count_locked("cleanup", key)
            fault = self._pick_fault("cleanup", key)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        if payload is None:
            h.send_error_json(400, "request body must be JSON")
            return
        completed = fault is not None and fault.kind == "complete_lose_reply"
        now = time.monotonic()
        with self._lock:
            existing = (
                self._job_by_key_locked(key) if (key and self.dedupes_by_key) else None
            )
            if existing is not None:
                code, job = 200, existing
                if completed:
                    job.forced_complete = True
            else:
                self._cleanup_seq += 1
                job = _CleanupJob(
                    id=f"cln-{self._cleanup_seq}",
                    key=key,
                    payload=payload,
                    attempt=max(attempt, 1),
                    created_mono=now,
                    duration=self.cleanup_seconds,
                    selected=self.cleanup_selected,
                    created=_now_iso(),
                    forced_complete=completed,
                )
                self._jobs[job.id] = job
                code = 202
            reply = job.to_json(now)
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if completed:
            raise _Close
        h.send_json(code, reply)

    def _job_by_key_locked(self, key: str) -> _CleanupJob | None:
        for job in reversed(list(self._jobs.values())):
            if job.key == key:
                return job
        return None

    def _cleanup_get(
        self, h: _Handler, jid: str | None, query: dict[str, list[str]]
    ) -> None:
        key = query.get("key", [None])[-1]
        with self._lock:
            if jid is not None:
                job = self._jobs.get(jid)
            elif key:
                job = self._job_by_key_locked(key)
            else:
                job = None
            idem = job.key if job is not None else key
            self._count_locked("cleanup_get", idem)
            fault = self._pick_fault("cleanup_get", idem)
        answered, fault = self._front_faults(h, fault)
        if answered:
            return
        with self._lock:
            reply = job.to_json(time.monotonic()) if job is not None else None
        if fault is not None and fault.kind == "accept_then_hang":
            self._hang(h)
        if fault is not None and fault.kind == "complete_lose_reply":
            raise _Close
        if reply is None and not (jid or key):
            h.send_error_json(400, "need a job id (/cleanup/ID) or ?key=K")
        elif reply is None:
            what = f"cleanup job {jid}" if jid else f"cleanup job with key {key!r}"
            h.send_error_json(404, f"{what} not found")
        else:
            h.send_json(200, reply)
