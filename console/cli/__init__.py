"""The `reclaim` command line. Every command calls ledger functions; none holds SQL of its own.

`common` holds the app and what every command shares; each other module adds one group of commands to it.
"""

from __future__ import annotations

import importlib

from console.cli.common import app

GROUPS = ("setup", "sending", "jobs", "triage", "health", "remotes", "seats")
"""The command modules, in the order `reclaim --help` lists their commands; importing one adds its commands."""
for _group in GROUPS:
    importlib.import_module(f"console.cli.{_group}")

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the `reclaim` script."""
    app()
