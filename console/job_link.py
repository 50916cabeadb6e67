"""Links that open one job in the browser seat: `<public_url>/?job=<id>&op=<operation>`.

The page passes the job to its websocket as a path token (`ws/open/<token>`, base64url of the JSON
`{"job": ..., "op": ...}`: textual-serve's script appends its own `?width=..&height=..` to the websocket URL, so
the job cannot ride in the query). The seat decodes the token, checks both parts with `check_link_part` and starts
the console with `--job=ID --operation=OP` (the `=` form: a value starting with `-` stays a value). The console only
opens that job's screen when the job is in the ledger; a link grants nothing else.
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from urllib.parse import quote

from ledger import BadInput, JobKey

LINK_PART_LIMIT = 500
"""The longest job id or operation a link may carry (characters)."""


def check_link_part(name: str, value: str) -> str:
    """`value` when it can name a job's id or operation in a link; BadInput (one line naming `name`) when it is
    blank, longer than LINK_PART_LIMIT, or holds a control, format (bidi) or unpaired surrogate character."""
    if not value.strip():
        raise BadInput(f"{name}: blank; give the job's id as `reclaim show` prints it")
    if len(value) > LINK_PART_LIMIT:
        raise BadInput(f"{name}: {len(value)} characters; a link names at most {LINK_PART_LIMIT}")
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            raise BadInput(f"{name}: holds the control character U+{ord(ch):04X}; give the job's id as "
                           "`reclaim show` prints it")
    return value


def job_link(public_url: str, key: JobKey) -> str:
    """The seat URL that opens `key`'s job screen: `public_url` (its path kept) + `?job=..&op=..`, percent-encoded."""
    base = public_url if public_url.endswith("/") else public_url + "/"
    return f"{base}?job={quote(key.job_id, safe='')}&op={quote(key.operation, safe='')}"


def decode_token(token: str) -> tuple[str, str | None]:
    """The (job id, operation or None) a websocket path token names; BadInput when it is not one the seat's page
    makes (base64url of a JSON object with a string `job` and an optional string `op`) or a part fails
    `check_link_part`."""
    if len(token) > 4 * LINK_PART_LIMIT * 4:
        raise BadInput("job link: too long")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadInput("job link: not a link this seat's page makes (base64url of a JSON object)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("job"), str):
        raise BadInput("job link: names no job")
    op = doc.get("op")
    if op is not None and not isinstance(op, str):
        raise BadInput("job link: the operation is not text")
    return check_link_part("job", doc["job"]), (check_link_part("op", op) if op else None)


def encode_token(job_id: str, operation: str | None) -> str:
    """The token the seat's page makes for `job_id` and `operation` (for tests and scripts)."""
    doc = {"job": job_id, **({"op": operation} if operation else {})}
    return base64.urlsafe_b64encode(json.dumps(doc).encode("utf-8")).decode("ascii").rstrip("=")
