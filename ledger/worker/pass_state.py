"""What one worker pass carries: its report (`TickReport`), the remotes it built (`RemoteCache`), the progress
callback's type, and the worker's id."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.config import Config
from ledger.remotes import remote_for
from ledger.remotes.base import Remote

Progress = Callable[[str, int, int], None]


def worker_id() -> str:
    """A name for this worker process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class TickReport:
    """What one pass did, by step."""

    sent: int = 0
    accepted: int = 0
    not_delivered: int = 0
    invalid: int = 0
    held: int = 0
    polled: int = 0
    completed: int = 0
    failed: int = 0
    delivered: int = 0
    orphans_found: int = 0
    orphans_held: int = 0
    fenced: int = 0
    abandoned: int = 0
    remote_refused: int = 0
    journal_replayed: int = 0
    journal_kept: int = 0
    evidence_polled: int = 0
    evidence_attributed: int = 0
    foreign: int = 0  # deliveries of another application's interactions, registered foreign (ledger.foreign)
    duplicates_cancelled: int = 0
    reconciled_by_evidence: int = 0
    duplicates: int = 0
    notifications: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the counters."""
        return dict(self.__dict__)


class RemoteCache:
    """One adapter per operation, built on first use."""

    def __init__(self, config: Config, factory: Callable[[Config, str], Remote] = remote_for) -> None:
        self.config = config
        self.factory = factory
        self._by_remote: dict[str, Remote] = {}
        self._lock = threading.Lock()

    def for_operation(self, operation: str) -> Remote:
        """The adapter for `operation`'s remote."""
        name = self.config.operations[operation].remote
        with self._lock:
            if name not in self._by_remote:
                self._by_remote[name] = self.factory(self.config, operation)
            return self._by_remote[name]

    def for_remote(self, name: str) -> Remote | None:
        """The adapter for the remote called `name`, or None when no declared operation uses it."""
        operation = next((op for op, oc in self.config.operations.items() if oc.remote == name), None)
        return self.for_operation(operation) if operation is not None else None
