"""The screenshots' source: `make demo`'s ledger at its known moment, and the script drawing the console over it."""

from __future__ import annotations

import html
import importlib.util
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from console_scenes import REASON, SHOTS
from demo_moment import START, WORKER, DemoMoment, build_moment, start_simulator

from console.demo import CONFIG_TEMPLATE
from ledger.clock import ManualClock, process_clock, use_clock
from ledger.config import load_config

ROOT = Path(__file__).resolve().parents[2]

HELD = ["article #4 owls", "article #7 ferries", "article #9 dunes", "article #12 glaciers", "article #13 bridges",
        "article #24 owls", "article #37 ferries", "article #38 kilns"]
"""The jobs the demo's feed has held two minutes in (fault draws of seed 7), oldest first."""


def _read(ledger: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def moment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoMoment]:
    """The demo at its moment, built once against its own fresh simulator."""
    with start_simulator().start() as sim:
        yield build_moment(tmp_path_factory.mktemp("moment") / "demo", sim)


def test_the_moment_holds_the_demos_jobs_read_back_from_a_fresh_connection(moment: DemoMoment) -> None:
    held = _read(moment.ledger, "SELECT job_id FROM jobs WHERE state = 'held' ORDER BY created_at, job_id")
    assert [j for (j,) in held] == [f"{name} 2026-12-03" for name in HELD]
    assert [k.job_id for k in moment.held] == [j for (j,) in held]
    assert moment.jobs["found"].job_id == "article #4 owls 2026-12-03"
    # alice queried it, then recorded what the remote console showed: nothing (the 503 came before any accept).
    finding = _read(moment.ledger, "SELECT actor, detail FROM events WHERE job_id = ? AND kind IN "
                    "('remote_query', 'finding') ORDER BY seq", moment.jobs["found"].job_id)
    assert [actor for actor, _ in finding] == ["alice", "alice"]
    assert '"category": "not_received"' in finding[1][1]
    # Everything else is the feed's: reserved by the scheduler, worked by the demo's worker, nobody else.
    actors = {a for (a,) in _read(moment.ledger, "SELECT DISTINCT actor FROM events")}
    assert actors == {"scheduler", WORKER, "alice"}
    names = [j for (j,) in _read(moment.ledger, "SELECT job_id FROM jobs ORDER BY created_at, job_id")]
    assert len(names) == 57 and all(
        re.fullmatch(r"(article #\d+ [a-z]+|retention-check #\d+0 bucket-[a-d]) 2026-12-03", n) for n in names)
    states = dict(_read(moment.ledger, "SELECT state, count(*) FROM jobs GROUP BY state"))
    assert states == {"consumed": 47, "held": 8, "failed": 2}
    assert moment.clock.now() == START + 190


def test_the_moment_uses_the_demos_own_config(moment: DemoMoment) -> None:
    text = moment.config_path.read_text(encoding="utf-8")
    url = re.search(r'base_url = "([^"]+)"', text)
    assert url is not None and text == CONFIG_TEMPLATE.format(url=url.group(1))
    config = load_config(moment.config_path)
    assert sorted(config.operators) == ["alice", "bob", "scheduler"]
    assert sorted(config.operations) == ["article.generate", "storage.cleanup"]


@pytest.mark.slow
def test_the_moment_is_the_same_on_every_build(moment: DemoMoment, tmp_path: Path) -> None:
    with start_simulator().start() as sim:
        again = build_moment(tmp_path / "demo", sim)
    sql = "SELECT job_id, state, attempt, handle, created_at, updated_at, last_error FROM jobs ORDER BY job_id"
    assert _read(again.ledger, sql) == _read(moment.ledger, sql)
    events = "SELECT seq, at, job_id, kind, actor FROM events ORDER BY seq"
    assert _read(again.ledger, events) == _read(moment.ledger, events)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("export_screenshots", ROOT / "scripts" / "export_screenshots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _svg_text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))).replace("\xa0", " ")


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_screenshot_script_draws_every_shot_over_the_moment(
    moment: DemoMoment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(moment.ledger.parent, tmp_path / "demo")
    monkeypatch.chdir(tmp_path)
    copy = DemoMoment(ledger=tmp_path / "demo" / "reclaim.db", config_path=tmp_path / "demo" / "reclaim.toml",
                      config=moment.config, clock=ManualClock(moment.clock.now()), jobs=dict(moment.jobs),
                      held=list(moment.held))
    before = process_clock()
    script = _script()
    out = tmp_path / "shots"
    out.mkdir()
    try:
        drawn = {shot.name: _svg_text(await script.shoot(copy, shot, out)) for shot in SHOTS}
    finally:
        use_clock(before)
    assert sorted(drawn) == sorted(p.stem for p in out.glob("*.svg")) == sorted(s.name for s in SHOTS)
    for name, text in drawn.items():
        seat = "bob" if name == "triage-confirm" else "alice"
        assert f"{seat} ·" in text, name
        assert "article #4 owls" in text or name == "quotas", name
        assert "carol" not in text and "summary.generate" not in text, name
    assert "8 held" in drawn["overview"] and "09:03:10" in drawn["overview"]
    assert "not_received by alice" in drawn["job"]
    assert "alice lacks the approver role" in drawn["triage"]
    assert "Release? article #4 owls" in drawn["triage-confirm"] and REASON in drawn["triage-confirm"]
    assert "2,948 remaining" in drawn["quotas"]
