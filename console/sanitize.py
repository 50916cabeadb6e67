"""The one sanitiser for untrusted text (job ids, targets, notes, remote replies, errors).

Control characters never reach the terminal: C0, DEL and C1 are shown escaped (`\\x1b`), so an ESC,
OSC 52 or CSI sequence is visible as text and inert. Length is capped. Results are plain strings for
`Text`/markup-off rendering; `safe_text` returns a `rich.text.Text`, which is never parsed as markup.
"""

from __future__ import annotations

import re

from rich.text import Text

DEFAULT_LIMIT = 500
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NEWLINES = re.compile(r"[\n\t]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def clean(value: object, limit: int = DEFAULT_LIMIT, *, keep_newlines: bool = False) -> str:
    """Return `value` as text with control characters escaped and at most `limit` characters (… marks a cut)."""
    s = "" if value is None else str(value)
    s = _CONTROL.sub(_escape, s)
    if not keep_newlines:
        s = _NEWLINES.sub(" ", s)
    if len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return s


def safe_text(value: object, limit: int = DEFAULT_LIMIT, *, style: str = "", keep_newlines: bool = False) -> Text:
    """A `Text` of the cleaned value: shown literally, never parsed as markup, never clickable."""
    return Text(clean(value, limit, keep_newlines=keep_newlines), style=style)
