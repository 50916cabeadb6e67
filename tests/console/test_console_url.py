"""The remote-console URL of a held job: shown whole (folded, never cut) on the job and triage screens at 80x24 and
160x48, copied whole by its key, sanitised; `reclaim show` prints it whole. A key pressed while the job is still
being read waits and runs when the read lands."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from console_demo import ARTICLE, write_config
from console_helpers import screen_text, wait_loaded, wait_until
from test_triage import T
from textual.pilot import Pilot

from console.app import ReclaimApp, make_app
from console.screens.job import JobScreen
from console.screens.overview import OverviewScreen
from console.screens.triage import TriageScreen
from console.widgets.console_link import ConsoleLink
from ledger import Ledger
from ledger.clock import ManualClock
from ledger.config import Config, load_config
from ledger.db import connect, create_ledger
from ledger.model import JobKey, idem_key
from ledger.remotes import console_url_for
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, submit_now

pytestmark = pytest.mark.anyio


def held_ledger(folder: Path, sim: Simulator) -> tuple[Path, Config, ManualClock, JobKey]:
    """A fresh ledger (config at folder/reclaim.toml) with one held job whose send was reset after the request went
    out; its id names the test's folder, so no other test on the shared simulator counts its create."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(T - 3600)
    key = JobKey(f"console-url {folder.name}", ARTICLE)
    sim.add_fault("drop_before_accept", match_idem=idem_key(key.job_id, key.operation))
    conn = connect(ledger)
    res = submit_now(conn, config, ARTICLE, {"input": "write the console-url post"}, clock=clock, job_id=key.job_id,
                     target=f"blog/{folder.name}", remotes=RemoteCache(config))
    conn.close()
    assert res.state == "held"
    clock.set(T)
    return ledger, config, clock, key


def expected_url(config: Config, key: JobKey) -> str:
    url = console_url_for(config, key.operation, idem_key(key.job_id, key.operation))
    assert url is not None and url.endswith("&format=html")
    return url


async def drawn_link(pilot: Pilot[Any]) -> str:
    """The ConsoleLink's text as drawn on the screen (scrolled into view), its folded lines joined back."""
    app = pilot.app
    assert isinstance(app, ReclaimApp)
    link = app.screen.query_one(ConsoleLink)
    link.scroll_visible(animate=False, top=True)
    await pilot.pause()
    await wait_until(pilot, lambda: link.content_region.y >= 0 and link.content_region.bottom <= app.size.height,
                     what="the console URL in view")
    await pilot.pause()
    region = link.content_region
    rows = screen_text(app).split("\n")[region.y:region.bottom]
    return "".join(row[region.x:region.right].strip() for row in rows)


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_url_whole_on_job_and_triage_screens(tmp_path: Path, console_sim: Simulator,
                                                   size: tuple[int, int]) -> None:
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    url = expected_url(config, key)
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=size) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        drawn = await drawn_link(pilot)
        assert url in drawn and "…" not in drawn
        assert "…" not in app.screen.query_one(ConsoleLink).url
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        drawn = await drawn_link(pilot)
        assert url in drawn and "…" not in drawn
        # The sentence about where to look points at it rather than repeating it cut.
        remote = app.screen.query_one("#triage-remote")
        assert "remote-console URL shown below" in str(remote.content)


@pytest.mark.slow
async def test_copy_key_copies_the_whole_url_and_says_so(tmp_path: Path, console_sim: Simulator) -> None:
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    url = expected_url(config, key)
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        assert app.clipboard == ""
        await pilot.press("l")
        assert app.clipboard == url
        assert app.screen.feedback_text.startswith("copied the remote-console URL")
        app.copy_to_clipboard("")
        await pilot.press("t")
        await wait_loaded(pilot, TriageScreen)
        await pilot.press("l")
        assert app.clipboard == url
        assert "copied" in app.screen.feedback_text


