"""Reserving a job: the one transaction that must commit before anything is sent."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ledger import store
from ledger.clock import Clock, day_of
from ledger.config import Config
from ledger.db import write_tx
from ledger.errors import BadInput, PayloadError, UnknownOperation
from ledger.model import Job, JobKey, default_job_id, idem_key
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store import jobs as jobs_store
from ledger.store import quota as quota_store
from ledger.transitions import apply

Outcome = Literal["reserved", "duplicate", "quota_exceeded", "blocked_by_hold"]

_GEMINI_KEYS = {"input", "system_instruction", "generation_config"}
MAX_DEPTH = 64
"""Deepest nesting a payload may have (objects and arrays), for every kind of remote."""
MAX_INT = 2**63 - 1
"""Largest integer (in magnitude) a payload may carry: what a 64-bit JSON reader on the remote side takes."""

@dataclass(frozen=True)
class ReserveResult:
    """What reserve() decided. `job` is the new or existing job; `blocking` the held job in the way."""

    outcome: Outcome
    key: JobKey
    job: Job | None = None
    blocking: JobKey | None = None
    used: int = 0
    limit: int = 0


def check_operation(config: Config, operation: str) -> None:
    """Raise UnknownOperation unless `operation` is declared in the config."""
    if operation not in config.operations:
        known = ", ".join(sorted(config.operations)) or "none"
        raise UnknownOperation(f"operation {operation!r}: not declared in the config (declared: {known})")


def parse_payload(config: Config, operation: str, payload: str | dict[str, Any]) -> dict[str, Any]:
    """Parse and validate a payload for `operation`; raise PayloadError saying what is wrong."""
    check_operation(config, operation)
    if isinstance(payload, str):
        try:
            value = json.loads(payload)
        except json.JSONDecodeError as e:
            raise PayloadError(f"payload: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
        except RecursionError:
            raise PayloadError("payload: nested too deeply to read; flatten it (at most 64 levels)") from None
        except ValueError as e:
            if "integer string conversion" in str(e):
                raise PayloadError(
                    "payload: holds an integer of more than 4,300 digits; send it as a string"
                ) from None
            raise PayloadError(f"payload: not usable JSON ({str(e)[:120]})") from None
    else:
        value = payload
    if not isinstance(value, dict):
        raise PayloadError(f"payload: must be a JSON object, got {type(value).__name__}")
    check_json_value(value)
    kind = config.remotes[config.operations[operation].remote].kind
    if kind == "gemini":
        extra = set(value) - _GEMINI_KEYS
        if extra:
            raise PayloadError(
                f"payload: unknown key {sorted(extra)[0]!r} for a gemini operation "
                "(allowed: input, system_instruction, generation_config)"
            )
        if not isinstance(value.get("input"), (str, list)) or not value.get("input"):
            raise PayloadError('payload: a gemini operation needs a non-empty "input" (a string or a list)')
        if "system_instruction" in value and not isinstance(value["system_instruction"], str):
            raise PayloadError('payload: "system_instruction" must be a string')
        if "generation_config" in value and not isinstance(value["generation_config"], dict):
            raise PayloadError('payload: "generation_config" must be an object')
        # Whatever the SDK would refuse before sending (its own request models), or nested too deep, is
        # refused here, before anything is written. Imported here: other kinds never load the SDK.
        _gemini_validator()(value)
    from ledger.remotes import request_body_size
    from ledger.send_window import transfer_refusal

    # Measured as the remote's adapter writes it (an idem key always has 32 characters; the first attempt).
    size = request_body_size(config, operation, value, idem_key="0" * 32, attempt=1)
    why = transfer_refusal(size, margin_seconds=config.policy.send_margin_seconds,
                           min_send_rate=config.policy.min_send_rate)
    if why is not None:
        raise PayloadError(why)
    return value


@functools.cache
def _gemini_validator() -> Callable[[dict[str, Any]], None]:
    """The gemini payload check, imported on first use (the SDK's import is slow) and then kept."""
    from ledger.remotes.gemini import validate_payload

    return validate_payload


def _where(path: list[str | int]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def check_json_value(value: Any) -> None:
    """Raise PayloadError unless `value` is plain JSON any remote can read.

    Objects with string keys, arrays, strings of valid Unicode (no lone surrogates), booleans, null,
    integers within 64 bits, finite floats; nesting at most MAX_DEPTH levels. Walks without recursion,
    so no payload can raise RecursionError here; the message names where the first bad value is.
    """
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, (dict, list, tuple)) and len(path) + 1 > MAX_DEPTH:
            raise PayloadError(f"payload: {str(path[0])!r} is nested more than {MAX_DEPTH} levels deep; flatten it")
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise PayloadError(f"payload: key {k!r} at {_where(path)} is not a string")
                _check_text(k, path, "a key in {}")
                stack.append((v, [*path, k]))
        elif isinstance(node, (list, tuple)):
            stack.extend((v, [*path, i]) for i, v in enumerate(node))
        elif isinstance(node, str):
            _check_text(node, path, "the string at {}")
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if not -MAX_INT <= node <= MAX_INT:
                raise PayloadError(f"payload: the integer at {_where(path)} is beyond 64 bits; send it as a string")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise PayloadError(f"payload: {node!r} at {_where(path)} is not a JSON number; use a finite number")
        else:
            raise PayloadError(f"payload: a {type(node).__name__} at {_where(path)} is not JSON")


def _check_text(text: str, path: list[str | int], what: str) -> None:
    """Raise PayloadError unless `text` is Unicode; `what` names it, with `{}` standing for where it is."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        where = what.format(_where(path))
        raise PayloadError(
            f"payload: {where} holds a lone surrogate ({text[e.start]!a}), which is not Unicode text; send valid UTF-8"
        ) from None


def check_text_arg(name: str, text: str | None) -> None:
    """Raise BadInput unless `text` is valid Unicode (no lone surrogates from undecodable bytes) without a NUL
    character (which PostgreSQL text cannot hold: refused on every backend alike)."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{name}: not valid UTF-8 text; pass it as UTF-8") from None
    if "\x00" in text:
        raise BadInput(f"{name}: holds a NUL character (\\x00), which a ledger cannot store; remove it")


