"""Write SVG screenshots of the console into screenshots/ from the deterministic demo ledger.

    python scripts/export_screenshots.py [--out screenshots]

Builds the demo ledger (console.fixtures.build_demo) in a temporary folder against a loopback simulator,
then drives the console to each scene at 120x40 and saves overview.svg, job.svg, triage.svg,
triage-confirm.svg and quotas.svg. Same ledger, clock and scenes as the snapshot tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from console.app import make_app  # noqa: E402
from console.fixtures import SCENE_OPERATOR, SCENE_SIZE, SCENES, Demo, build_demo, scene_config, stage  # noqa: E402
from ledger.simulator import Simulator  # noqa: E402


async def shoot(demo: Demo, scene: str, out: Path) -> Path:
    """Run the console headless, drive it to `scene`, save the SVG."""
    app = make_app(demo.ledger, scene_config(demo.config), SCENE_OPERATOR, clock=demo.clock)
    target = out / f"{scene}.svg"
    async with app.run_test(size=SCENE_SIZE) as pilot:
        await stage(pilot, scene, demo)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        app.save_screenshot(target.name, str(out))
    return target


def main(argv: list[str] | None = None) -> int:
    """Build the demo ledger and write one SVG per scene."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots", help="folder for the SVG files")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Simulator().start() as sim:
        demo = build_demo(Path(tmp), sim)
        cwd = os.getcwd()
        os.chdir(tmp)  # the header shows the ledger path relative to here: "ledger.db"
        try:
            for scene in SCENES:
                print(f"wrote {asyncio.run(shoot(demo, scene, out))}")
        finally:
            os.chdir(cwd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
