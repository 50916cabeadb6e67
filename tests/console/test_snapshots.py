"""Snapshots of the console over the deterministic demo ledger (ManualClock, 120x40)."""

from __future__ import annotations

from typing import Any

import pytest

from console.app import make_app
from console.fixtures import SCENE_OPERATOR, SCENE_SIZE, SCENES, Demo, scene_config, stage


@pytest.mark.parametrize("scene", SCENES)
def test_scene(scene: str, demo: Demo, snap_compare: Any) -> None:
    app = make_app(demo.ledger, scene_config(demo.config), SCENE_OPERATOR, clock=demo.clock)

    async def run_before(pilot: Any) -> None:
        await stage(pilot, scene, demo)

    assert snap_compare(app, terminal_size=SCENE_SIZE, run_before=run_before)
