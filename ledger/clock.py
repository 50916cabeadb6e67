"""Clocks: the system clock, and a manual one tests and subprocesses can move without sleeping."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as day_time
from typing import Protocol
from zoneinfo import ZoneInfo

from ledger.errors import BadInput


class Clock(Protocol):
    """Anything with `now()` returning seconds since the epoch."""

    def now(self) -> float: ...


class SystemClock:
    """The wall clock, optionally shifted by a fixed offset in seconds."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        """Return the current time in epoch seconds (plus the offset)."""
        return time.time() + self.offset


@dataclass
class ManualClock:
    """A clock that only moves when told to."""

    t: float

    def now(self) -> float:
        """Return the clock's current value."""
        return self.t

    def advance(self, seconds: float) -> None:
        """Move the clock by `seconds` (negative steps back)."""
        self.t += seconds

    def set(self, t: float) -> None:
        """Jump to an absolute time."""
        self.t = t


def parse_time(value: str) -> float:
    """Parse epoch seconds or an ISO-8601 timestamp (naive means UTC) into epoch seconds."""
    try:
        return float(value)
    except ValueError:
        pass
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


_process_clock: Clock = SystemClock()


def process_clock() -> Clock:
    """The clock every command of this process reads: the system clock, unless `use_clock` swapped it.

    No environment variable moves it: only code running in the process (a test harness) can.
    """
    return _process_clock


def use_clock(clock: Clock) -> None:
    """Make `process_clock()` return `clock` from now on (for a harness that embeds the CLI)."""
    global _process_clock
    _process_clock = clock


_last_day: tuple[int, str, str] = (-1, "", "")
"""(whole second, zone, day) of the last day_of() answer: a burst of reservations asks for the same second."""


def day_of(ts: float, tz: str) -> str:
    """The calendar day (YYYY-MM-DD) of `ts` in time zone `tz`: the quota day."""
    global _last_day
    # Zone offsets are whole seconds, so a day starts on a whole second: every instant of one second
    # falls on the same day, and the answer for the second is the answer for `ts`.
    second = math.floor(ts)
    last = _last_day
    if last[0] == second and last[1] == tz:
        return last[2]
    day = datetime.fromtimestamp(second, ZoneInfo(tz)).strftime("%Y-%m-%d")
    _last_day = (second, tz, day)
    return day


def iso(ts: float | None) -> str:
    """Format epoch seconds as a UTC ISO timestamp, '' for None, 'invalid' for anything not a time in
    1970..9999 (inf, nan, 1e20, a stored value that bypassed validation); never raises."""
    if ts is None:
        return ""
    if not valid_time(ts):
        return INVALID
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_time(ts: float | None, tz: str = "UTC", with_date: bool = False) -> str:
    """HH:MM:SS (or YYYY-MM-DD HH:MM) of `ts` in `tz`, '' for None, 'invalid' for a value that is not a
    time in 1970..9999 (stored before validation, or by hand); never raises."""
    if ts is None:
        return ""
    if not valid_time(ts):
        return INVALID
    dt = datetime.fromtimestamp(ts, ZoneInfo(tz))
    return dt.strftime("%Y-%m-%d %H:%M") if with_date else dt.strftime("%H:%M:%S")


EARLIEST = 0.0
"""1970-01-01T00:00:00Z: the earliest time the ledger stores or accepts."""
LATEST = 253402300799.0
"""9999-12-31T23:59:59Z: the latest time the ledger stores or accepts."""
INVALID = "invalid"
"""How a stored time outside EARLIEST..LATEST is shown."""


_UNITS = ((86400, "d", "d"), (3600, "h", "h"), (60, "m", "min"), (1, "s", "s"))


