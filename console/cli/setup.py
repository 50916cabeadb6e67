"""Setting a ledger up: `init` (the ledger, a starter config, the owner's signing key, the policy), `keys` (each
account's signing key) and `policy`."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated

import typer

from console import output
from console.cli.common import (
    Session,
    app,
    command,
)
from ledger import (
    POLICY_SETTINGS,
    BadInput,
    Config,
    Signer,
    apply_policy,
    connect,
    create_ledger,
    current_signer,
    key_fingerprint,
    loose_permissions,
    new_signing_key,
    os_account,
    policy_owner,
    process_clock,
    read_policy,
    read_signing_key,
    record_policy,
    require_policy_owner,
    shown_ledger,
    signing_key_path,
    use_signer,
    write_tx,
)

PANEL = "Setting up"
"""Where `reclaim --help` lists this module's commands."""

STARTER_CONFIG = """\
# reclaim config (written by `reclaim init`). See the README for every key.
timezone = "UTC"

[identity]
source = "os"   # the acting operator is the OS account running the command ("declared": --operator, demos only;
                #  "proxy": the browser seat, `reclaim serve`; see the README)

[policy]
four_eyes = true
release_requires_finding = true
stale_reserving_seconds = 120
lease_seconds = 60

[operators]                # OS account = roles: viewer, triage, approver, sender
{account} = ["sender"]   # the scheduler's account (wrote this file): only a sender may submit, tick, run workers
alice = ["triage"]
bob = ["triage", "approver"]

[remotes.gemini]
kind = "gemini"
model = "gemini-flash-latest"
api_key_env = "GEMINI_API_KEY"
base_url = "http://127.0.0.1:{port}"   # the bundled simulator (`reclaim simulator --config reclaim.toml`); remove for Google
timeout_seconds = 30

[operations."article.generate"]
remote = "gemini"
daily_quota = 200
sink = "results"
"""

SIMULATOR_PORT = 8765
"""The port the starter config gives the bundled simulator when it is free on 127.0.0.1."""


def free_simulator_port(preferred: int = SIMULATOR_PORT) -> int:
    """`preferred` when a listening socket can be bound to it on 127.0.0.1 now, else a port the system hands out
    free (bind to port 0). Nothing stays bound: the port is free when this returns, not reserved. Raises OSError
    only when no loopback port can be bound at all."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                if port == 0:
                    raise
                continue
            return int(s.getsockname()[1])
    raise AssertionError("unreachable: binding port 0 returns or raises")


@command(PANEL)
def init(s: Session) -> None:
    """Create the ledger file (or migrate an older one forward).

    The config is checked if present; if missing, a starter config pointing at the bundled simulator is written
    there, on 127.0.0.1:8765 when that port is free, else on another free port (`reclaim simulator --config`
    listens where it points).
    """
    ledger, config = s.ledger, s.config
    wrote_config = False
    port: int | None = None
    wrote_key: Path | None = None
    if config.exists():
        cfg = s.load()
    elif config.parent.is_dir():
        port = free_simulator_port()
        config.write_text(STARTER_CONFIG.replace("{account}", json.dumps(os_account())).replace(
            "{port}", str(port)), encoding="utf-8")
        wrote_config = True
        cfg = s.load()
    else:
        cfg = None
    if cfg is not None and current_signer() is None:
        wrote_key = signing_key_path()
        use_signer(new_signing_key(wrote_key, os_account()))
    created = create_ledger(ledger)
    if not created:
        s.check_opening()
    seeded = _seed_policy(ledger, cfg, config) if cfg is not None else "no config: the ledger holds no policy yet"
    owner_key = _owner_fingerprint(ledger)
    loose = loose_permissions(ledger)
    if s.as_json:
        output.emit_json({"ledger": shown_ledger(ledger), "created": created, "wrote_config": wrote_config,
                          "wrote_signing_key": str(wrote_key) if wrote_key else None, "policy": seeded,
                          "owner_key": owner_key, "permission_warnings": loose})
    else:
        if wrote_config:
            output.line(f"wrote a starter config: {config} (edit [operators] and [remotes] before real use; its "
                        f"simulator is on 127.0.0.1:{port}: reclaim simulator --config {config})")
        if wrote_key:
            output.line(f"wrote your signing key: {wrote_key} (mode 0600; it signs as you: keep a copy apart "
                        "from the ledger, readable by you alone)")
        output.line(f"{'created' if created else 'already a ledger (migrated if needed)'}: {shown_ledger(ledger)}")
        output.line(f"policy: {seeded}")
        if owner_key is not None:
            output.line(f"owner key: {owner_key} (the policy's signer; check it out of band before trusting "
                        "this ledger: 'reclaim policy show' prints it)")
        for warning in loose:
            output.line(f"WARNING: {warning}")


def _seed_policy(ledger: Path | str, cfg: Config, config: Path) -> str:
    """Record the config's policy as the ledger's when this process is the ledger's owner and the ledger has
    none yet; check the config against it otherwise. Says what happened."""
    conn = connect(ledger)
    try:
        held = read_policy(conn)
        if held.settings is not None:
            apply_policy(cfg, held)  # a conflicting config is refused here as everywhere
            return f"the ledger's own (event {held.event_id}); 'reclaim policy show' prints it"
        owner, is_owner = policy_owner(conn, str(ledger))
        if not is_owner:
            return (f"NOT SET: only the ledger's owner ({owner}) may record it; until they run 'reclaim init' or "
                    "'reclaim policy set --from-config', every command acts under its caller's config")

        with write_tx(conn):
            event_id = record_policy(conn, cfg, actor=os_account(), now=process_clock().now(), how="init")
        return f"recorded from {config} (event {event_id}); 'reclaim policy show' prints it"
    finally:
        conn.close()


def _owner_fingerprint(ledger: Path | str) -> str | None:
    """The fingerprint of the owner key the ledger's policy names, or None (no policy, or one from before keys)."""
    conn = connect(ledger)
    try:
        named = read_policy(conn).owner_key
    finally:
        conn.close()
    return key_fingerprint(named) if named is not None else None


