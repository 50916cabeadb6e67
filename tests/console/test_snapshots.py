"""Snapshots of the console over the deterministic demo ledger (ManualClock; 120x40, and 80x24 and 160x48)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from console_demo import Demo
from console_helpers import wait_loaded
from console_scenes import SCENE_OPERATOR, SCENE_REASON, SCENE_SIZE, SCENES, scene_config, stage

from console.app import make_app
from console.live import Follower, Pulse


def _pinned(pulse: Pulse | None) -> Pulse | None:
    return None if pulse is None else dataclasses.replace(pulse, head_hash="5e1ec7ed" * 8)


@pytest.mark.slow
@pytest.mark.parametrize("scene", SCENES)
def test_scene(scene: str, demo: Demo, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The audit head hashes events that name this run's temporary folders: pin the head the header shows.
    for name in ("poll", "_reload"):
        read = getattr(Follower, name)
        monkeypatch.setattr(Follower, name, lambda self, read=read: _pinned(read(self)))
    app = make_app(demo.ledger, scene_config(demo.config), SCENE_OPERATOR, clock=demo.clock)

    async def run_before(pilot: Any) -> None:
        await stage(pilot, scene, demo.jobs["held_reset"], SCENE_REASON)

    assert snap_compare(app, terminal_size=SCENE_SIZE, run_before=run_before)


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("scene", ["overview", "triage"])
def test_scene_sized(scene: str, size: tuple[int, int], demo: Demo, snap_compare: Any,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The overview and triage at the smallest supported terminal and a large one."""
    for name in ("poll", "_reload"):
        read = getattr(Follower, name)
        monkeypatch.setattr(Follower, name, lambda self, read=read: _pinned(read(self)))
    app = make_app(demo.ledger, scene_config(demo.config), SCENE_OPERATOR, clock=demo.clock)

    async def run_before(pilot: Any) -> None:
        await stage(pilot, scene, demo.jobs["held_reset"], SCENE_REASON)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.slow
@pytest.mark.parametrize("scene", ["jobs", "help"])
def test_scene_80x24(scene: str, demo: Demo, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The held list (with its stage column) and the help at the smallest supported terminal."""
    for name in ("poll", "_reload"):
        read = getattr(Follower, name)
        monkeypatch.setattr(Follower, name, lambda self, read=read: _pinned(read(self)))
    app = make_app(demo.ledger, scene_config(demo.config), SCENE_OPERATOR, clock=demo.clock)

    async def run_before(pilot: Any) -> None:
        from console.screens.help import HelpScreen
        from console.screens.jobs import JobListScreen

        await stage(pilot, "overview", demo.jobs["held_reset"], SCENE_REASON)
        await pilot.press("question_mark" if scene == "help" else "j")
        if scene == "jobs":
            await wait_loaded(pilot, JobListScreen)
        else:
            await pilot.pause()
            assert isinstance(pilot.app.screen, HelpScreen)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
