"""`reclaim demo --seat` (`make demo-seat`): one command opens the browser seat on the demo, behind nginx with basic
auth, with `[serve] public_url` set in the demo's config and the seat's, so a job link opens; stopping the demo
stops the seat and nginx too.

The demo runs as its own process (it starts and stops processes: the boundary is the point), headless; Debian's
chromium, driven by Playwright, logs in as bob.
"""

from __future__ import annotations

import base64
import http.client
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from child_env import inherited_env
from playwright.sync_api import Browser
from test_browser_seat import STARTING_JS, browser, playwright, wait_screen  # noqa: F401  (fixtures)

from console.job_link import job_link
from ledger.config import load_config
from ledger.model import JobKey

pytestmark = [pytest.mark.process, pytest.mark.browser]
SEAT_LINE = re.compile(r"demo: browser seat at (http://127\.0\.0\.1:\d+/) as alice or bob, password (\S+) ")


def _get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, str]:
    parts = re.match(r"http://([^:/]+):(\d+)(/.*)", url)
    assert parts, url
    conn = http.client.HTTPConnection(parts.group(1), int(parts.group(2)), timeout=10)
    headers = {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else {}
    try:
        conn.request("GET", parts.group(3), headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _wait_for(pred: Callable[[], JobKey | None], timeout: float, what: str) -> JobKey:
    deadline = time.monotonic() + timeout
    while (value := pred()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.1)
    return value


def _first_job(ledger: Path) -> JobKey | None:
    """The ledger's first job, read on a fresh read-only connection (None: none yet)."""
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT job_id, operation FROM jobs ORDER BY created_at, job_id LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # the ledger is still being created
        return None
    finally:
        conn.close()
    return JobKey(row[0], row[1]) if row else None


@pytest.fixture
def demo_seat(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, str, Path]]:
    """`reclaim demo --seat --no-ui` in tmp_path/demo: the process, the seat's URL and password, the folder."""
    folder = tmp_path / "demo"
    env = {**inherited_env(), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "console", "demo", "--seat", "--no-ui", "--seconds", "300",
                             "--dir", str(folder)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    said: list[str] = []
    try:
        while True:
            try:
                line = lines.get(timeout=60)
            except queue.Empty:
                pytest.fail(f"the demo named no browser seat within 60 s; it said: {said}")
            said.append(line)
            found = SEAT_LINE.search(line)
            if found:
                break
            assert proc.poll() is None or not lines.empty(), said
        yield proc, found.group(1), found.group(2), folder
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def test_one_command_opens_the_browser_seat_on_the_demo(demo_seat: tuple[subprocess.Popen[str], str, str, Path],
                                                        browser: Browser) -> None:  # noqa: F811
    proc, url, password, folder = demo_seat
    # public_url is the seat's address in both configs: the terminal's console and the browser's copy links to it.
    assert load_config(folder / "reclaim.toml").serve.public_url == url
    seat_config = load_config(folder / "seat.toml")
    assert seat_config.serve.public_url == url and seat_config.identity_source == "proxy"

    assert _get(url)[0] == 401  # nginx asks who you are; nothing reaches the seat without it
    assert _get(url, ("bob", "wrong"))[0] == 401
    status, html = _get(url, ("bob", password))
    assert status == 200 and "<title>reclaim — bob</title>" in html and "starting the console…" in html

    key = _wait_for(lambda: _first_job(folder / "reclaim.db"), 60, "the demo's first job")
    context = browser.new_context(http_credentials={"username": "bob", "password": password},
                                  viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.add_init_script(STARTING_JS)
    try:
        page.goto(url)
        assert page.title() == "reclaim — bob"
        page.locator(".xterm-helper-textarea").focus()
        wait_screen(page, "bob · approver, triage")
        assert page.evaluate("window.reclaimStartingShown") == "starting the console…"
        # The link a job screen's `y` copies (public_url + the job) opens that job's screen.
        page.goto(job_link(url, key))
        page.locator(".xterm-helper-textarea").focus()
        wait_screen(page, f"Job {key.job_id}")
    finally:
        context.close()

    pids = {int(p.read_text()) for p in [folder / "nginx" / "nginx.pid"] if p.exists()}
    assert pids, "nginx wrote no pid file"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "nginx outlived the demo"
    assert not (folder / "seat.sock").exists()  # reclaim serve stopped and removed its socket
    with pytest.raises(OSError):
        _get(url)
    assert os.path.exists(folder / "reclaim.db")  # the ledger stays
