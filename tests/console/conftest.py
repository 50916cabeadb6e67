"""Fixtures for the console tests: a loopback simulator, the deterministic demo ledger, a per-test copy."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import textual._wait
from console_demo import Demo, build_demo

from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.simulator import Simulator

# Pilot waits after every key for the app to go idle: it sleeps in steps of 20 ms until a step used less than
# 1 ms of CPU. Steps of 5 ms keep the same test (under 5 % of a step busy) and make a typed word four times
# cheaper to wait out; Textual reads both names at each call.
textual._wait.SLEEP_GRANULARITY = 0.005
textual._wait.SLEEP_IDLE = textual._wait.SLEEP_GRANULARITY / 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def console_sim() -> Iterator[Simulator]:
    """One loopback Gemini simulator for the session (tests count calls per idem key, which is unique per job)."""
    with Simulator().start() as s:
        yield s


@pytest.fixture(scope="session")
def demo_sim() -> Iterator[Simulator]:
    """The demo ledger's own simulator (fresh, so its interaction ids are the same on every run)."""
    with Simulator().start() as s:
        yield s


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, demo_sim: Simulator) -> Demo:
    """The deterministic demo ledger, built once."""
    return build_demo(tmp_path_factory.mktemp("demo"), demo_sim)


@pytest.fixture
def demo(demo_template: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    """A private copy of the demo ledger in tmp_path (the working folder, so the header path is stable)."""
    for name in ("ledger.db", "reclaim.toml"):
        shutil.copy(demo_template.ledger.parent / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECLAIM_CONFIG", raising=False)
    config_path = tmp_path / "reclaim.toml"
    return Demo(
        ledger=tmp_path / "ledger.db", config_path=config_path, config=load_config(config_path),
        clock=ManualClock(demo_template.clock.now()), jobs=dict(demo_template.jobs),
    )
