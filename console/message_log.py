"""What the console said, kept for reading back: every feedback line and every toast, newest last (as lazygit's
command log). Bounded, in memory, for this console's life; nothing is written to the ledger."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

LOG_SIZE = 500
"""The most messages kept; older ones drop off."""


@dataclass(frozen=True)
class Said:
    """One message: when (epoch seconds), on which screen, its words, and its kind (info, error, prompt, toast,
    or expired: a line taken back because it was no longer true)."""

    at: float
    where: str
    text: str
    kind: str


class MessageLog:
    """The console's messages, newest last; a repeat of the last message on the same screen is not kept twice."""

    def __init__(self, size: int = LOG_SIZE) -> None:
        self._said: deque[Said] = deque(maxlen=size)

    def add(self, at: float, where: str, text: str, kind: str) -> None:
        """Keep `text` (blank text is not a message)."""
        if not text.strip():
            return
        last = self._said[-1] if self._said else None
        if last is not None and (last.where, last.text, last.kind) == (where, text, kind):
            return
        self._said.append(Said(at, where, text, kind))

    def __iter__(self) -> Iterator[Said]:
        return iter(self._said)

    def __len__(self) -> int:
        return len(self._said)
