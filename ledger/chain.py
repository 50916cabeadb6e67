"""The audit chain's hash: what every event must carry, computed the same way by the writer (`transitions`),
the schema migration that chained the events already there (`store.sqlite`) and `verify` (`audit`)."""

from __future__ import annotations

import hashlib

from ledger import jsontext

# Built once, not per event; the body is a flat list of scalars, which cannot hold itself.
_CHAIN_BODY = jsontext.encoder(sort_keys=False, separators=(",", ":"), check_circular=False)


def event_hash(
    prev_hash: str | None, at: float, job_id: str, operation: str, seq: int, actor: str, kind: str,
    from_state: str | None, to_state: str | None, epoch: int | None, detail: str, seal: str | None = None,
) -> str:
    """The hash an event must carry: sha256 of the previous hash and the event's canonical JSON (with its seal,
    when it has one: events written before seals existed hash as they did)."""
    fields = [prev_hash, repr(float(at)), job_id, operation, seq, actor, kind, from_state, to_state, epoch, detail]
    if seal is not None:
        fields.append(seal)
    body = _CHAIN_BODY(fields)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