keys_app = typer.Typer(help="Your signing key: every decision you record is signed with it (the owner registers "
                            "its public half in the ledger's policy).", no_args_is_help=True)
app.add_typer(keys_app, name="keys", rich_help_panel=PANEL)


@command(name="new", on=keys_app, options=("json",))
def keys_new(s: Session) -> None:
    """Make your signing key (mode 0600 in your home, or RECLAIM_SIGNING_KEY_FILE) and print its public half
    for the ledger's owner to register under [public_keys]."""
    path = signing_key_path()
    signer = new_signing_key(path, os_account())
    _show_key(s, path, signer)


@command(name="show", on=keys_app, options=("json",))
def keys_show(s: Session) -> None:
    """Print your signing key's public half and fingerprint (the line the owner registers under [public_keys])."""
    path = signing_key_path()
    signer = read_signing_key(path, os_account())
    if signer is None:
        raise BadInput(f"signing key {path}: none that this account can read; make one with 'reclaim keys new'")
    _show_key(s, path, signer)


def _show_key(s: Session, path: Path, signer: Signer) -> None:
    if s.as_json:
        output.emit_json({"account": signer.account, "file": str(path), "public_key": signer.public,
                          "fingerprint": key_fingerprint(signer.public)})
        return
    output.line(f"signing key: {path} (mode 0600, {signer.account}'s alone)")
    output.line(f"fingerprint: {key_fingerprint(signer.public)}")
    output.line("register it: the ledger's owner adds this line under [public_keys] in the shared config, then runs "
                "'reclaim policy set --from-config':")
    output.line(f"{json.dumps(signer.account, ensure_ascii=False)} = \"{signer.public}\"")


policy_app = typer.Typer(help="The ledger's policy: identity source, roles, four-eyes (its owner changes it).",
                         no_args_is_help=True)
app.add_typer(policy_app, name="policy", rich_help_panel=PANEL)


@command(name="show", on=policy_app, options=("ledger", "config", "json"))
def policy_show(s: Session) -> None:
    """Print the policy the ledger holds (and who owns the ledger)."""
    with s.read_ledger(s.protect()) as reading:
        held = reading.policy()
        owner, _ = reading.owner()
    if s.as_json:
        output.emit_json({"owner": owner, "event_id": held.event_id, "policy": held.settings,
                          "owner_key": held.owner_key,
                          "owner_key_fingerprint": key_fingerprint(held.owner_key) if held.owner_key else None,
                          "ignored": [{"event_id": i, "why": why} for i, why in held.ignored]})
        return
    output.line(f"ledger owner: {owner}")
    if held.settings is None:
        output.line("no policy recorded: commands act under their caller's config until the owner runs "
                    "'reclaim policy set --from-config'")
        return
    output.line(f"policy (event {held.event_id}):")
    if held.owner_key is not None:
        output.line(f"  signed by the owner key {key_fingerprint(held.owner_key)}")
    else:
        output.line("  not signed (recorded before signatures): the owner signs it by running "
                    "'reclaim policy set --from-config' with their key")
    for event_id, why in held.ignored:
        output.line(f"  IGNORED: policy event {event_id}: {why}")
    for name in POLICY_SETTINGS:
        output.line(f"  {name} = {json.dumps(held.settings[name], ensure_ascii=False, sort_keys=True)}")


@command(name="set", on=policy_app, options=("ledger", "config", "json"))
def policy_set(
    s: Session,
    from_config: Annotated[bool, typer.Option(
        "--from-config", help="Record the policy settings of --config (the shared config) as the ledger's.")] = False,
) -> None:
    """Change the ledger's policy (owner only; recorded as an event): identity source, roles, four-eyes."""
    if not from_config:
        raise BadInput("policy set: pass --from-config: edit [identity], [serve], [operators] and "
                       "policy.four_eyes in the shared config, then record them with it")
    cfg = s.load()
    conn = s.connect()
    try:
        require_policy_owner(conn, str(s.ledger), "policy set")

        with write_tx(conn):
            event_id = record_policy(conn, cfg, actor=os_account(), now=process_clock().now(),
                                     how="policy set --from-config")
    finally:
        conn.close()
    if s.as_json:
        output.emit_json({"recorded": event_id is not None, "event_id": event_id})
    else:
        output.line(f"policy recorded (event {event_id})" if event_id is not None
                    else "policy unchanged: the config's settings are the ledger's already")
