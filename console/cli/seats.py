"""Seats and tools: `console` (the Textual app), `serve` (the browser seat), `simulator`, `demo`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from console import output
from console.cli.common import (
    OperationOpt,
    Session,
    command,
    within,
)
from console.job_link import check_link_part
from ledger import (
    BadInput,
    is_url,
    os_account,
)

PANEL = "Seats and tools"
"""Where `reclaim --help` lists this module's commands."""


@command(PANEL, options=())
def simulator(
    port: Annotated[int, typer.Option("--port", help="Port (0 picks a free one).")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Loopback address only.")] = "127.0.0.1",
    complete_after: Annotated[float, typer.Option("--complete-after", help="Seconds until a job completes.")] = 0.0,
    fault_rate: Annotated[list[str] | None, typer.Option("--fault-rate", help="kind=rate, repeatable.")] = None,
    seed: Annotated[int | None, typer.Option("--seed")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="Listen on the port this config's gemini remote base_url names (what `init` wrote).")] = None,
) -> None:
    """Serve the loopback simulator of the Gemini Interactions API (and a clean-up API) until Ctrl-C."""
    from ledger import simulator as sim

    if config is not None:
        port = simulator_port_of(config)
    within("--port", port, 0, 65535)
    within("--complete-after", complete_after, 0, 86400)
    if seed is not None:
        within("--seed", seed, 0, 2**63 - 1)
    argv = ["--host", host, "--port", str(port), "--complete-after", str(complete_after)]
    for fr in fault_rate or []:
        argv += ["--fault-rate", fr]
    if seed is not None:
        argv += ["--seed", str(seed)]
    try:
        code = sim.main(argv)
    except OSError as e:
        import errno

        if e.errno != errno.EADDRINUSE:
            raise
        raise BadInput(f"simulator: port {port} on {host} is in use; pick another with --port or use --port 0") from None
    raise typer.Exit(code)


def simulator_port_of(config: Path) -> int:
    """The port of the first remote in `config` whose base_url is on 127.0.0.1 with a port; BadInput if none is
    (ConfigError if the config does not load)."""
    from urllib.parse import urlsplit

    from ledger import load_config

    for rc in load_config(config).remotes.values():
        parts = urlsplit(rc.base_url or "")
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    raise BadInput(f"simulator --config {config}: no remote's base_url is on 127.0.0.1 with a port; give --port")


@command(PANEL, options=("ledger", "config", "operator"))
def console(
    s: Session,
    read_only: Annotated[bool, typer.Option("--read-only", help="Open the ledger read-only; no actions.")] = False,
    job: Annotated[str | None, typer.Option(
        "--job", help="Open this job's screen once the console is up (when it is in the ledger).")] = None,
    operation: OperationOpt = None,
) -> None:
    """Open the operator console (Textual) over a live ledger (--job: straight to one job, as a seat link does)."""
    from console.app import run_console

    if job is not None:
        check_link_part("--job", job)
    if operation is not None:
        check_link_part("--operation", operation)
    cfg = s.governed_config()
    s.check_opening()  # a damaged header, schema or head stops here, before the UI
    run_console(s.ledger, cfg, s.identity(cfg), read_only, config_path=s.config,
                start_job=(job, operation) if job is not None else None)


