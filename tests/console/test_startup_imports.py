"""`reclaim console` imports what its first frame shows and no more: the overview's screen and widgets, not the other
screens (each is imported when first shown), not the worker's remote adapters (built on the first action that asks a
remote), and of the command line only the module that holds `console`. Checked in fresh interpreters, by what is in
sys.modules; start-up time itself is measured by scripts/bench_console.py, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from child_env import inherited_env

ROOT = Path(__file__).resolve().parents[2]
LATER = ["console.screens.jobs", "console.screens.job", "console.screens.triage", "console.screens.report",
         "console.screens.evidence", "console.screens.notifications", "console.screens.quotas",
         "console.screens.help", "console.screens.command", "console.screens.pick", "ledger.worker"]
OTHER_COMMANDS = ["console.cli.setup", "console.cli.sending", "console.cli.jobs", "console.cli.triage",
                  "console.cli.health", "console.cli.remotes"]


def _loaded(code: str, *argv: str) -> tuple[list[str], str]:
    """Run `code` in a fresh interpreter (argv after it); the modules it left loaded and what it printed."""
    wrapped = ("import json, sys\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines())
               + "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", wrapped, *argv], cwd=ROOT, env=inherited_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stderr.strip().splitlines()[-1]), done.stdout


def test_the_console_app_imports_only_the_overview_screen() -> None:
    loaded, _ = _loaded("import console.app")
    assert "console.screens.overview" in loaded
    assert not [m for m in LATER if m in loaded]


def test_reclaim_console_loads_only_its_own_commands_module() -> None:
    loaded, out = _loaded("from console.cli import main\nmain()", "console", "--help")
    assert "console.cli.seats" in loaded
    assert not [m for m in OTHER_COMMANDS if m in loaded]
    assert "--read-only" in out and "--job" in out


def test_the_app_and_every_other_command_still_have_every_group() -> None:
    loaded, out = _loaded("from console.cli import main\nmain()", "--help")
    assert not [m for m in OTHER_COMMANDS if m not in loaded]
    assert "console" in out and "status" in out
    loaded, _ = _loaded("from console.cli import app")
    assert not [m for m in OTHER_COMMANDS if m not in loaded]
