"""The screenshots' scenes: which seat, terminal size and screen of the console, over the demo at a moment.

`scripts/export_screenshots.py` draws each of SHOTS over `console.demo_moment.build_moment()`; the test of
that path drives the same scenes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.demo_moment import DemoMoment
from console.fixtures import _loaded, _until

REASON = "alice found it never reached Gemini"
"""What bob types as the release's reason in the triage-confirm scene."""


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


async def stage(pilot: Any, scene: str, moment: DemoMoment) -> None:
    """Drive a running console over `moment` to `scene`, waiting on conditions, never on time.

    job, triage and triage-confirm are on the held job alice recorded a finding for; triage-confirm
    types REASON and presses the release key (bob's seat: the confirmation with its preview)."""
    from textual.widgets import Input

    from console.screens.confirm import ConfirmScreen
    from console.screens.job import JobScreen
    from console.screens.jobs import JobListScreen
    from console.screens.overview import OverviewScreen
    from console.screens.quotas import QuotasScreen
    from console.screens.triage import TriageScreen

    app = pilot.app
    await _loaded(pilot, OverviewScreen)
    if scene == "overview":
        return
    if scene == "quotas":
        await pilot.press("u")
        await _loaded(pilot, QuotasScreen)
        return
    if scene == "jobs":
        await pilot.press("j")
        await _loaded(pilot, JobListScreen)
        return
    app.open_job(moment.jobs["found"])
    await _loaded(pilot, JobScreen)
    if scene == "job":
        return
    await pilot.press("t")
    await _loaded(pilot, TriageScreen)
    if scene == "triage":
        return
    if scene != "triage-confirm":
        raise ValueError(f"unknown scene {scene!r}")
    app.screen.query_one("#decision-reason", Input).value = REASON
    await pilot.press("e")
    await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.focused is not None
                 and app.focused.id == "cancel")
    await pilot.pause()
