"""Commands that do not talk to a remote never import the Gemini SDK (nor pydantic through typer):
`reclaim status` during an incident starts in a fraction of a second. (Start-up time itself is a
benchmark figure, `make bench` figure 7, never a wall-clock assertion here.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.simulator import Simulator

OP = "article.generate"


def _imported(args: list[str], env: dict[str, str], cwd: Path) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "console", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("args", [["status"], ["show", "fast-1"], ["jobs", "held"], ["events"], ["verify"],
                                  ["quota"], ["notifications"]], ids=lambda a: a[0])
def test_a_command_that_only_reads_never_loads_the_sdk(
    args: list[str], sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    tmp_path: Path,
) -> None:
    assert run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", "fast-1").rc == 0
    env = {"RECLAIM_LEDGER": str(ledger_path), "RECLAIM_CONFIG": str(config_path), "RECLAIM_OPERATOR": "bob",
           "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    loaded = _imported(args, env, tmp_path)
    assert "console.cli" in loaded  # the measurement saw the CLI load
    assert not {m for m in loaded if m == "google.genai" or m.startswith("google.genai.")}
    assert "pydantic" not in loaded
    assert "textual" not in loaded


@pytest.mark.slow
def test_a_command_that_sends_does_load_the_sdk(
    sim: Simulator, ledger_path: Path, config_path: Path, tmp_path: Path,
) -> None:
    """The control: the same measurement does see the SDK where it is needed."""
    env = {"RECLAIM_LEDGER": str(ledger_path), "RECLAIM_CONFIG": str(config_path), "RECLAIM_OPERATOR": "scheduler",
           "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    loaded = _imported(["submit", OP, "--payload", '{"input": "y"}', "--job-id", "fast-2"], env, tmp_path)
    assert "google.genai" in loaded