def reserve(
    conn: Connection,
    config: Config,
    operation: str,
    payload: str | dict[str, Any],
    *,
    clock: Clock,
    job_id: str | None = None,
    target: str | None = None,
    actor: str = "reclaim",
) -> ReserveResult:
    """Reserve (job_id, operation) in one write transaction, before any send (see `_reserve`); on
    PostgreSQL run again when the server aborted it for a serialization failure or a deadlock."""
    return store.retrying(
        conn,
        lambda: _reserve(conn, config, operation, payload, clock=clock, job_id=job_id, target=target, actor=actor),
    )


def _reserve(
    conn: Connection,
    config: Config,
    operation: str,
    payload: str | dict[str, Any],
    *,
    clock: Clock,
    job_id: str | None = None,
    target: str | None = None,
    actor: str = "reclaim",
) -> ReserveResult:
    """Reserve (job_id, operation) in one BEGIN IMMEDIATE transaction, before any send.

    Returns `duplicate` if the job exists (nothing written, no quota used), `quota_exceeded` if today's
    quota is used up (nothing written), `blocked_by_hold` if an unresolved held job exists on the same
    target (no job, no quota; a `blocked_new_job` event is appended to the held job), else `reserved`
    with the committed job. Raises BadInput for an unknown operation, bad payload or job id.
    """
    value = parse_payload(config, operation, payload)
    check_text_arg("job id", job_id)
    check_text_arg("target", target)
    check_text_arg("actor", actor)
    if job_id is not None and (not job_id.strip() or len(job_id) > 512):
        raise BadInput("job id: must be 1 to 512 characters and not blank")
    if target is not None and len(target) > 512:
        raise BadInput("target: must be at most 512 characters")
    jid = job_id if job_id is not None else default_job_id(operation, value, target)
    key = JobKey(jid, operation)
    op = config.operations[operation]
    with write_tx(conn, lock=operation):  # PostgreSQL: this operation's advisory lock, not every writer's
        now = clock.now()
        day = day_of(now, config.timezone)
        existing = jobs_store.find_job(conn, key)
        if existing is not None:
            return ReserveResult("duplicate", key, job=existing)
        used = quota_store.used(conn, operation, day)
        if used >= op.daily_quota:
            return ReserveResult("quota_exceeded", key, used=used, limit=op.daily_quota)
        if target is not None and op.blocks_on_hold:
            blocking = jobs_store.held_on_target(conn, target)
            if blocking is not None:
                # Nothing is reserved and no quota used; the refusal is recorded on the held job, so the
                # person triaging it sees the work it is holding up.
                events_store.append(
                    conn,
                    blocking,
                    at=now,
                    actor=actor,
                    kind="blocked_new_job",
                    from_state="held",
                    to_state="held",
                    epoch=None,
                    detail={"job_id": jid, "operation": operation, "target": target, "day": day},
                )
                return ReserveResult("blocked_by_hold", key, blocking=blocking)
        ikey = idem_key(jid, operation)
        # The quota first, the job and its event last: on PostgreSQL the event takes the audit chain's lock,
        # held to COMMIT, so the fewer statements after it the sooner other writers' events can go.
        quota_store.count(conn, operation, day)
        applied = apply(
            conn,
            key,
            "reserve",
            actor=actor,
            now=now,
            expected_state=None,
            detail={"idem_key": ikey, "quota_day": day, "quota_used": used + 1, "quota_limit": op.daily_quota},
            fields={"idem_key": ikey, "target": target, "payload": value, "quota_day": day},
        )
    job = applied.job
    assert job is not None  # the existing row was looked for in this same transaction
    return ReserveResult("reserved", key, job=job, used=used + 1, limit=op.daily_quota)
