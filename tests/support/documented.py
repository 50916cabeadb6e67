"""The documented examples kept in `tests/documented/` (one JSON file each, its page in `_source`), read the
same way by the simulator's tests and the receiver's: `example` drops the `_` keys, `shape` reduces a JSON value
to its keys, nesting and value types (maps whose keys are the caller's reduced to their value types)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DOCUMENTED = Path(__file__).parents[1] / "documented"
FREE_MAPS = frozenset({"labels", "user_metadata", "metadata"})  # maps whose keys are the caller's, not the API's


def raw_example(name: str) -> dict[str, Any]:
    """A documented example as kept, `_` keys included."""
    doc: dict[str, Any] = json.loads((DOCUMENTED / name).read_text(encoding="utf-8"))
    return doc


def example(name: str) -> dict[str, Any]:
    """A documented example without its `_` keys (source, HTTP status, notes)."""
    return {k: v for k, v in raw_example(name).items() if not k.startswith("_")}


def example_status(name: str) -> int:
    """The HTTP status a documented error example is answered with."""
    return int(raw_example(name)["_http_status"])


def interaction_events() -> dict[str, str]:
    """The event catalogue's interaction rows: event type -> the status it reports."""
    return {row["event"]: row["status"] for row in example("webhook_events.json")["interaction_events"]}


def shape(value: Any, key: str = "") -> Any:
    """Keys, nesting and value types of a JSON value (caller-chosen maps reduced to their value types)."""
    if isinstance(value, dict):
        if key in FREE_MAPS:
            return ("map", sorted({type(v).__name__ for v in value.values()}))
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__
