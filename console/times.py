"""Times as the job screen shows them: to the second, with the zone, and how long ago (or how soon).

`readable_detail` turns the epoch floats an event's detail carries (`lease_until`, `due_at`, …) into such times,
so an operator never has to decode 1796115600.0 by hand.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from ledger import INVALID, span, valid_time

TIME_KEYS = ("at", "until", "due", "deadline", "time", "since", "expires")
"""A detail key naming a time: one of these, or ending in _<one of these> (lease_until, due_at, held_at)."""


def full_time(ts: float | None, tz: str = "UTC") -> str:
    """'2026-12-03 09:00:05Z' (UTC) or '2026-12-03 10:00:05 CET'; '' for None, 'invalid' for a non-time."""
    if ts is None:
        return ""
    if not valid_time(ts):
        return INVALID
    dt = datetime.fromtimestamp(ts, ZoneInfo(tz))
    stamp = dt.strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp}Z" if tz in ("UTC", "Etc/UTC", "Z") else f"{stamp} {dt.strftime('%Z')}"


def precise_age(seconds: float) -> str:
    """'45s', '3m 12s', '4h 10m 05s', '2d 04h 10m'; 'invalid' for a span that is not finite."""
    return span(seconds, parts=3, finest="s")


def when(ts: float, now: float, tz: str = "UTC") -> str:
    """'2026-12-03 09:00:05Z · 3m 12s ago' (or '· in 4h 00m 00s'); 'invalid' for a non-time."""
    if not valid_time(ts):
        return INVALID
    rel = f"{precise_age(now - ts)} ago" if ts <= now else f"in {precise_age(ts - now)}"
    return f"{full_time(ts, tz)} · {rel}"


def is_time_key(key: str) -> bool:
    """True for a detail key that names a time (lease_until, due_at, at)."""
    low = key.lower()
    return any(low == k or low.endswith(f"_{k}") for k in TIME_KEYS)


def readable_detail(value: Any, tz: str = "UTC") -> Any:
    """`value` (an event detail) with every epoch number under a time key shown as a time; the rest unchanged."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if (isinstance(k, str) and is_time_key(k) and isinstance(v, (int, float)) and not isinstance(v, bool)
                    and valid_time(v)):
                out[k] = full_time(v, tz)
            else:
                out[k] = readable_detail(v, tz)
        return out
    if isinstance(value, list):
        return [readable_detail(v, tz) for v in value]
    return value
