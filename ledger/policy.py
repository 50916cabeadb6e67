"""Who may do what is the ledger's, not the caller's: the identity source, the roles, four-eyes and each
account's public key.

The policy is recorded in the ledger as `policy_set` events (under the pseudo-job `(ledger)` / `(policy)`, in
the audit chain), written by `reclaim init` from the config it is given, or by `reclaim policy set
--from-config` run by the ledger's owner. Each is signed with the owner's key (ledger.signing) and names that
key (`owner_key`); `init` prints its fingerprint for an out-of-band check. Every process then reads the policy
with public keys only: once a policy names its owner's key, a later policy event counts only when that key
signed it. One that does not (written around reclaim by someone who can write the ledger) is ignored by every
process, the last valid policy stands, and `status` and `verify` name it; the owner can always set the policy
again. A ledger whose policies predate signatures keeps the older rule: a process holding the retired audit key
ignores a policy event without its MAC.

Every command acts under the ledger's policy: a config passed with --config / RECLAIM_CONFIG may change
presentation and connection, but a config that states a policy setting ([identity], [serve] account and trusted
proxies, [operators], [public_keys], policy.four_eyes, policy.release_requires_finding) other than the ledger's
is refused, naming the setting and `reclaim policy` (refused rather than ignored: whoever wrote it meant it,
and acting otherwise than it says, silently, would mislead them).

A ledger from before policies existed has none until its owner runs `reclaim init` or `reclaim policy
set --from-config` (nobody else can seed it: a caller's config is exactly what is not trusted); until
then it runs with the config's policy, as before, and `status` says so loudly.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ledger import seal, signing
from ledger.config import Config, ServeConfig
from ledger.errors import ConfigError, LedgerCorrupt, Refused
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import policy as sql

POLICY_KEY = JobKey(*sql.POLICY_JOB)
SETTINGS = ("identity.source", "identity.proxy_header", "serve.account", "serve.trusted_proxies", "operators",
            "public_keys", "policy.four_eyes", "policy.release_requires_finding")
"""The settings that are the ledger's, by their config key."""


class PolicyConflict(ConfigError):
    """A config states a policy setting other than the ledger's."""


def of_config(cfg: Config) -> dict[str, Any]:
    """The policy settings a config gives (its stated values and the defaults), as the ledger records them."""
    return {
        "identity.source": cfg.identity_source,
        "identity.proxy_header": cfg.proxy_header,
        "serve.account": cfg.serve.account,
        "serve.trusted_proxies": sorted(cfg.serve.trusted_proxies),
        "operators": {name: sorted(roles) for name, roles in sorted(cfg.operators.items())},
        "public_keys": dict(sorted(cfg.keys.items())),
        "policy.four_eyes": cfg.policy.four_eyes,
        "policy.release_requires_finding": cfg.policy.release_requires_finding,
    }


@dataclass(frozen=True)
class LedgerPolicy:
    """The policy the ledger holds (None settings: the ledger has none yet), the event that set it, the owner's
    key it names (None: set before signatures), and the policy events ignored because they do not verify."""

    settings: dict[str, Any] | None
    event_id: int | None
    owner_key: str | None = None
    ignored: tuple[tuple[int, str], ...] = ()
    """(event id, why) of each policy event that does not count."""


class PolicyChain:
    """The ledger's policy events folded in their order: which count (see the module), the owner key in force, and
    the newest that counts. What `read` returns, and what `verify` holds as it walks the audit chain."""

    def __init__(self, audit_key: bytes | None = None) -> None:
        self.audit_key = audit_key
        """An older ledger's audit key this process holds (None: its MACs are not checked here)."""
        self.owner_key: str | None = None
        self.ignored: list[tuple[int, str]] = []
        self._current: tuple[int, dict[str, Any]] | None = None

    def add(self, event_id: int, detail_text: str, chain_hash: str, proof_text: str | None) -> str | None:
        """Fold in the next policy event; why it is ignored, or None when it counts."""
        why, detail = refusal(detail_text, chain_hash, proof_text, self.owner_key, self.audit_key)
        if why is not None:
            self.ignored.append((int(event_id), why))
            return why
        self._current = (int(event_id), detail)
        named = detail.get("owner_key")
        self.owner_key = named if isinstance(named, str) else self.owner_key
        return None

    def held(self) -> LedgerPolicy:
        """The policy as folded so far. Raises LedgerCorrupt when the policy that counts cannot be read."""
        if self._current is None:
            return LedgerPolicy(None, None, self.owner_key, tuple(self.ignored))
        event_id, detail = self._current
        settings = detail.get("policy")
        if isinstance(settings, dict):
            settings = {"public_keys": {}, **settings}  # policies recorded before keys were registered
        if not isinstance(settings, dict) or set(settings) != set(SETTINGS):
            raise LedgerCorrupt(f"ledger policy (event {event_id}): unreadable; run 'reclaim verify'")
        return LedgerPolicy(settings, event_id, self.owner_key, tuple(self.ignored))


