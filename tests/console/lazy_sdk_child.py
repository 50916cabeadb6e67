"""Runs the console in a fresh interpreter for tests/console/test_lazy_sdk.py and prints one JSON line.

    python lazy_sdk_child.py LEDGER CONFIG JOB_ID OPERATION NOW

Under Pilot, as bob on a ManualClock at NOW: the overview's first paint, a switch to the held group, the held job's
screen, its triage screen, then `r` (a query the remote answers). After each step the line says whether
google.genai is imported; it also says on which thread it was first imported. A fresh interpreter, because the test
process imported google-genai long before (building its ledger sends through the SDK). tests/support must be on
PYTHONPATH (the test puts it there).
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from console_helpers import wait_loaded, wait_until

from console.app import make_app
from console.bindings import GROUP_ORDER
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from ledger.clock import ManualClock
from ledger.config import load_config

SDK = "google.genai"
BOUND = 60.0
"""Seconds any wait here may take before the child gives up (the test then fails on its output)."""


class ImportWatch(importlib.abc.MetaPathFinder):
    """Notes the thread that first looks for the SDK's module; finds nothing itself (the usual finders import it)."""

    def __init__(self) -> None:
        self.thread: str | None = None
        self.on_main: bool | None = None

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if fullname == SDK and self.thread is None:
            self.thread = threading.current_thread().name
            self.on_main = threading.current_thread() is threading.main_thread()


async def walk(ledger: str, config_path: str, job_id: str, now: float, watch: ImportWatch) -> dict[str, Any]:
    """Drive the console through the steps; whether the SDK was imported after each."""
    app = make_app(ledger, load_config(config_path), "bob", clock=ManualClock(now), config_path=config_path)
    seen: dict[str, Any] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen, timeout=BOUND)
        seen["overview"] = SDK in sys.modules
        await pilot.press(str(GROUP_ORDER.index("held") + 1))
        await wait_loaded(pilot, JobListScreen, timeout=BOUND)
        seen["group"] = SDK in sys.modules
        await pilot.press("o")
        await wait_loaded(pilot, OverviewScreen, timeout=BOUND)
        await pilot.press("enter")  # the held job at the cursor
        await wait_loaded(pilot, JobScreen, timeout=BOUND)
        assert isinstance(app.screen, JobScreen) and app.screen.key.job_id == job_id
        seen["job"] = SDK in sys.modules
        seen["remote_section"] = str(app.screen.query_one("#job-remote").content)
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen, timeout=BOUND)
        seen["triage"] = SDK in sys.modules
        triage = app.screen
        assert isinstance(triage, TriageScreen)
        await pilot.press("r")  # a query: a read of the remote, no confirmation
        await wait_until(pilot, lambda: "remote says" in triage.feedback_text, timeout=BOUND, what="the answer")
        seen["answer"] = triage.feedback_text
        seen["query"] = SDK in sys.modules
    return seen


def main() -> None:
    ledger, config_path, job_id, _operation, now = sys.argv[1:6]
    watch = ImportWatch()
    sys.meta_path.insert(0, watch)
    before = SDK in sys.modules
    seen = asyncio.run(walk(ledger, config_path, job_id, float(now), watch))
    print(json.dumps({"before": before, **seen, "imported_on": watch.thread, "on_main_thread": watch.on_main}),
          flush=True)


if __name__ == "__main__":
    main()
