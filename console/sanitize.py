"""The one sanitiser for untrusted text: job ids, targets, notes, remote replies, errors.

Everything that did not come from the console's own source goes through `clean()` (to a plain str) or
`safe_text()` (to a `rich.text.Text`, never a markup string) before it is drawn. Control characters
(C0, DEL, C1, so ESC and with it every CSI / OSC sequence such as OSC 52) and bidi overrides are shown
as visible escapes like `\\x1b`; the text is capped with an ellipsis; no style or link is ever attached,
so nothing untrusted is clickable.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.text import Text

ELLIPSIS = "…"
DEFAULT_LIMIT = 500
# C0 (but newline and tab, handled below), DEL, C1, line/paragraph separators, bidi overrides, BOM.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_NEWLINE_TAB = re.compile("[\n\t]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(value: object, limit: int | None = DEFAULT_LIMIT, *, keep_newlines: bool = False) -> str:
    """Return `value` as printable text: controls escaped (`\\x1b`), at most `limit` chars (… marks a cut)."""
    if value is None:
        return ""
    s = value if isinstance(value, str) else str(value)
    cut = False
    if limit is not None and len(s) > limit * 4 + 8:
        s, cut = s[: limit * 4 + 8], True  # escaping only lengthens: never scan a huge string in full
    s = _UNSAFE.sub(_escape, s)
    s = s.replace("\t", "    ") if keep_newlines else _NEWLINE_TAB.sub(" ", s)
    if limit is not None and (cut or len(s) > limit):
        s = s[: max(limit - 1, 0)] + ELLIPSIS
    return s


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