@pytest.mark.slow
async def test_url_is_sanitised_when_drawn_and_copied(tmp_path: Path, console_sim: Simulator) -> None:
    """Remote-supplied text: an escape sequence or bidi override is drawn and copied as a visible escape."""
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        link = app.screen.query_one(ConsoleLink)
        link.show("http://sim/console?label=idem=k\x1b]52;c;aGk=\x07[red]x[/red]\u202eevil", "l")
        await pilot.press("l")
        copied = app.clipboard
        assert "\x1b" not in copied and "\x07" not in copied and "\u202e" not in copied
        assert "\\x1b]52;c;aGk=\\x07[red]x[/red]\\u202eevil" in copied  # literal: markup not parsed
        assert copied == link.url
        drawn = await drawn_link(pilot)
        assert "[red]x[/red]" in drawn and "\\u202eevil" in drawn


@pytest.mark.slow
async def test_no_url_for_a_remote_without_a_console(tmp_path: Path, console_sim: Simulator) -> None:
    """No console to look in: nothing drawn, and the key says why (nothing copied)."""
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        app.open_job(key)
        await wait_loaded(pilot, JobScreen)
        screen = app.screen
        assert isinstance(screen, JobScreen) and screen.detail is not None
        screen.detail = replace(screen.detail, console_url=None)
        screen.query_one(ConsoleLink).show(None, "l")
        screen.refresh_bindings()
        await pilot.press("l")
        assert app.clipboard == ""
        assert "no console to look in" in screen.feedback_text
        assert not screen.query_one(ConsoleLink).display


def _slow_reads(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold every job read (both screens read through job_read) until the returned event is set, as a loaded
    machine would."""
    release = threading.Event()
    real = Ledger.job_detail

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30), "the test never let the read land"
        return real(*args, **kwargs)

    monkeypatch.setattr(Ledger, "job_detail", held)
    return release


@pytest.mark.slow
async def test_key_pressed_before_the_read_lands_runs_when_it_does(tmp_path: Path, console_sim: Simulator,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ledger, config, clock, key = held_ledger(tmp_path, console_sim)
    url = expected_url(config, key)
    app = make_app(ledger, config, "bob", clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        release = _slow_reads(monkeypatch)
        # The job screen: l (copy) pressed while the job is read is kept, said, and done when the read lands.
        app.open_job(key)
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), what="the job screen")
        screen = app.screen
        assert isinstance(screen, JobScreen) and not screen.loaded
        await pilot.press("l")
        assert "reading the job" in screen.feedback_text and "refused" not in screen.feedback_text
        assert app.clipboard == ""
        release.set()
        await wait_until(pilot, lambda: app.clipboard == url, what="the queued copy")
        assert screen.feedback_text.startswith("copied")
        # The triage screen: f (record a finding) pressed while the job is read goes on once it lands. A query cannot
        # help here (no handle, Gemini cannot be searched), so step 2 is preset and f goes straight to the note.
        release.clear()
        app.open_triage(key)
        await wait_until(pilot, lambda: isinstance(app.screen, TriageScreen), what="the triage screen")
        triage = app.screen
        assert isinstance(triage, TriageScreen) and not triage.loaded
        await pilot.press("f")
        assert "reading the job" in triage.feedback_text and "record finding goes on" in triage.feedback_text
        release.set()
        await wait_until(pilot, lambda: app.focused is not None and app.focused.id == "finding-note",
                         timeout=20, what="the queued finding at its note")
        # Step 1 says where to look; the URL is shown whole on its own line, never as a cut copy in the words.
        await wait_until(pilot, lambda: "would have named it" in str(triage.query_one("#triage-remote").content),
                         what="where to look drawn")
        said = str(triage.query_one("#triage-remote").content)
        assert "…" not in said and "/console/interactions" not in said


def test_cli_show_prints_the_url_whole(tmp_path: Path, console_sim: Simulator, run_cli: Any) -> None:
    """`reclaim show` ends with the remote-console URL, whole even on a 60-column terminal; --json names it."""
    ledger, config, _clock, key = held_ledger(tmp_path, console_sim)
    url = expected_url(config, key)
    cfg_path = tmp_path / "reclaim.toml"
    r = run_cli("show", key.job_id, "--operation", key.operation, ledger=ledger, config=cfg_path,
                env={"COLUMNS": "60"})
    assert r.rc == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last == f"remote console (the remote's own records of this job): {url}"
    r = run_cli("show", key.job_id, "--operation", key.operation, "--json", ledger=ledger, config=cfg_path)
    assert r.rc == 0, r.stderr
    assert json.loads(r.stdout)["console_url"] == url
