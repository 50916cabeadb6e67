"""The console's scenes: the screens the snapshot tests and the screenshots drive a running console to.

The snapshot tests draw SCENES over the deterministic demo ledger (console_demo.py); `scripts/export_screenshots.py`
draws each of SHOTS over `make demo`'s ledger at its moment (demo_moment.py), and the test of that path drives
the same scenes. Both reach a scene by `stage`, waiting on conditions, never on time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from console_helpers import wait_loaded, wait_until

from ledger import Config, JobKey

SCENES = ("overview", "job", "triage", "triage-confirm", "quotas")
"""The snapshot tests' scenes, drawn as SCENE_OPERATOR at SCENE_SIZE."""
SCENE_OPERATOR = "carol"
SCENE_SIZE = (120, 40)
SCENE_REASON = "bob found it never reached Gemini"
"""What the snapshot tests' triage-confirm scene types as the release's reason."""

REASON = "alice found it never reached Gemini"
"""What bob types as the release's reason in the screenshots' triage-confirm scene."""


@dataclass(frozen=True)
class Shot:
    """One picture: its file name (without .svg), the seat, the terminal size and the scene drawn."""

    name: str
    operator: str
    size: tuple[int, int]
    scene: str


SHOTS = (
    Shot("overview", "alice", (120, 40), "overview"),
    Shot("overview-80x24", "alice", (80, 24), "overview"),
    Shot("jobs", "alice", (120, 40), "jobs"),
    Shot("job", "alice", (120, 40), "job"),
    Shot("triage", "alice", (120, 40), "triage"),
    Shot("triage-confirm", "bob", (120, 40), "triage-confirm"),
    Shot("quotas", "alice", (120, 40), "quotas"),
)
"""The screenshots: job, triage and triage-confirm are on the held job alice recorded a finding for."""

STAGE_TIMEOUT = 15.0
"""Seconds `stage` waits for each screen: a screenshot run draws on a loaded machine."""


async def stage(pilot: Any, scene: str, job: JobKey, reason: str) -> None:
    """Drive a running console to `scene`: overview, quotas, jobs (the held list), or job, triage and
    triage-confirm on `job`; triage-confirm types `reason` and presses the release key."""
    from textual.widgets import Input

    from console.screens.confirm import ConfirmScreen
    from console.screens.job import JobScreen
    from console.screens.jobs import JobListScreen
    from console.screens.overview import OverviewScreen
    from console.screens.quotas import QuotasScreen
    from console.screens.triage import TriageScreen

    app = pilot.app
    await wait_loaded(pilot, OverviewScreen, timeout=STAGE_TIMEOUT)
    if scene == "overview":
        return
    if scene == "quotas":
        await pilot.press("u")
        await wait_loaded(pilot, QuotasScreen, timeout=STAGE_TIMEOUT)
        return
    if scene == "jobs":
        await pilot.press("j")
        await wait_loaded(pilot, JobListScreen, timeout=STAGE_TIMEOUT)
        return
    app.open_job(job)
    await wait_loaded(pilot, JobScreen, timeout=STAGE_TIMEOUT)
    if scene == "job":
        return
    await pilot.press("t")
    await wait_loaded(pilot, TriageScreen, timeout=STAGE_TIMEOUT)
    if scene == "triage":
        return
    if scene != "triage-confirm":
        raise ValueError(f"unknown scene {scene!r}")
    app.screen.query_one("#decision-reason", Input).value = reason
    await pilot.press("e")
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.focused is not None
                     and app.focused.id == "cancel", STAGE_TIMEOUT, "the confirmation, Cancel focused")
    await pilot.pause()


SCENE_URL = "http://127.0.0.1:8765"
"""The simulator address pictures show (the README's): the fixture's own simulator listens on a free port."""


def scene_config(config: Config) -> Config:
    """`config` with every remote pointed at SCENE_URL instead of the fixture simulator's free port, so
    pictures do not change with the port. Only for drawing: the scenes never call the remote."""
    netloc = urlsplit(SCENE_URL).netloc

    def fixed(url: str | None) -> str | None:
        return urlunsplit(urlsplit(url)._replace(netloc=netloc)) if url else url

    remotes = {
        name: dataclasses.replace(rc, base_url=fixed(rc.base_url), url=fixed(rc.url),
                                  lookup_url=fixed(rc.lookup_url))
        for name, rc in config.remotes.items()
    }
    return dataclasses.replace(config, remotes=remotes)
