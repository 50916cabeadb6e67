"""Who is acting: the OS account running the process, a declared name when the config allows it, or the
browser user an authenticating proxy vouched for.

`[identity] source = "os"` (the default): the operator is the account of the effective uid, looked up
in the password database (never $USER or $LOGNAME, which any caller can set). A declared name
(`--operator`, RECLAIM_OPERATOR) that differs from it is refused. `source = "declared"` (demos, tests):
the declared name counts, and every screen says the identity is not verified.

`source = "proxy"` (the browser seat): commands typed on the host still act as their OS account, exactly
as under "os". `reclaim serve` admits a browser connection only when the proxy's header arrives from a
trusted peer, then starts one console for it with the user's name in RECLAIM_SEAT_OPERATOR (`SEAT_ENV`).
That name counts only in a process whose effective account is `[serve] account`, the seat's own service
account: anyone on the host can set an environment variable, but only that account (or root, who can
rewrite the ledger anyway) can start a process as that account, so a local user cannot become "bob" by
typing `RECLAIM_SEAT_OPERATOR=bob reclaim console`. The same rule stops a local user from running a
`reclaim serve` of their own. Under any other source, or in any other account, the variable is refused.
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
    source: str  # "os", "declared" or "proxy"

    @property
    def verified(self) -> bool:
        """True when the name comes from the OS account or the seat's authenticating proxy, not from the caller."""
        return self.source in ("os", "proxy")

    @property
    def label(self) -> str:
        """'identity: alice (os account)', 'identity: bob (browser seat, via the proxy)' or
        'identity: declared, not verified (bob)' for status and headers."""
        if self.source == "os":
            return f"identity: {self.name} (os account)"
        if self.source == "proxy":
            return f"identity: {self.name} (browser seat, via the proxy)"
        return f"identity: declared, not verified ({self.name})"


SEAT_ENV = "RECLAIM_SEAT_OPERATOR"
"""The variable `reclaim serve` gives each browser seat's console: the name the proxy authenticated."""

MAX_NAME = 64


def check_seat_name(name: str) -> str:
    """The name unchanged when it can be an operator's name (1-64 printable characters, no surrounding blanks,
    no control or separator characters); BadInput otherwise."""
    if not name or len(name) > MAX_NAME or name != name.strip() or not name.isprintable():
        raise BadInput(f"operator name {name[:MAX_NAME]!r}: must be 1-{MAX_NAME} printable characters")
    return name


def os_account() -> str:
    """The account name of this process's effective uid ('uid 1234' when it has no password entry)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def resolve(config: Config, declared: str | None, seat: str | None = None) -> Identity:
    """The identity this process acts as under the config's `[identity] source`; BadInput when a declared
    name is given that the source does not allow, or a seat name (`SEAT_ENV`) outside the seat's account."""
    account = os_account()
    if seat is not None:
        if config.identity_source != "proxy":
            raise BadInput(f"{SEAT_ENV} is set, but this ledger's [identity] source is "
                           f"{config.identity_source!r}; it counts only with source = \"proxy\". Unset it")
        if account != config.serve.account:
            raise BadInput(f"{SEAT_ENV} counts only in the browser seat's account ({config.serve.account}), "
                           f"not in {account}; a seat's console is started by `reclaim serve`. Unset it")
        if declared is not None:
            raise BadInput(f"operator {declared!r}: a browser seat acts as the proxy's user; unset RECLAIM_OPERATOR")
        return Identity(check_seat_name(seat), "proxy")
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


def acting_source(config: Config) -> str:
    """How the acting operator's name is established in this process under `config` (as `resolve` decides):
    recorded with every decision."""
    if config.identity_source == "declared":
        return "declared"
    if config.identity_source == "proxy" and os.environ.get(SEAT_ENV):
        return "proxy"
    return "os"


def require_role(config: Config, who: Identity, role: str, what: str) -> None:
    """Raise Refused unless `who` holds `role` (e.g. 'sender' for commands that send)."""
    if role not in config.roles_of(who.name):
        raise Refused(
            f"{who.name} lacks the {role} role needed to {what} (roles come from [operators] in the config; "
            f"sending commands run as the scheduler's account)"
        )
