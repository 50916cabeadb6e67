"""Who wrote an event, as its signature proves, and whether that account may have written it.

Under a policy that registers keys (`[public_keys]`, ledger.policy) and takes identity from the OS account or the
seat's proxy, an event counts only when its proof (ledger.signing) verifies against a registered key, and:
- a person's event (a decision, or a triage event that names how its actor was identified) is signed by the
  account it names, or by the browser seat's account for a person the proxy authenticated, and that person
  holds the role the action needs (release, reconcile, reject, remediate: approver; the rest: triage);
- every other event (a reservation, a worker's or the receiver's) is signed by an account with the sender role.

The worker checks the event that authorised an attempt before it sends it (`attempt_refusal`), four-eyes
compares the verified signers of the attempt's triage with the releasing one, and `verify` checks every event.
A ledger whose policy registers no keys (or takes declared names) requires none of this: every screen says
its decisions are not signed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.config import Config
from ledger.model import JobKey
from ledger.signing import Proof, signer_of
from ledger.store import Connection
from ledger.store import events as events_store
from ledger.store.events import Proven

APPROVER_KINDS = frozenset({"release", "reconcile", "reject", "remediate", "notification_resent_other_route"})
"""A person's decisions: signed by an approver (a reconcile the worker makes on evidence is the system's)."""
TRIAGE_KINDS = frozenset({"finding", "assign", "remote_query", "candidate_dismissed", "notification_confirmed"})
"""A person's triage: signed by someone with the triage role."""
ALWAYS_PERSON = frozenset({"release", "reject", "remediate", "notification_resent_other_route"})
"""Kinds only a person writes: one without a named identity is refused, not taken as the system's."""
_ROLE_OF = {**dict.fromkeys(TRIAGE_KINDS, "triage"), **dict.fromkeys(APPROVER_KINDS, "approver")}
"""The role a person's event needs, by kind; every other event needs the sender role."""


def required(config: Config) -> bool:
    """True when the ledger's policy makes signatures count: it registers keys and names are not declared."""
    return bool(config.keys) and config.identity_source != "declared"


def _signer(config: Config, digest: str | None, proof: str | None) -> tuple[str | None, str | None]:
    """(the registered account whose key signed `digest`, None), or (None, why no registered key did)."""
    got = Proof.parse(proof)
    signer = signer_of(got, digest, config.keys)
    if signer is not None:
        return signer, None
    if got.signer is None:
        return None, "is not signed (written by a process holding no registered key)"
    if got.signer not in config.keys:
        return None, f"is signed by {got.signer}, who has no key registered in the ledger's policy"
    return None, (f"claims {got.signer}'s signature, which does not verify against {got.signer}'s registered key "
                  "(written by another account, or rewritten)")


def refusal(
    config: Config, *, actor: str, kind: str, detail: Mapping[str, Any], chain_hash: str | None, proof: str | None,
) -> str | None:
    """Why the event does not prove it was written by an account allowed to write it, in words that fit after
    "event N ... "; None when it does. Call only when `required(config)`."""
    signer, why = _signer(config, chain_hash, proof)
    if signer is None:
        return why
    person = "identity_source" in detail or kind in ALWAYS_PERSON
    if not person:
        if "sender" not in config.roles_of(signer):
            return f"is signed by {signer}, who lacks the sender role the worker's and receiver's events need"
        return None
    seat = detail.get("identity_source") == "proxy" and signer == config.serve.account
    if signer != actor and not seat:
        return f"names {actor} but is signed by {signer}"
    role = _ROLE_OF.get(kind, "sender")
    if role not in config.roles_of(actor):
        return f"is {actor}'s, who lacks the {role} role it needs"
    return None


def author(config: Config, event: Proven) -> str | None:
    """The person (or sending account) the event proves wrote it, or None when its proof does not hold."""
    _, actor, kind, detail, chain_hash, proof = event
    if refusal(config, actor=actor, kind=kind, detail=detail, chain_hash=chain_hash, proof=proof) is not None:
        return None
    return actor


def attempt_refusal(conn: Connection, config: Config, key: JobKey) -> tuple[int, str] | None:
    """(event id, why) when the reservation or release that authorised the job's current attempt does not verify
    against its writer's registered key and role, or (a release, under four-eyes) its verified signer also
    triaged the attempt it ends; None when it holds, or the policy requires no signatures."""
    if not required(config):
        return None
    found = events_store.authorising(conn, key)
    if not found:
        return None
    event = found[0]
    event_id, actor, kind, detail, chain_hash, proof = event
    why = refusal(config, actor=actor, kind=kind, detail=detail, chain_hash=chain_hash, proof=proof)
    if why is not None:
        return event_id, f"the {kind} (event {event_id}, by {actor}) {why}"
    if kind == "release" and config.policy.four_eyes:
        since = found[1][0] if len(found) > 1 else 0
        for triaged in events_store.triage_between(conn, key, since, event_id):
            if author(config, triaged) == actor:
                return event_id, (f"the release (event {event_id}) is signed by {actor}, whose signed "
                                  f"{triaged[2].replace('_', ' ')} (event {triaged[0]}) is part of the attempt it "
                                  "ends (four-eyes: an approver who did neither must release)")
    return None


def sender_refusal(config: Config, digest: str, proof: str | None) -> str | None:
    """Why a row the worker or the receiver writes beside the events (a webhook delivery) does not prove it was
    written by an account with the sender role, or None when it does."""
    signer, why = _signer(config, digest, proof)
    if signer is None:
        return why
    if "sender" not in config.roles_of(signer):
        return f"is signed by {signer}, who lacks the sender role"
    return None
