"""Untrusted text (job ids, targets, notes, remote replies, errors) is shown literally, never as markup or escapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from console_demo import ARTICLE, write_config
from console_helpers import screen_text, wait_loaded, wait_until, widget_text
from rich.text import Text

from console.app import make_app
from console.sanitize import ELLIPSIS, clean, safe_text
from console.screens.job import JobScreen
from console.screens.jobs import JobListScreen
from console.screens.overview import OverviewScreen
from console.widgets.held_table import HeldTable
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect, create_ledger
from ledger.leases import claim_for_send
from ledger.model import JobKey
from ledger.remotes.base import RemoteStatus, SendOutcome
from ledger.reservation import reserve
from ledger.simulator import Simulator
from ledger.worker import record_send_outcome

pytestmark = pytest.mark.anyio

CORPUS = [
    "[@click=app.quit]x",
    "[/]",
    "[bold red]x",
    "\x1b]52;c;SGVsbG8=\x07",
    "\x9b31m",
    "\x1b[2J",
    "مرحبا بالعالم 👩‍👩‍👧 שלום",
]
LONG = "L" * 10_000


def test_clean_escapes_and_caps() -> None:
    assert clean("\x1b]52;c;SGVsbG8=\x07") == "\\x1b]52;c;SGVsbG8=\\x07"
    assert clean("\x9b31m") == "\\x9b31m"
    assert clean("\x1b[2J") == "\\x1b[2J"
    assert clean("a\x7fb\x00c") == "a\\x7fb\\x00c"
    assert clean("abc\u202edef") == "abc\\u202edef"
    assert clean("line1\nline2\tx") == "line1\\x0aline2\\x09x" and clean("a\nb", keep_newlines=True) == "a\nb"
    assert clean("line1\nline2\tx", prose=True) == "line1 line2 x"
    capped = clean(LONG, 50)
    assert len(capped) == 50 and capped.endswith(ELLIPSIS)
    assert clean(None) == "" and clean(42) == "42"
    text = safe_text("[@click=app.quit]x")
    assert isinstance(text, Text) and text.plain == "[@click=app.quit]x" and not text.spans and not text.style
    emoji = "مرحبا 👩‍👩‍👧"
    assert clean(emoji) == emoji


def corpus_ledger(folder: Path, sim: Simulator) -> tuple[Path, list[JobKey]]:
    """Held jobs whose id, target, error, remote snapshot and finding note carry the corpus."""
    config = load_config(write_config(folder, sim.url))
    ledger = folder / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(1_796_115_600.0 - 3600)
    conn = connect(ledger)
    keys = []
    for i, item in enumerate([*CORPUS, LONG[:400]]):
        r = reserve(conn, config, ARTICLE, {"input": "x"}, clock=clock, job_id=f"{item} #{i}", target=f"t:{item}")
        claim = claim_for_send(conn, config, r.key, owner="worker-1", now=clock.now())
        assert claim is not None
        error = LONG if i == len(CORPUS) else f"err:{item}"
        record_send_outcome(conn, config, claim, SendOutcome("unknown", error=error, reason=f"why:{item}"),
                            now=clock.now())
        triage.record_query(conn, config, r.key, RemoteStatus("error", error=f"remote:{item}",
                                                              snapshot={"reply": item, "long": LONG}),
                            actor="bob", clock=clock)
        triage.record_finding(conn, config, r.key, "cannot_determine", f"note:{item} {LONG}", actor="bob",
                              clock=clock)
        keys.append(r.key)
        clock.advance(60)
    conn.close()
    return ledger, keys


@pytest.mark.slow
async def test_corpus_is_shown_literally_everywhere(tmp_path: Path, console_sim: Simulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ledger, keys = corpus_ledger(tmp_path, console_sim)
    config = load_config(tmp_path / "reclaim.toml")
    app = make_app(ledger, config, "carol", clock=ManualClock(1_796_115_600.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        held = app.screen.query_one(HeldTable)
        assert held.row_count == len(keys)
        overview = widget_text(app)
        for item in CORPUS:
            assert clean(f"{item} #{CORPUS.index(item)}", 60) in overview
            assert clean(f"t:{item}", 60) in overview
            assert clean(f"why:{item}", 80) in overview
        drawn = screen_text(app)
        assert "\x1b" not in drawn and "\x9b" not in drawn and "\x07" not in drawn
        assert "[@click=app.quit]x" in drawn and "[bold red]x" in drawn
        await pilot.click(HeldTable, offset=(12, 1))  # clicking untrusted text does nothing but select
        await pilot.pause()
        assert app.is_running

        await pilot.press("5")
        await wait_loaded(pilot, JobListScreen)
        listing = widget_text(app)
        assert clean("\x1b]52;c;SGVsbG8=\x07 #3", 60) in listing and clean("[/] #1", 60) in listing

        for index in (0, 3, len(CORPUS)):
            app.open_job(keys[index])
            await wait_loaded(pilot, JobScreen)
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.detail is not None)
            text = widget_text(app)
            item = ([*CORPUS, LONG[:400]])[index]
            assert clean(f"{item} #{index}", 300) in text  # job id field
            assert clean(f"remote:{item}", 500) in text  # remote snapshot error
            assert clean(f"note:{item}", None)[:30] in text  # finding note
            assert ELLIPSIS in text  # the 10,000-char note / snapshot / error are capped
            assert "\x1b" not in screen_text(app)
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, JobScreen))
        assert app.is_running


TWINS = {"a\nb": "a\\x0ab", "a\tb": "a\\x09b", "a b": "a b"}
"""Job ids that differ only in a newline, a tab or a space, and how each is drawn: never alike."""


@pytest.mark.slow
async def test_ids_that_differ_only_in_a_newline_or_tab_are_drawn_apart(
    tmp_path: Path, console_sim: Simulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(write_config(tmp_path, console_sim.url))
    ledger = tmp_path / "ledger.db"
    create_ledger(ledger)
    clock = ManualClock(1_796_115_600.0 - 3600)
    conn = connect(ledger)
    keys = {}
    for job_id in TWINS:
        r = reserve(conn, config, ARTICLE, {"input": "x"}, clock=clock, job_id=job_id)
        claim = claim_for_send(conn, config, r.key, owner="worker-1", now=clock.now())
        assert claim is not None
        record_send_outcome(conn, config, claim, SendOutcome("unknown", error="no reply",
                                                             reason="first line\nsecond line"), now=clock.now())
        keys[job_id] = r.key
        clock.advance(60)
    conn.close()
    app = make_app(ledger, config, "carol", clock=ManualClock(1_796_115_600.0))
    async with app.run_test(size=(160, 40)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        held = app.screen.query_one(HeldTable)
        await wait_until(pilot, lambda: held.row_count == len(TWINS))
        cells = [[getattr(c, "plain", str(c)) for c in held.get_row_at(i)] for i in range(held.row_count)]
        assert sorted(row[1] for row in cells) == sorted(TWINS.values())
        assert all("first line second line" in " ".join(row) for row in cells)  # a reason is free text
        drawn = screen_text(app)
        assert "a\\x0ab" in drawn and "a\\x09b" in drawn

        for job_id, shown in TWINS.items():
            app.open_job(keys[job_id])
            await wait_loaded(pilot, JobScreen)
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.detail is not None)
            assert f"Job {shown}" in widget_text(app)
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, JobScreen))
