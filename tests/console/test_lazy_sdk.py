"""The console imports a remote's SDK only when a remote call is about to happen, and then off the UI thread.

The first paint, a switch to a group, a held job's screen (with what its remote can answer) and its triage screen
import no google-genai; a query from the triage screen imports it in the query's worker and the simulator
answers it. Run in a fresh interpreter (lazy_sdk_child.py): this process imported the SDK to build the ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from child_env import inherited_env
from console_demo import held_with_handle
from ledger_reads import fresh

from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import events as events_store

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("lazy_sdk_child.py")
T = 1_796_115_600.0  # 2026-12-01T09:00:00Z


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """A simulator of this test's own: its faults and counts are this test's alone."""
    with Simulator().start() as s:
        yield s


def run_child(ledger: Path, config: Path, key: JobKey) -> dict[str, Any]:
    """Run lazy_sdk_child.py in a fresh interpreter (bounded); its JSON line."""
    path = [str(ROOT), str(ROOT / "tests" / "support"), os.environ.get("PYTHONPATH", "")]
    env = {**inherited_env(), "PYTHONPATH": os.pathsep.join(filter(None, path))}
    out = subprocess.run([sys.executable, str(CHILD), str(ledger), str(config), key.job_id, key.operation, str(T)],
                         capture_output=True, text=True, timeout=180, env=env, cwd=ledger.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_no_sdk_until_a_query_asks_the_remote_and_then_off_the_ui_thread(tmp_path: Path, sim: Simulator) -> None:
    ledger, config, _, key = held_with_handle(tmp_path, sim, job_id="asked lazily 2026-12-01", target="blog/lazy")
    gets = sim.count("get")
    said = run_child(ledger, config, key)
    assert said["before"] is False  # the console's modules import no SDK
    assert said["overview"] is False and said["group"] is False
    assert said["job"] is False and said["triage"] is False
    # What the remote can answer is on the job screen all the same, from the config.
    assert said["remote_section"].startswith("remote gemini (gemini): can look a job up by its handle")
    assert "a query asks the remote about it" in said["remote_section"]
    # The query imported the SDK, in its worker, and the simulator answered it.
    assert said["query"] is True
    assert said["imported_on"] is not None and said["on_main_thread"] is False
    assert "remote says" in said["answer"]
    assert sim.count("get") > gets
    with fresh(ledger) as c:  # and the query is recorded in the ledger, read back from a new connection
        assert "remote_query" in [e.kind for e in events_store.job_events(c, key)]
