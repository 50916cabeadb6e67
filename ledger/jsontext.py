"""JSON text encoders for the ledger's stored forms, each built once and cheap per call.

`json.JSONEncoder(...).encode` builds a new C encoder on every call (in `iterencode`), about half the cost of
encoding a small object. The encoders here call the C encoder straight, with the same arguments `encode`
would give it, so the text is the same byte for byte (checked when the encoder is made); where the C encoder
is missing or takes other arguments, the plain `encode` is used.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

_PROBE: Any = {"b": [1, 2.5, -0.0, 1e300, True, None, "é\u2028\"\\"], "a": {"z": "", "y": [{}]}}
"""What a made encoder must write exactly as `JSONEncoder.encode` does before it is used."""


def encoder(*, sort_keys: bool, separators: tuple[str, str], check_circular: bool = True) -> Callable[[Any], str]:
    """A function writing a value as JSON text (UTF-8, not ASCII-escaped) exactly as
    `json.JSONEncoder(sort_keys=..., separators=..., ensure_ascii=False, check_circular=...).encode` does,
    errors included: TypeError for what is not JSON, ValueError for NaN/Infinity never (allowed, as there) or
    a circular reference (with `check_circular`; without it, pass only values that cannot hold themselves)."""
    plain = json.JSONEncoder(
        sort_keys=sort_keys, separators=separators, ensure_ascii=False, check_circular=check_circular
    )
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # not in typeshed: the C accelerator, or None
    if make is None:
        return plain.encode
    item_sep, key_sep = separators
    text = json.encoder.encode_basestring
    args = (plain.default, text, None, key_sep, item_sep, sort_keys, False, True)
    try:
        if check_circular:

            def encode(value: Any) -> str:
                return "".join(make({}, *args)(value, 0))  # a fresh record of the containers being written

        else:
            once = make(None, *args)

            def encode(value: Any) -> str:
                return "".join(once(value, 0))

        same = encode(_PROBE) == plain.encode(_PROBE)
    except (TypeError, ValueError):
        same = False  # a C encoder taking other arguments on this Python
    return encode if same else plain.encode
