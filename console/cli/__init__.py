"""The `reclaim` command line. Every command calls ledger functions; none holds SQL of its own.

`common` holds the app and what every command shares; each other module adds one group of commands to it.
`console.cli.app` is the app with every group's commands; `reclaim console` (the entry point, `main`) loads only
the group that holds it, so the operator console starts without importing the other commands' modules.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

GROUPS = ("setup", "sending", "jobs", "triage", "health", "remotes", "seats")
"""The command modules, in the order `reclaim --help` lists their commands; importing one adds its commands."""
ALONE = {"console": "seats"}
"""Commands the entry point runs with their own group's module alone (`reclaim console ...`): the command's
options, help and behaviour are the same as with every group loaded."""

__all__ = ["app", "main"]


def load(groups: tuple[str, ...] = GROUPS) -> typer.Typer:
    """The app with the commands of `groups` added (importing a group's module adds its commands, once)."""
    for group in groups:
        importlib.import_module(f"console.cli.{group}")
    from console.cli.common import app

    return app


def __getattr__(name: str) -> Any:
    """`app`: every group's commands loaded on first use."""
    if name == "app":
        loaded = load()
        globals()["app"] = loaded
        return loaded
    raise AttributeError(f"module 'console.cli' has no attribute {name!r}")


def main() -> None:
    """Entry point of the `reclaim` script."""
    args = sys.argv[1:]
    group = ALONE.get(args[0]) if args else None
    (load((group,)) if group is not None else load())()
