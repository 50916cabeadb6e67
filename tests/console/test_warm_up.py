"""The console warms its remotes up once the overview has drawn: the SDK imported and the adapters built off the UI
thread, no request sent, keys handled meanwhile, quitting not held up by it, and nothing imported for a config
without a gemini remote.

The job screen's own worker still builds the remote when the warm-up has not got to it (the warm-up is held at its
start by an event in these tests, so "while it runs" is a fact, not a race).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_demo import Demo, write_config
from console_helpers import wait_loaded, wait_until
from textual.worker import WorkerState

import console.app
from console.app import ReclaimApp, make_app
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from ledger.config import Config, load_config
from ledger.db import create_ledger
from ledger.remotes import remote_for
from ledger.remotes.base import Remote
from ledger.simulator import Simulator
from ledger.worker import RemoteCache

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("warm_child.py")

HTTP_ONLY = """\
timezone = "UTC"

[identity]
source = "declared"

[operators]
alice = ["triage"]

[remotes.storage]
kind = "http"
url = "{url}/cleanup"
lookup_url = "{url}/cleanup/{{handle}}?key={{idem_key}}"

[operations."storage.cleanup"]
remote = "storage"
daily_quota = 10
"""


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """A simulator of this test's own: its request count starts at 0 and only this test's console can add to it."""
    with Simulator().start() as s:
        yield s


def counted_app(demo: Demo, sim: Simulator) -> tuple[ReclaimApp, list[str]]:
    """The demo ledger (two operations on one gemini remote) with its remote on `sim`, and the list of the remotes
    its adapter factory builds, in order."""
    folder = demo.ledger.parent / "warm"
    folder.mkdir()
    config = load_config(write_config(folder, sim.url, demo=True))
    app = make_app(demo.ledger, config, "bob", clock=demo.clock)
    built: list[str] = []

    def build(cfg: Config, operation: str) -> Remote:
        built.append(cfg.operations[operation].remote)
        return remote_for(cfg, operation)

    app.remotes.factory = build
    return app, built


def remote_section(app: ReclaimApp) -> str:
    return str(app.screen.query_one("#job-remote").content)


def finished(app: ReclaimApp) -> bool:
    return app.warming is not None and app.warming.is_finished


async def test_warm_up_builds_the_remote_after_the_first_paint_and_the_job_screen_uses_it(
    demo: Demo, sim: Simulator,
) -> None:
    app, built = counted_app(demo, sim)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: finished(app), timeout=60, what="the warm-up to finish")
        assert app.warming is not None and app.warming.state == WorkerState.SUCCESS
        assert app.warming.result == ("gemini",)
        assert built == ["gemini"]  # one adapter for the remote both operations use
        assert sim.count(None) == 0  # built, not asked: no request reached the remote
        await pilot.press("enter")  # the held job at the cursor
        await wait_loaded(pilot, JobScreen)
        assert remote_section(app).startswith("remote gemini (gemini): can look a job up by its handle")
        assert built == ["gemini"]  # the job screen found the warmed adapter
    assert sim.count(None) == 0


@pytest.mark.slow
async def test_keys_work_and_the_job_screen_builds_its_remote_while_the_warm_up_is_held(
    demo: Demo, sim: Simulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, built = counted_app(demo, sim)
    entered, gate = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}
    real = console.app.warm_remotes

    def held(config: Config, remotes: RemoteCache) -> tuple[str, ...]:
        screen = app.screen_stack[1] if len(app.screen_stack) > 1 else None
        seen["overview drawn"] = isinstance(screen, OverviewScreen) and screen.loaded
        entered.set()
        gate.wait(60)
        return real(config, remotes)

    monkeypatch.setattr(console.app, "warm_remotes", held)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, entered.is_set, timeout=30, what="the warm-up to start")
            assert seen["overview drawn"] is True  # it started after the overview drew its read
            assert app.warming is not None and app.warming.state == WorkerState.RUNNING
            await pilot.press("enter")  # a key while the warm-up runs: the held job at the cursor opens
            await wait_loaded(pilot, JobScreen, timeout=60)  # ... and its own worker built the remote
            assert remote_section(app).startswith("remote gemini (gemini)")
            assert app.warming.state == WorkerState.RUNNING and not gate.is_set()
            assert built == ["gemini"]
            gate.set()
            await wait_until(pilot, lambda: finished(app), timeout=60, what="the warm-up to finish")
            assert app.warming.state == WorkerState.SUCCESS and app.warming.result == ("gemini",)
            assert built == ["gemini"]  # the warm-up found the job screen's adapter cached
        assert sim.count(None) == 0
    finally:
        gate.set()


async def test_exit_while_the_warm_up_is_held_cancels_it_and_returns(
    demo: Demo, sim: Simulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under run_test the loop outlives the app, so this shows the worker cancelled and `app.exit()` returning;
    that `App.run()` itself does not join the warm-up is shown in a fresh interpreter below."""
    app, _ = counted_app(demo, sim)
    entered, gate, returned = threading.Event(), threading.Event(), threading.Event()
    real = console.app.warm_remotes

    def held(config: Config, remotes: RemoteCache) -> tuple[str, ...]:
        entered.set()
        gate.wait(60)
        try:
            return real(config, remotes)
        finally:
            returned.set()

    monkeypatch.setattr(console.app, "warm_remotes", held)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, entered.is_set, timeout=30, what="the warm-up to start")
            app.exit()
        assert not returned.is_set()  # the app is gone; the warm-up is still held where it was
        assert app.warming is not None and app.warming.state == WorkerState.CANCELLED
    finally:
        gate.set()


def run_child(mode: str, ledger: Path, config: Path) -> dict[str, Any]:
    """Run warm_child.py in a fresh interpreter (bounded); its JSON line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, str(CHILD), mode, str(ledger), str(config)], capture_output=True,
                         text=True, timeout=120, env=env, cwd=ledger.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["http", "gemini"])
def test_the_warm_up_imports_only_the_sdk_of_the_kinds_configured(tmp_path: Path, sim: Simulator, kind: str) -> None:
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    if kind == "http":
        config = tmp_path / "reclaim.toml"
        config.write_text(HTTP_ONLY.format(url=sim.url), encoding="utf-8")
    else:
        config = write_config(tmp_path, sim.url)
    said = run_child("modules", ledger, config)
    assert said["before"]["google.genai"] is False  # a fresh interpreter: the console itself imports no SDK
    assert said["state"] == "SUCCESS" and said["kinds"] == [kind]
    assert said["after"]["google.genai"] is (kind == "gemini")
    assert said["after"]["ledger.remotes.gemini"] is (kind == "gemini")
    assert said["after"][f"ledger.remotes.{kind}"] is True
    assert sim.count(None) == 0


def test_app_run_returns_while_the_warm_up_is_held(tmp_path: Path, sim: Simulator) -> None:
    """`App.run()` (asyncio.run, which joins the default executor's threads) quits while the warm-up is held."""
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    said = run_child("quit", ledger, write_config(tmp_path, sim.url))  # bounded: a run that waited would time out
    assert said["entered"] is True and said["returned"] is False
    assert said["state"] == "CANCELLED"
