"""A follow that never misses: `reclaim events --follow` and the console's Follower show every committed event,
exactly once, in id order, promptly, whatever moment the commits land at.

The race that used to lose an event: the follower read the events, then took `PRAGMA data_version` as its
baseline; a commit landing between the two was counted as seen, and nothing woke the follower until a later
commit. The tests below commit from several real processes at random moments while both followers run, and
compare what each showed with the events table read from a fresh connection.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.live import Follower, LedgerSource, Pulse
from ledger.clock import SystemClock
from ledger.config import Config
from ledger.db import connect
from ledger.follow import EventCursor
from ledger.reservation import reserve
from ledger.store import events as events_store

OP = "article.generate"
WRITER = Path(__file__).parents[1] / "support" / "follow_writer.py"
SHOWN_WITHIN = 5.0
"""Seconds the last committed event may take to be shown by a follower (they poll every 0.1 s; the margin is
for a loaded machine)."""


def _all_event_ids(ledger: Path) -> list[int]:
    conn = connect(ledger, readonly=True)
    try:
        return [e.id for e in events_store.events_after(conn, 0, limit=1_000_000)]
    finally:
        conn.close()


def _reserve(ledger: Path, cfg: Config, job_id: str) -> None:
    conn = connect(ledger)
    try:
        assert reserve(conn, cfg, OP, {"input": job_id}, clock=SystemClock(), job_id=job_id).outcome == "reserved"
    finally:
        conn.close()


class _Lines:
    """Collects a process's stdout lines on a thread, so the test can wait on them with a timeout."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.lines.append(line)

    def ids(self) -> list[int]:
        return [json.loads(line)["id"] for line in list(self.lines)]


class _FollowerThread:
    """The console's Follower in its own thread, polling as the console's live loop does; records each pulse."""

    def __init__(self, ledger: Path, cfg: Config, poll_seconds: float = 0.1) -> None:
        self.follower = Follower(LedgerSource(ledger), cfg, SystemClock(), feed_size=2)  # max 100 events a pulse
        self.pulses: list[Pulse] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._poll_seconds = poll_seconds
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> _FollowerThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                pulse = self.follower.poll()
                if pulse is not None:
                    self.pulses.append(pulse)
                if not self.follower.behind:
                    self._stop.wait(self._poll_seconds)
        except BaseException as e:  # handed to the test
            self.errors.append(e)
        finally:
            self.follower.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def ids(self) -> list[int]:
        return [e.id for p in list(self.pulses) if not p.reset for e in p.events]


def test_every_event_from_several_writers_is_shown_once_in_order_and_promptly(
    sim: Any, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    start_cli: Callable[..., subprocess.Popen[str]], wait_for: Callable[..., Any], cfg: Config,
) -> None:
    config = write_config(make_config(daily_quota=1000))
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    follower = _FollowerThread(ledger_path, cfg).start()
    wait_for(lambda: follower.pulses, timeout=10, what="the console follower's first look")
    assert follower.pulses[0].reset and follower.pulses[0].events == []  # an empty ledger: it follows from id 0
    cli = start_cli("events", "--follow", "--json", "--after", "0", config=config)
    out = _Lines(cli)
    try:
        # Four API writers reserving at random moments, and CLI submits (reserve + send to the simulator,
        # several events each) started at random moments among them.
        writers = [
            subprocess.Popen([sys.executable, str(WRITER), str(ledger_path), str(config), f"w{n}", "12",
                              str(rng.randrange(1 << 30))], stderr=subprocess.PIPE, text=True)
            for n in range(4)
        ]
        submits = []
        for n in range(3):
            time.sleep(rng.uniform(0, 0.2))  # pacing: the next submit starts at a random moment
            submits.append(start_cli("submit", OP, "--payload", json.dumps({"input": f"cli {n}"}), "--job-id",
                                     f"cli #{n}", config=config))
        for p in writers:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, (seed, err)
        for p in submits:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, (seed, err)
        committed_at = time.monotonic()
        truth = _all_event_ids(ledger_path)  # a fresh connection: what the table holds
        assert len(truth) >= 4 * 12 + 3 * 2, truth
        last = truth[-1]
        wait_for(lambda: last in out.ids() and last in follower.ids(), timeout=SHOWN_WITHIN * 2,
                 what=f"the last event {last} shown by both followers (seed {seed})")
        took = time.monotonic() - committed_at
        assert took < SHOWN_WITHIN, f"the last event took {took:.2f}s to be shown (seed {seed})"
        assert out.ids() == truth, f"events --follow (seed {seed})"
        assert follower.ids() == truth, f"the console follower (seed {seed})"
        assert not follower.errors
    finally:
        follower.stop()
        cli.terminate()
        cli.communicate(timeout=10)


def test_a_commit_between_the_read_and_the_baseline_is_still_read(
    ledger_path: Path, cfg: Config, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exact window that lost an event: another connection commits right after the follower's read."""
    _reserve(ledger_path, cfg, "before")
    conn = connect(ledger_path, readonly=True)
    cursor = EventCursor(conn, recheck_seconds=3600)  # no periodic re-read: the wake-up alone must do it
    read = events_store.events_after
    landed: list[str] = []

    def read_then_commit(c: Any, after: int, limit: int = 200) -> Any:
        rows = read(c, after, limit)
        if not landed:
            landed.append("in the window")
            _reserve(ledger_path, cfg, "in the window")
        return rows

    monkeypatch.setattr(events_store, "events_after", read_then_commit)
    try:
        first = cursor.poll()
        assert [e.job_id for e in first] == ["before"] and landed
        second = cursor.poll()
        assert [e.job_id for e in second] == ["in the window"]
        assert cursor.poll() == []
    finally:
        conn.close()


def test_a_burst_is_read_in_pages_each_event_once(ledger_path: Path, cfg: Config) -> None:
    for i in range(25):
        _reserve(ledger_path, cfg, f"burst {i}")
    conn = connect(ledger_path, readonly=True)
    try:
        cursor = EventCursor(conn, page=4)
        seen: list[int] = []
        for _ in range(3):
            seen += [e.id for e in cursor.poll(limit=10)]
        assert not cursor.behind and seen == _all_event_ids(ledger_path) and len(seen) == 25
    finally:
        conn.close()


def test_the_follower_carries_on_from_its_cursor_after_a_reconnect(ledger_path: Path, cfg: Config) -> None:
    follower = Follower(LedgerSource(ledger_path), cfg, SystemClock(), feed_size=2)
    try:
        first = follower.poll()
        assert first is not None and first.reset
        follower.close()  # as after a read error: the next poll reconnects to the same file
        for i in range(5):  # more than the feed size: a reload would show only the newest two
            _reserve(ledger_path, cfg, f"while away {i}")
        pulse = follower.poll()
        assert pulse is not None and not pulse.reset
        assert [e.job_id for e in pulse.events] == [f"while away {i}" for i in range(5)]
    finally:
        follower.close()
