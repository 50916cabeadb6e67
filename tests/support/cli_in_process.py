"""Run one `reclaim` command inside the test process, as a subprocess run would see it.

`run_in_process(args, env, cwd, stdin=None)` invokes `console.cli.app` through typer's CliRunner with the
process environment replaced by `env` (exactly: nothing inherited), the working directory `cwd`, stdin `stdin`
(text or bytes; empty when None) and not a terminal, and the clock RECLAIM_TEST_NOW / RECLAIM_TEST_CLOCK_OFFSET ask for (as
tests/support/clocked_reclaim.py does). It returns `(rc, stdout, stderr)` with the exit code a shell would see:
the code of `typer.Exit` (so every LedgerError's `exit_code`), 2 for a usage error, 1 and the traceback
on stderr for an uncaught exception.

Everything a command sets for its whole process is put back afterwards: the environment, the working
directory, the process clock, the audit key, the redactor of printed text, the SIGINT/SIGTERM handlers,
and the width and colours of the CLI's two Rich consoles (COLUMNS of `env`, no colour, as on a pipe).

`process_boundary(args, env)` says why a command must run as a real process instead (None when it need
not): a long-running command (it serves, follows or installs signal handlers that act on the process),
a crash or pause point (it kills or stops its own process), or an argument that is not valid UTF-8 (it
only exists as argv bytes).
"""

from __future__ import annotations

import os
import signal
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from clocked_reclaim import clock_from_env

LONG_RUNNING = frozenset({"worker", "receiver", "simulator", "console", "serve", "demo"})
"""Commands that run until stopped: they keep a real process (signals, sockets, threads)."""
PROCESS_OPTIONS = frozenset({"--follow", "-f", "--serve", "--listen"})
"""Options that turn a command into one that runs until stopped."""
PROCESS_ENV = ("RECLAIM_CRASH_AT", "RECLAIM_PAUSE_AT")
"""Variables that make a command kill or stop its own process."""


def process_boundary(args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why `reclaim ARGS` in `env` must run as its own process, or None when it can run in this one."""
    words = [str(a) for a in args]
    command = next((w for w in words if not w.startswith("-")), None)
    if command in LONG_RUNNING:
        return f"{command} runs until stopped"
    if any(w.split("=", 1)[0] in PROCESS_OPTIONS for w in words):
        return "an option makes it run until stopped"
    if any(env.get(name) for name in PROCESS_ENV):
        return "a crash or pause point acts on the process"
    for w in words:
        try:
            w.encode("utf-8")
        except UnicodeEncodeError:
            return "an argument is not valid UTF-8 (argv bytes)"
    return None


def run_in_process(args: Sequence[str], env: Mapping[str, str], cwd: Path,
                   stdin: str | bytes | None = None) -> tuple[int, str, str]:
    """Run `reclaim ARGS` in this process with exactly `env`, `cwd` and `stdin`; returns (rc, stdout, stderr).

    Raises ValueError when `env` asks for a clock that is not a time or a number (as the launcher would).
    """
    from typer.testing import CliRunner

    from console import cli, output, sanitize
    from ledger import current_audit_key, use_audit_key
    from ledger.clock import process_clock, use_clock

    clock = clock_from_env(env)
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_clock = process_clock()
    saved_key = current_audit_key()
    saved_redactor = sanitize._redactor
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    consoles = (output.stdout, output.stderr)
    saved_consoles = [(c._width, c._color_system) for c in consoles]
    columns = env.get("COLUMNS", "80")
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        if clock is not None:
            use_clock(clock)
        for c in consoles:
            c._width = int(columns) if columns.isdigit() else None
            c._color_system = None
        result = CliRunner().invoke(cli.app, [str(a) for a in args], input=stdin, prog_name="reclaim",
                                    catch_exceptions=True)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        use_clock(saved_clock)
        use_audit_key(saved_key)
        sanitize.use_redactor(saved_redactor)
        for s, handler in saved_signals.items():
            signal.signal(s, handler)
        for c, (width, colors) in zip(consoles, saved_consoles, strict=True):
            c._width, c._color_system = width, colors
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit) and result.exc_info:
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return result.exit_code, result.stdout, stderr
