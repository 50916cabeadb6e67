"""The one sanitiser for untrusted text: job ids, targets, notes, remote replies, errors.

Everything that did not come from the console's own source goes through `clean()` (to a plain str) or
`safe_text()` (to a `rich.text.Text`, never a markup string) before it is drawn. Control characters
(C0, DEL, C1, so ESC and with it every CSI / OSC sequence such as OSC 52) and bidi overrides are shown
as visible escapes like `\\x1b`; the text is capped with an ellipsis; no style or link is ever attached,
so nothing untrusted is clickable.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

ELLIPSIS = "…"
DEFAULT_LIMIT = 200
_BIDI_AND_SEPARATORS = frozenset(
    [0x2028, 0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF]
)


def _escape_char(ch: str, keep_newlines: bool) -> str:
    code = ord(ch)
    if ch == "\n" and keep_newlines:
        return ch
    if ch == "\t":
        return "    " if keep_newlines else " "
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\x{code:02x}"
    if code in _BIDI_AND_SEPARATORS:
        return f"\\u{code:04x}"
    return ch


def clean(value: object, limit: int | None = DEFAULT_LIMIT, *, keep_newlines: bool = False) -> str:
    """Return `value` as a printable one-line (or multi-line) str: controls escaped, capped at `limit` chars."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    if limit is not None and len(s) > limit * 4:
        s = s[: limit * 4]  # escaping only grows the text; never scan a huge string in full
    out: list[str] = []
    size = 0
    for ch in s:
        piece = _escape_char(ch, keep_newlines) if (ch < " " or ch > "~") else ch
        out.append(piece)
        size += len(piece)
        if limit is not None and size > limit:
            break
    text = "".join(out)
    if limit is not None and (len(text) > limit or len(s) < len(value if isinstance(value, str) else s)):
        text = text[: max(limit - 1, 0)] + ELLIPSIS
    return text


def safe_text(value: object, limit: int | None = DEFAULT_LIMIT, *, style: str = "", keep_newlines: bool = False) -> Text:
    """Return untrusted `value` as a literal `Text` (no markup parsed, no links), cleaned and capped."""
    return Text(clean(value, limit, keep_newlines=keep_newlines), style=style, end="")


def safe_json(value: Any, limit: int | None = 4000) -> Text:
    """Pretty JSON of an untrusted structure (a remote snapshot, an event detail) as literal text."""
    try:
        dumped = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        dumped = repr(value)
    return safe_text(dumped, limit, keep_newlines=True)


def compact_json(value: Any, limit: int | None = 120) -> Text:
    """One-line JSON of an untrusted structure, as literal text."""
    try:
        dumped = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (TypeError, ValueError):
        dumped = repr(value)
    return safe_text(dumped, limit)
