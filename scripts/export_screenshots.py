"""Write SVG screenshots of the console into screenshots/ from `make demo`'s own data at a known moment.

    python scripts/export_screenshots.py [--out screenshots]

Builds the demo's ledger as it is two minutes in, after alice recorded a finding on the first held job
(tests/support/demo_moment.py, build_moment: the demo's config, job generator, fault rates and seed, real worker
passes and SDK against a loopback simulator, a fixed clock), then draws each of SHOTS
(tests/support/console_scenes.py)
and saves <name>.svg. The clock is pinned in-process (ledger.clock.use_clock), so a rerun draws the same
pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from console_scenes import REASON, SCENE_URL, SHOTS, Shot, scene_config, stage  # noqa: E402
from demo_moment import DemoMoment, build_moment, start_simulator  # noqa: E402

from console.app import make_app  # noqa: E402
from console.live import Follower, Pulse  # noqa: E402
from ledger.clock import ManualClock, use_clock  # noqa: E402
from ledger.simulator import Simulator  # noqa: E402

PINNED_HEAD = "5e1ec7ed" * 8
"""The audit head the header shows: the real one hashes events naming this run's temporary folder."""


def _pin_head() -> None:
    for name in ("poll", "_reload"):
        read = getattr(Follower, name)

        def pinned(self: Follower, read: object = read) -> Pulse | None:
            pulse = read(self)  # type: ignore[operator]
            return None if pulse is None else dataclasses.replace(pulse, head_hash=PINNED_HEAD)

        setattr(Follower, name, pinned)


async def shoot(moment: DemoMoment, shot: Shot, out: Path) -> Path:
    """Run the console headless as `shot.operator`, drive it to `shot.scene`, save the SVG."""
    clock = ManualClock(moment.clock.now())
    use_clock(clock)
    app = make_app(moment.ledger, scene_config(moment.config), shot.operator, clock=clock,
                   config_path=moment.config_path)
    target = out / f"{shot.name}.svg"
    async with app.run_test(size=shot.size) as pilot:
        await stage(pilot, shot.scene, moment.jobs["found"], REASON)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        app.save_screenshot(target.name, str(out))
    return target


def _simulator() -> Simulator:
    """The demo's simulator, started, on SCENE_URL's port when it is free, so the URLs stored in events (a query's
    "look in the remote console at ...") match the ones drawn; else on a free port, with a warning."""
    port = urlsplit(SCENE_URL).port or 0
    try:
        return start_simulator(port=port).start()
    except OSError as e:
        print(f"warning: port {port} is taken ({e}); URLs inside events will show another port", file=sys.stderr)
        return start_simulator().start()


def main(argv: list[str] | None = None) -> int:
    """Build the demo at its moment and write one SVG per shot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots", help="folder for the SVG files")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    _pin_head()
    with tempfile.TemporaryDirectory() as tmp, _simulator() as sim:
        moment = build_moment(Path(tmp) / "demo", sim)
        cwd = os.getcwd()
        os.chdir(tmp)  # the header shows the ledger path relative to here: "demo/reclaim.db", as in `make demo`
        try:
            for shot in SHOTS:
                print(f"wrote {asyncio.run(shoot(moment, shot, out))}")
        finally:
            os.chdir(cwd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
