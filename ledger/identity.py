"""Who is acting: the OS account running the process, or a declared name when the config allows it.

`[identity] source = "os"` (the default): the operator is the account of the effective uid, looked up
in the password database (never $USER or $LOGNAME, which any caller can set). A declared name
(`--operator`, RECLAIM_OPERATOR) that differs from it is refused. `source = "declared"` (demos, tests):
the declared name counts, and every screen says the identity is not verified.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass

from ledger.config import Config
from ledger.errors import BadInput, Refused


@dataclass(frozen=True)
class Identity:
    """The acting operator and how the name was established."""

    name: str
    source: str  # "os" or "declared"

    @property
    def verified(self) -> bool:
        """True when the name comes from the OS account, not from what the caller said."""
        return self.source == "os"

    @property
    def label(self) -> str:
        """'identity: alice (os account)' or 'identity: declared, not verified (bob)' for status and headers."""
        if self.verified:
            return f"identity: {self.name} (os account)"
        return f"identity: declared, not verified ({self.name})"


def os_account() -> str:
    """The account name of this process's effective uid ('uid 1234' when it has no password entry)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def resolve(config: Config, declared: str | None) -> Identity:
    """The identity this process acts as under the config's `[identity] source`; BadInput when a declared
    name is given that the source does not allow."""
    account = os_account()
    if config.identity_source == "declared":
        name = declared if declared is not None else account
        if not name.strip():
            raise BadInput("operator: empty name; pass --operator NAME (or RECLAIM_OPERATOR)")
        return Identity(name, "declared")
    if declared is not None and declared != account:
        raise BadInput(
            f"operator {declared!r}: this ledger takes identity from the OS account ({account}); "
            "--operator / RECLAIM_OPERATOR count only with [identity] source = \"declared\" in the config. "
            f"Run the command as {declared!r} (e.g. sudo -u), or unset RECLAIM_OPERATOR"
        )
    return Identity(account, "os")


def require_role(config: Config, who: Identity, role: str, what: str) -> None:
    """Raise Refused unless `who` holds `role` (e.g. 'sender' for commands that send)."""
    if role not in config.roles_of(who.name):
        raise Refused(
            f"{who.name} lacks the {role} role needed to {what} (roles come from [operators] in the config; "
            f"sending commands run as the scheduler's account)"
        )
