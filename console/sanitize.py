"""The one sanitiser for untrusted text: job ids, targets, notes, remote replies, errors.

Everything that did not come from the console's own source goes through `clean()` (to a plain str) or
`safe_text()` (to a `rich.text.Text`, never a markup string) before it is drawn. Control characters
(C0 with newline and tab, DEL, C1, so ESC and with it every CSI / OSC sequence such as OSC 52) and bidi
overrides are shown as visible escapes like `\\x1b` or `\\x0a`, so two ids that differ only there never
print alike. Free text that names nothing (a note, a reason, a remote's error), drawn with `prose=True`,
shows a newline or tab as a space instead. The text is capped with an ellipsis; no style or link is ever
attached, so nothing untrusted is clickable. Every secret the config names (once `use_redactor` installed the
config's `Redactor`) is replaced by `[redacted:NAME]` before anything else, so no cut keeps part of one.

The CLI prints through `console.output`, which uses these functions for every table, line and error,
and `json_text` for `--json`: valid JSON that decodes to the same value, with the same code points
written as `\\uXXXX` escapes instead of raw.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.text import Text

from ledger import Redactor

ELLIPSIS = "…"
DEFAULT_LIMIT = 500
# C0 (but newline and tab, handled below), DEL, C1, line/paragraph separators, bidi overrides, BOM.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_NEWLINE_TAB = re.compile("[\n\t]")
_redactor = Redactor()


def use_redactor(redactor: Redactor) -> None:
    """From now on, replace the secrets `redactor` knows in everything this module cleans (process-wide)."""
    global _redactor
    _redactor = redactor


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with every control, C1, separator and bidi code point written as a visible escape (`\\x1b`),
    newline and tab kept, nothing cut and no secret replaced: whole values safe to show on a terminal."""
    return _UNSAFE.sub(_escape, text)


def clean(value: object, limit: int | None = DEFAULT_LIMIT, *, keep_newlines: bool = False,
          prose: bool = False) -> str:
    """Return `value` as printable text on one line: secrets replaced, every control escaped (`\\x1b`, a newline
    `\\x0a`, a tab `\\x09`), at most `limit` chars (… marks a cut). With `prose` (free text that names nothing)
    a newline or tab becomes a space; with `keep_newlines` (a block of several lines) newlines are kept and a
    tab becomes four spaces."""
    if value is None:
        return ""
    s = _redactor.redact(value if isinstance(value, str) else str(value))
    cut = False
    if limit is not None and len(s) > limit * 4 + 8:
        s, cut = s[: limit * 4 + 8], True  # escaping only lengthens: never scan a huge string in full
    s = _UNSAFE.sub(_escape, s)
    if keep_newlines:
        s = s.replace("\t", "    ")
    elif prose:
        s = _NEWLINE_TAB.sub(" ", s)
    else:
        s = _NEWLINE_TAB.sub(_escape, s)
    if limit is not None and (cut or len(s) > limit):
        s = s[: max(limit - 1, 0)] + ELLIPSIS
    return s


def safe_text(value: object, limit: int | None = DEFAULT_LIMIT, *, style: str = "", keep_newlines: bool = False,
              prose: bool = False) -> Text:
    """Return untrusted `value` as a literal `Text` (no markup parsed, no links), cleaned and capped as `clean`
    does."""
    return Text(clean(value, limit, keep_newlines=keep_newlines, prose=prose), style=style, end="")


def safe_json(value: Any, limit: int | None = 4000) -> Text:
    """Pretty JSON of an untrusted structure (a remote snapshot, an event detail) as literal text."""
    try:
        dumped = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        dumped = repr(value)
    return safe_text(dumped, limit, keep_newlines=True)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_json_controls(dumped: str) -> str:
    """A JSON document (as `json.dumps(..., ensure_ascii=False)` writes it) with every control, C1, separator
    and bidi code point written as a `\\uXXXX` escape: it decodes to the same value and prints inertly."""
    return _UNSAFE.sub(_json_escape, dumped)


def json_text(value: Any) -> str:
    """`value` as one line of JSON (sorted keys) that decodes to the same value, secrets replaced.

    Unlike `json.dumps(..., ensure_ascii=False)`, no control, C1, bidi or separator code point is left
    raw: each is written as a `\\uXXXX` escape (JSON already escapes C0), so printing the document cannot
    move the cursor, start an escape sequence or reorder the text, and non-ASCII text stays readable.
    """
    dumped = json.dumps(_redactor.redact_value(value), sort_keys=True, ensure_ascii=False,
                        default=lambda o: _redactor.redact(str(o)))
    return _UNSAFE.sub(_json_escape, dumped)


def compact_json(value: Any, limit: int | None = 120) -> Text:
    """One-line JSON of an untrusted structure, as literal text."""
    try:
        dumped = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (TypeError, ValueError):
        dumped = repr(value)
    return safe_text(dumped, limit)
