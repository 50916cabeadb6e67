"""Runs the console in a fresh interpreter for tests/console/test_warm_up.py and prints one JSON line.

    python warm_child.py modules LEDGER CONFIG   the warm-up run to its end under run_test: what it imported
    python warm_child.py quit LEDGER CONFIG      `App.run(headless=True)` quit while the warm-up is held inside

A fresh interpreter, because the test process has imported google-genai long before (the demo ledger is built with
it). In `quit` mode the warm-up is held at its start by an event nobody sets: the app quits from there, and the
line says whether the warm-up had returned (it cannot have) when `App.run()` did.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any

import console.app
from console.app import ReclaimApp, make_app
from ledger.config import Config, load_config
from ledger.remotes import ADAPTER_MODULES
from ledger.worker import RemoteCache

BOUND = 60.0
"""Seconds any wait here may take before the child gives up (the test then fails on its output)."""


def sdk_modules() -> dict[str, bool]:
    """Which SDK and adapter modules this interpreter has imported."""
    names = ("google.genai", *ADAPTER_MODULES.values())
    return {name: name in sys.modules for name in names}


async def warm_to_the_end(app: ReclaimApp) -> dict[str, Any]:
    """Run the console until its warm-up finished; what it returned and what is imported then."""
    async with app.run_test(size=(120, 40)) as pilot:
        start = time.monotonic()
        while app.warming is None or not app.warming.is_finished:
            if time.monotonic() - start > BOUND:
                raise SystemExit("the warm-up did not finish")
            await pilot.pause(0.02)
        return {"state": app.warming.state.name, "kinds": list(app.warming.result or ()), "after": sdk_modules()}


def quit_while_warming(ledger: str, config: Config) -> dict[str, Any]:
    """Quit `App.run()` while the warm-up is held at its start; whether the warm-up had returned by then."""
    entered, never, returned = threading.Event(), threading.Event(), threading.Event()
    real = console.app.warm_remotes

    def held(cfg: Config, remotes: RemoteCache) -> tuple[str, ...]:
        entered.set()
        app.call_from_thread(app.exit)
        never.wait(BOUND)
        try:
            return real(cfg, remotes)
        finally:
            returned.set()

    console.app.warm_remotes = held  # type: ignore[assignment]
    app = make_app(ledger, config, "alice")
    app.run(headless=True, size=(120, 40))
    warming = app.warming
    return {"entered": entered.is_set(), "returned": returned.is_set(),
            "state": warming.state.name if warming is not None else None}


def main() -> None:
    mode, ledger, config_path = sys.argv[1:4]
    config = load_config(config_path)
    before = sdk_modules()
    if mode == "modules":
        out = asyncio.run(warm_to_the_end(make_app(ledger, config, "alice")))
    else:
        out = quit_while_warming(ledger, config)
    print(json.dumps({"before": before, **out}), flush=True)


if __name__ == "__main__":
    main()