def read(conn: Connection) -> LedgerPolicy:
    """The ledger's policy: its newest policy event that verifies (see the module), with those that do not.
    Raises LedgerCorrupt only when the policy that counts cannot be read."""
    chain = PolicyChain(seal.current_key())
    for event_id, detail_text, chain_hash, proof_text in sql.every(conn):
        chain.add(event_id, detail_text, chain_hash, proof_text)
    return chain.held()


def refusal(detail_text: str, chain_hash: str, proof_text: str | None, owner_key: str | None,
            audit_key: bytes | None) -> tuple[str | None, dict[str, Any]]:
    """(why a policy event does not count, or None; its detail), given the owner key in force before it (None:
    no policy has named one yet) and, on an older ledger, the audit key this process holds (None: not checked)."""
    try:
        detail = json.loads(detail_text)
    except ValueError:
        return "its detail cannot be read", {}
    if not isinstance(detail, dict):
        return "its detail cannot be read", {}
    proof = signing.Proof.parse(proof_text)
    if owner_key is not None:
        if proof.signature is None or not signing.verifies(owner_key, chain_hash, proof.signature):
            return (f"not signed by the ledger owner's key ({signing.fingerprint(owner_key)}): written around "
                    "reclaim, so it is ignored"), detail
        return None, detail
    named = detail.get("owner_key")
    if named is not None:
        try:
            signing.check_public(named)
        except ValueError:
            return "the owner key it names is not a public key", detail
        if proof.signature is None or not signing.verifies(named, chain_hash, proof.signature):
            return "not signed by the owner key it names, so it is ignored", detail
    if audit_key is not None and (proof.hmac is None or not seal.mac_ok(audit_key, chain_hash, proof.hmac)):
        return "not authenticated by the audit key (written around reclaim), so it is ignored", detail
    return None, detail


def apply_to(cfg: Config, held: LedgerPolicy) -> Config:
    """`cfg` acting under the ledger's policy; PolicyConflict when `cfg` states a setting the ledger's differs
    from. A ledger without a policy leaves `cfg` as it is."""
    if held.settings is None:
        return cfg
    mine = of_config(cfg)
    for name in SETTINGS:
        if name in cfg.stated and mine[name] != held.settings[name]:
            raise PolicyConflict(
                f"config key {name}: differs from the ledger's policy ({_shown(held.settings[name])}); who you are "
                "and what you may do are the ledger's: remove the setting from your config (see "
                "'reclaim policy show'; its owner changes it with 'reclaim policy set')"
            )
    s = held.settings
    return dataclasses.replace(
        cfg,
        identity_source=s["identity.source"],
        proxy_header=s["identity.proxy_header"],
        serve=ServeConfig(account=s["serve.account"], trusted_proxies=tuple(s["serve.trusted_proxies"]),
                          allowed_origins=cfg.serve.allowed_origins),
        operators={name: frozenset(roles) for name, roles in s["operators"].items()},
        keys=dict(s["public_keys"]),
        policy=dataclasses.replace(cfg.policy, four_eyes=s["policy.four_eyes"],
                                   release_requires_finding=s["policy.release_requires_finding"]),
    )


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def owner(conn: Connection, path: str) -> tuple[str, bool]:
    """(who owns the ledger, whether this process may act as its owner: the owner itself, root or a superuser)."""
    return sql.owner(conn)


def require_owner(conn: Connection, path: str, what: str) -> str:
    """The owner's name when this process is the ledger's owner (or root / a superuser); Refused otherwise."""
    name, is_owner = sql.owner(conn)
    if not is_owner:
        raise Refused(f"{what}: only the ledger's owner ({name}) may change its policy; ask them to run it")
    return name


def record(conn: Connection, cfg: Config, *, actor: str, now: float, how: str) -> int | None:
    """Record `cfg`'s policy settings as the ledger's (inside the caller's write transaction), signed with this
    process's key and naming it as the owner's; None when they are the ledger's already (nothing written).

    Raises Refused when the ledger's policy names an owner key this process does not hold (its event would be
    ignored), or when this process holds no key at all (a policy must be signed: 'reclaim keys new')."""
    from ledger.store import events as events_store

    settings = of_config(cfg)
    current = read(conn)
    signer = signing.current_signer()
    if signer is None:
        raise Refused(f"{how}: this account holds no signing key ({signing.key_path()}), and the ledger's policy "
                      "must be signed by its owner: run 'reclaim keys new' first")
    if current.owner_key is not None and current.owner_key != signer.public:
        raise Refused(f"{how}: the ledger's policy is signed by the owner key {signing.fingerprint(current.owner_key)}"
                      f", not by this account's key ({signing.fingerprint(signer.public)}, {signing.key_path()}); run "
                      "it as the ledger's owner with that key")
    if current.settings == settings and current.owner_key is not None:
        return None
    changed = sorted(k for k in SETTINGS if current.settings is None or current.settings[k] != settings[k])
    return events_store.append(conn, POLICY_KEY, at=now, actor=actor, kind="policy_set", from_state=None,
                               to_state=None, epoch=None,
                               detail={"policy": settings, "changed": changed, "how": how, "owner_key": signer.public})
