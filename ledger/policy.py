"""Who may do what is the ledger's, not the caller's: the identity source, the roles and four-eyes.

The policy is recorded in the ledger as `policy_set` events (under the pseudo-job `(ledger)` /
`(policy)`, in the audit chain, authenticated by the audit key like every event), written by `reclaim
init` from the config it is given, or by `reclaim policy set --from-config` run by the ledger's owner.
Every command then acts under the ledger's policy: a config passed with --config / RECLAIM_CONFIG may
change presentation and connection, but a config that states a policy setting ([identity], [serve]
account and trusted proxies, [operators], policy.four_eyes, policy.release_requires_finding) other than
the ledger's is refused, naming the setting and `reclaim policy` (refused rather than ignored: whoever
wrote it meant it, and acting otherwise than it says, silently, would mislead them).

A ledger from before policies existed has none until its owner runs `reclaim init` or `reclaim policy
set --from-config` (nobody else can seed it: a caller's config is exactly what is not trusted); until
then it runs with the config's policy, as before, and `status` says so loudly.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ledger import seal
from ledger.config import Config, ServeConfig
from ledger.errors import ConfigError, LedgerCorrupt, Refused
from ledger.model import JobKey
from ledger.store import Connection
from ledger.store import policy as sql

POLICY_KEY = JobKey(*sql.POLICY_JOB)
SETTINGS = ("identity.source", "identity.proxy_header", "serve.account", "serve.trusted_proxies", "operators",
            "policy.four_eyes", "policy.release_requires_finding")
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
        "policy.four_eyes": cfg.policy.four_eyes,
        "policy.release_requires_finding": cfg.policy.release_requires_finding,
    }


@dataclass(frozen=True)
class LedgerPolicy:
    """The policy the ledger holds (None settings: the ledger has none yet) and the event that set it."""

    settings: dict[str, Any] | None
    event_id: int | None


def read(conn: Connection) -> LedgerPolicy:
    """The ledger's policy. With the audit key held, a policy event whose MAC is missing or wrong is refused
    (LedgerCorrupt): it was not written by a process holding the key."""
    row = sql.latest(conn)
    if row is None:
        return LedgerPolicy(None, None)
    key = seal.current_key()
    if key is not None and (row[3] is None or not seal.mac_ok(key, row[2], row[3])):
        raise LedgerCorrupt(f"ledger policy (event {row[0]}): not authenticated by the audit key; someone wrote it "
                            "around reclaim. Run 'reclaim verify', then 'reclaim policy set' as the ledger's owner")
    settings = json.loads(row[1]).get("policy")
    if not isinstance(settings, dict) or set(settings) != set(SETTINGS):
        raise LedgerCorrupt(f"ledger policy (event {row[0]}): unreadable; run 'reclaim verify'")
    return LedgerPolicy(settings, int(row[0]))


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
    """Record `cfg`'s policy settings as the ledger's (inside the caller's write transaction); None when they
    are the ledger's already (nothing written)."""
    from ledger.store import events as events_store

    settings = of_config(cfg)
    current = read(conn)
    if current.settings == settings:
        return None
    changed = sorted(k for k in SETTINGS if current.settings is None or current.settings[k] != settings[k])
    return events_store.append(conn, POLICY_KEY, at=now, actor=actor, kind="policy_set", from_state=None,
                               to_state=None, epoch=None, detail={"policy": settings, "changed": changed, "how": how})