@command(PANEL, options=("ledger", "config"))
def serve(
    s: Session,
    listen: Annotated[str | None, typer.Option(
        "--listen", help="Loopback HOST:PORT to listen on (port 0: a free one), behind the proxy.")] = None,
    socket: Annotated[Path | None, typer.Option(
        "--socket", help="Unix socket to listen on (list it in [serve] trusted_proxies as unix:PATH).")] = None,
) -> None:
    """The browser seat: one console per browser connection, as the user an authenticating proxy names."""
    cfg = s.governed_config()
    if cfg.identity_source != "proxy":
        raise BadInput(f"serve: this config's [identity] source is {cfg.identity_source!r}; the browser seat "
                       "needs source = \"proxy\" with [serve] account, trusted_proxies and allowed_origins")
    account = os_account()
    if account != cfg.serve.account:
        raise BadInput(f"serve: runs only as the seat account [serve] account = {cfg.serve.account!r}, not as "
                       f"{account!r} (e.g. sudo -u {cfg.serve.account} reclaim serve ...)")
    if not cfg.serve.trusted_proxies or not cfg.serve.allowed_origins:
        raise BadInput("serve: [serve] trusted_proxies and allowed_origins must each name at least one entry")
    if (listen is None) == (socket is None):
        raise BadInput("serve: give exactly one of --listen 127.0.0.1:PORT or --socket /path/seat.sock")
    from console.serve import Seat, parse_listen, run

    host, port = parse_listen(listen) if listen is not None else (None, None)
    sock = socket.absolute() if socket is not None else None
    if sock is not None and f"unix:{sock}" not in cfg.serve.trusted_proxies:
        output.stderr.print(f"reclaim serve: note: unix:{sock} is not in [serve] trusted_proxies; every "
                            "request will be refused", markup=False, highlight=False)
    s.check_opening()
    seat = Seat(s.ledger.absolute(), s.config.absolute(), cfg, socket_path=sock)
    import asyncio

    def announce(line: str) -> None:
        output.line(line)
        sys.stdout.flush()

    try:
        asyncio.run(run(seat, host=host, port=port, socket_path=sock, announce=announce))
    except OSError as e:
        raise BadInput(f"serve: cannot listen on {listen or sock}: {e.strerror}") from None


@command(PANEL, options=())
def demo(
    folder: Annotated[Path, typer.Option("--dir", help="Where the demo writes its config, ledger and results.")] = Path(
        "demo"
    ),
    no_ui: Annotated[bool, typer.Option("--no-ui", help="Run headless for --seconds, then stop.")] = False,
    seconds: Annotated[float, typer.Option("--seconds", help="How long --no-ui runs.")] = 10.0,
    operator: Annotated[str, typer.Option("--operator", help="The console's seat: alice (triage) or bob.")] = "alice",
    rate: Annotated[float, typer.Option("--rate", help="New jobs per second.")] = 0.3,
    pg: Annotated[str | None, typer.Option("--pg", help="Put the ledger in this PostgreSQL database "
                                           "(a postgresql:// URL; `make demo-pg` starts a throwaway one).")] = None,
    workers: Annotated[int, typer.Option("--workers", help="Worker processes (the first also makes jobs).")] = 1,
    seat: Annotated[bool, typer.Option("--seat", help="Open the browser seat on the demo too (nginx with basic "
                                       "auth in front of `reclaim serve`; needs nginx).")] = False,
) -> None:
    """Start a simulator and a worker with a job generator, open the console; stop them on quit."""
    from console.demo import ledger_holders, run_demo
    from ledger import LedgerLocked

    within("--seconds", seconds, 0.1, 86400)
    within("--rate", rate, 0.01, 100)
    within("--workers", workers, 1, 16)
    if pg is not None and not is_url(pg):
        raise BadInput(f"--pg {pg!r}: not a postgresql:// URL")
    if seat and pg is not None:
        raise BadInput("demo: --seat opens the seat on the demo's SQLite ledger; leave out --pg")
    holders = ledger_holders(folder / "reclaim.db") if pg is None else []
    if holders:
        pid, argv = holders[0]
        more = f" and {len(holders) - 1} more process(es)" if len(holders) > 1 else ""
        raise LedgerLocked(
            f"demo: {folder / 'reclaim.db'} is open in process {pid} ({argv[:120]}){more}: a console, seat or "
            f"demo still uses it; quit it first, or start another demo beside it with --dir "
            f"{folder.name or 'demo'}-2; nothing was removed")
    for old in ("reclaim.db", "reclaim.db-wal", "reclaim.db-shm", "reclaim.db.outcomes") if pg is None else ():
        if (folder / old).exists():
            (folder / old).unlink()
            output.line(f"demo: removed the previous demo ledger {folder / old}; starting fresh")
    raise typer.Exit(run_demo(folder, ui=not no_ui, seconds=seconds, operator=operator, rate=rate, ledger_url=pg,
                              workers=workers, seat=seat))
