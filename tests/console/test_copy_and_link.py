"""Copy a job's id, idem key and handle from its screen, and a seat link that opens it (for an incident channel);
`reclaim console --job` (what a seat link starts) opens that job's screen, and only when it is in the ledger.

What is copied is read from Textual's own clipboard (`App.clipboard`, set by `App.copy_to_clipboard`, which also
writes the OSC 52 sequence to the terminal); each is checked against the job as a fresh connection reads it.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest
from console_demo import Demo
from console_helpers import wait_loaded, wait_until, widget_text

from console.app import ReclaimApp, make_app
from console.job_link import check_link_part, decode_token, encode_token, job_link
from console.screens.job import JobScreen
from console.screens.messages import MessagesScreen
from console.screens.overview import OverviewScreen
from ledger import BadInput, Job, JobKey
from ledger.db import connect
from ledger.store import jobs as jobs_store

pytestmark = pytest.mark.anyio
SEAT = "https://reclaim.example.com/oncall/"


def _app(demo: Demo, start: tuple[str, str | None] | None, public_url: str = SEAT) -> ReclaimApp:
    config = replace(demo.config, serve=replace(demo.config.serve, public_url=public_url))
    return make_app(demo.ledger, config, "bob", clock=demo.clock, start_job=start)


def _toasts(app: ReclaimApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _fresh_job(demo: Demo, key: JobKey) -> Job:
    conn = connect(demo.ledger, readonly=True)
    try:
        job = jobs_store.find_job(conn, key)
    finally:
        conn.close()
    assert job is not None
    return job


async def test_a_linked_job_opens_and_its_id_idem_key_handle_and_link_are_copied(demo: Demo) -> None:
    key = demo.jobs["submitted"]
    job = _fresh_job(demo, key)
    assert job.handle
    app = _app(demo, (key.job_id, None))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.loaded, what="job screen")
        assert isinstance(app.screen, JobScreen) and app.screen.key == key
        for press, value, name in (("i", job.job_id, "job id"), ("k", job.idem_key, "idem key"),
                                   ("h", job.handle, "handle")):
            await pilot.press(press)
            await wait_until(pilot, lambda v=value: app.clipboard == v, what=f"{name} copied")
            assert app.screen.feedback_text.startswith(f"copied the {name} ({len(value)} characters)")
            assert not any(t.startswith("copied") for t in _toasts(app))  # no toast over the feedback line
        await pilot.press("y")
        link = job_link(SEAT, key)
        await wait_until(pilot, lambda: app.clipboard == link, what="job link copied")
        parts = urlsplit(link)
        assert parts.path == "/oncall/" and parse_qs(parts.query) == {"job": [key.job_id], "op": [key.operation]}


async def test_copy_keys_that_cannot_help_say_why(demo: Demo) -> None:
    key = demo.jobs["held_503"]
    assert _fresh_job(demo, key).handle is None
    app = _app(demo, (key.job_id, key.operation), public_url="")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen) and app.screen.loaded, what="job screen")
        screen = app.screen
        assert isinstance(screen, JobScreen)
        assert screen.check_action("copy", ("handle",)) is None and screen.check_action("copy_link", ()) is None
        assert "no handle recorded" in screen.disabled_reason("copy", ("handle",))
        assert "set [serve] public_url" in screen.disabled_reason("copy_link", ())
        await pilot.press("h")
        await wait_until(pilot, lambda: "no handle recorded" in screen.feedback_text, what="why h cannot copy")
        await pilot.press("i")
        await wait_until(pilot, lambda: app.clipboard == key.job_id, what="id copied")
        assert screen.feedback_text.startswith("copied the job id")  # the "not available" line is gone
        await pilot.press("L")  # the message log keeps both
        await wait_until(pilot, lambda: isinstance(app.screen, MessagesScreen), what="the message log")
        said = [m.text for m in app.messages]
        assert any("no handle recorded" in t for t in said) and any(t.startswith("copied the job id") for t in said)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen, what="the log closed")


async def test_a_link_to_a_job_not_in_the_ledger_shows_the_overview_and_says_so(demo: Demo) -> None:
    app = _app(demo, ("no such job", None))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_loaded(pilot, OverviewScreen)
        await wait_until(pilot, lambda: "the linked job 'no such job' is not in this ledger" in widget_text(app),
                         what="not-found line")
        assert isinstance(app.screen, OverviewScreen)


def test_link_tokens_round_trip_and_refuse_what_the_page_never_makes() -> None:
    for job_id, op in (("article today #07", "article.generate"), ("--ledger=/etc/passwd", None), ("ünï/?&=", "x")):
        assert decode_token(encode_token(job_id, op)) == (job_id, op)
    for bad in ("", "!!!", encode_token("a\x1b[2J", None), encode_token("x" * 501, None), "eyJqb2IiOiAxfQ"):
        with pytest.raises(BadInput):
            decode_token(bad)
    with pytest.raises(BadInput, match="--job: holds the control character U\\+202E"):
        check_link_part("--job", "abc\u202edef")