def span(seconds: float, *, parts: int = 2, finest: str = "m", words: bool = False, join: str = " ") -> str:
    """How long `seconds` is, in at most `parts` units from the largest that fits down to `finest` ("m" or
    "s"; under a minute it is always seconds): '45s', '12m', '3h 05m', '2d 04h' by default; `words` gives
    '5 min', `join=""` gives '2h05m'. A span no two valid times have (nan, inf, 1e20) is 'invalid'."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or abs(seconds) > LATEST:
        return INVALID
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s} s" if words else f"{s}s"
    lead = next(i for i, (size, _, _) in enumerate(_UNITS) if s >= size)
    stop = min(lead + parts, len(_UNITS) if finest == "s" else len(_UNITS) - 1)
    pieces = []
    for j in range(lead, stop):
        size, short, word = _UNITS[j]
        n = s // size if j == lead else s % _UNITS[j - 1][0] // size
        number = str(n) if j == lead else f"{n:02d}"
        pieces.append(f"{number} {word}" if words else f"{number}{short}")
    return join.join(pieces)


def valid_time(ts: object) -> bool:
    """True when `ts` is epoch seconds (a finite number) between EARLIEST and LATEST."""
    return isinstance(ts, (int, float)) and not isinstance(ts, bool) and EARLIEST <= ts <= LATEST


_SPAN = re.compile(r"\+?(?:\s*\d+(?:\.\d+)?\s*[smhd])+")
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DAY_AT = re.compile(r"(today|tomorrow)(?:\s+(\d{1,2}):(\d{2}))?")
DUE_EXAMPLES = "2h, 30m, 2d, tomorrow 09:00 or an ISO time such as 2026-12-03T09:00Z"


def parse_due(text: str, now: float, tz: str = "UTC", *, name: str = "due") -> float:
    """A due time as epoch seconds, always a time in 1970..9999; else BadInput naming `name` and the value.

    Takes a span from `now` (`2h`, `30m`, `2d`, `1h30m`), `today HH:MM` or `tomorrow HH:MM` in time zone `tz`,
    or epoch seconds / ISO-8601 (a naive ISO time is UTC).
    """
    s = text.strip()
    if not s:
        raise BadInput(f"{name}: required; give {DUE_EXAMPLES}")
    if len(s) > 100:
        raise BadInput(f"{name}: at most 100 characters; give {DUE_EXAMPLES}")
    low = s.lower()
    try:
        if _SPAN.fullmatch(low):
            due = now + sum(float(n) * _SECONDS[unit] for n, unit in _SPAN_PART.findall(low))
        elif (day := _DAY_AT.fullmatch(low)) is not None:
            if day.group(2) is None:
                raise BadInput(f"{name} {s!r}: say when on that day, e.g. {day.group(1)} 09:00")
            hour, minute = int(day.group(2)), int(day.group(3))
            if hour > 23 or minute > 59:
                raise BadInput(f"{name} {s!r}: {hour:02d}:{minute:02d} is not a time of day (00:00 to 23:59)")
            zone = ZoneInfo(tz)
            date = datetime.fromtimestamp(now, zone).date() + timedelta(days=1 if day.group(1) == "tomorrow" else 0)
            due = datetime.combine(date, day_time(hour, minute), tzinfo=zone).timestamp()
        else:
            due = parse_time(s)
    except (ValueError, OverflowError):
        raise BadInput(f"{name} {s!r}: not a time; give {DUE_EXAMPLES}") from None
    if not valid_time(due):
        raise BadInput(f"{name} {s!r}: not a time between 1970 and 9999; give {DUE_EXAMPLES}")
    return due


TIME_EXAMPLES = "an ISO time such as 2026-12-01T09:00Z, epoch seconds, or a span back from now such as 2h, 3d"
_BACK_SPAN = re.compile(r"(?:\s*\d+(?:\.\d+)?\s*[smhd])+\s*")


def parse_when(text: str, now: float, *, name: str) -> float:
    """A time for `--since` / `--until` as epoch seconds: ISO-8601 (naive is UTC), epoch seconds, or a span
    back from `now` (`2h`, `3d`, `1h30m`). BadInput naming `name` and the value otherwise."""
    s = text.strip()
    if _BACK_SPAN.fullmatch(s.lower()) is not None:
        when = now - parse_due(s, 0.0, name=name)  # the span, in seconds
    else:
        try:
            when = parse_time(s)
        except (ValueError, OverflowError):
            raise BadInput(f"{name} {text[:60]!r}: not a time; give {TIME_EXAMPLES}") from None
    if not valid_time(when):
        raise BadInput(f"{name} {text[:60]!r}: not a time between 1970 and 9999; give {TIME_EXAMPLES}")
    return when
