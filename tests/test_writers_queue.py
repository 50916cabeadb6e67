"""The writers' queue (ledger/writers.py): writers of one ledger go in the order they came, a writer alone
takes no ticket, a killed holder lets the next one go, a wait stays bounded by the busy timeout (exit 8), and a sidecar that
cannot be used only means writing unqueued, as before."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import writers
from ledger.db import connect, write_tx
from ledger.errors import LedgerLocked

OP = "article.generate"
GOOD_PAYLOAD = '{"input": "hello"}'


def tickets(ledger: Path) -> int:
    """How many tickets the queue of `ledger` has handed out (the sidecar's counter)."""
    side = writers.sidecar(ledger)
    raw = side.read_bytes()[:8] if side.exists() else b""
    return int.from_bytes(raw, "little") if len(raw) == 8 else 0


def alone_held(ledger: Path) -> bool:
    """Whether a writer that went without a ticket holds the sidecar's byte ALONE (asked from another open file)."""
    fd = os.open(writers.sidecar(ledger), os.O_RDWR)
    try:
        return not writers._free(fd, writers.ALONE)
    finally:
        os.close(fd)


def note(conn: sqlite3.Connection, name: str) -> None:
    """One small write, in the ledger's own table for saved views (no config needed)."""
    conn.execute(
        "INSERT INTO saved_views (operator, name, grp, filter, created_at) VALUES ('t', ?, 'held', '', 0)", (name,)
    )


def written(ledger: Path) -> list[str]:
    """The names `note` wrote, in commit order."""
    c = connect(ledger, readonly=True)
    try:
        return [r[0] for r in c.execute("SELECT name FROM saved_views ORDER BY rowid")]
    finally:
        c.close()


def write_in_thread(ledger: Path, name: str, busy_timeout_ms: int | None = None) -> tuple[threading.Thread, list[Any]]:
    """Start a thread that writes `name` through its own connection, waiting up to 60 s for its turn; its
    outcome (None, or the exception) lands in the returned list when it ends."""
    result: list[BaseException | None] = []

    def write() -> None:
        c = connect(ledger)
        if busy_timeout_ms is not None:
            c.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        try:
            with write_tx(c, wait=60):
                note(c, name)
            result.append(None)
        except BaseException as e:  # reported by the test, not lost in the thread
            result.append(e)
        finally:
            c.close()

    t = threading.Thread(target=write)
    t.start()
    return t, result


def test_writers_go_in_the_order_they_came(ledger_path: Path, wait_for: Callable[..., Any]) -> None:
    holder = connect(ledger_path)
    hold = write_tx(holder)
    hold.__enter__()
    first = tickets(ledger_path)
    done: list[str] = []
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        c = connect(ledger_path)
        try:
            with write_tx(c, wait=60):
                note(c, name)
            done.append(name)
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)
        finally:
            c.close()

    threads = []
    for i, name in enumerate(["w1", "w2", "w3", "w4"]):
        t = threading.Thread(target=writer, args=(name,))
        t.start()
        threads.append(t)
        # The next writer starts only once this one holds its ticket, so the order they came is known.
        wait_for(lambda i=i: tickets(ledger_path) == first + i + 1, timeout=30, what=f"{name} queued")
    note(holder, "holder")
    hold.__exit__(None, None, None)
    for t in threads:
        t.join(timeout=60)
    holder.close()
    assert not errors, errors
    assert written(ledger_path) == ["holder", "w1", "w2", "w3", "w4"]


def test_a_killed_holder_lets_the_next_writer_go(ledger_path: Path, wait_for: Callable[..., Any]) -> None:
    code = (
        "import sys\n"
        "from ledger.db import connect, write_tx\n"
        f"c = connect({str(ledger_path)!r})\n"
        "with write_tx(c):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        queued = tickets(ledger_path)
        t, result = write_in_thread(ledger_path, "after the kill")
        wait_for(lambda: tickets(ledger_path) == queued + 1, timeout=30, what="the waiter queued")
        assert not result, "the waiter went on while the holder was alive"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        t.join(timeout=60)
        assert result == [None]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert written(ledger_path) == ["after the kill"]
    # The killed holder wrote alone, without a ticket, holding ALONE; the OS let it go with the process,
    # so the next writer alone goes without a ticket again.
    assert not alone_held(ledger_path)
    settled = tickets(ledger_path)
    c = connect(ledger_path)
    with write_tx(c):
        note(c, "alone again")
    c.close()
    assert tickets(ledger_path) == settled


def test_a_writer_alone_takes_no_ticket_and_the_next_one_queues_behind_it(
    ledger_path: Path, wait_for: Callable[..., Any]
) -> None:
    first = tickets(ledger_path)
    alone = connect(ledger_path)
    for name in ("a", "b", "c"):
        with write_tx(alone):
            note(alone, name)
    assert tickets(ledger_path) == first  # nobody else writing or waiting: no ticket, no queue system calls
    hold = write_tx(alone)
    hold.__enter__()
    t, result = write_in_thread(ledger_path, "behind")
    wait_for(lambda: tickets(ledger_path) == first + 1, timeout=30, what="the second writer queued")
    note(alone, "d")
    hold.__exit__(None, None, None)
    t.join(timeout=60)
    alone.close()
    assert result == [None]
    assert written(ledger_path) == ["a", "b", "c", "d", "behind"]


def test_a_wait_in_the_queue_ends_at_its_deadline(
    ledger_path: Path, fingerprint: Callable[[Path], str],
) -> None:
    holder = connect(ledger_path)
    hold = write_tx(holder)
    hold.__enter__()
    before = fingerprint(ledger_path)
    late = connect(ledger_path)
    try:
        with pytest.raises(LedgerLocked, match="locked by another process"):
            with write_tx(late, wait=0.2):
                note(late, "never")
        # The writer that gave up left the queue: the one behind it is not held up by it.
        with pytest.raises(LedgerLocked):
            with write_tx(late, wait=0.2):
                note(late, "never either")
        assert fingerprint(ledger_path) == before
    finally:
        hold.__exit__(None, None, None)
        holder.close()
    with write_tx(late, wait=5):
        note(late, "now")
    late.close()
    assert written(ledger_path) == ["now"]


def test_a_queued_holder_makes_the_cli_exit_8_after_the_busy_timeout(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    holder = connect(ledger_path)
    hold = write_tx(holder)
    hold.__enter__()
    before = fingerprint(ledger_path)
    try:
        r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "queued-1", timeout=60)
    finally:
        hold.__exit__(None, None, None)
        holder.close()
    assert r.rc == 8, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "locked" in lines[0] and str(ledger_path) in lines[0], r.stderr
    assert fingerprint(ledger_path) == before


def test_viewers_never_make_the_sidecar(ledger_path: Path) -> None:
    c = connect(ledger_path, readonly=True)
    c.execute("SELECT COUNT(*) FROM jobs").fetchone()
    c.close()
    assert not writers.sidecar(ledger_path).exists()


def test_the_sidecar_has_the_ledgers_permissions(ledger_path: Path) -> None:
    ledger_path.chmod(0o640)
    old = os.umask(0o077)
    try:
        c = connect(ledger_path)
        with write_tx(c):
            note(c, "x")
        c.close()
    finally:
        os.umask(old)
    side = writers.sidecar(ledger_path)
    assert stat.S_IMODE(side.stat().st_mode) == 0o640
    assert side.stat().st_uid == ledger_path.stat().st_uid


def test_an_unusable_sidecar_means_writing_unqueued(ledger_path: Path) -> None:
    writers.sidecar(ledger_path).mkdir()  # cannot be opened as a file: no queue, writes go on as before
    c = connect(ledger_path)
    with write_tx(c):
        note(c, "unqueued")
    c.close()
    assert written(ledger_path) == ["unqueued"]


def test_a_wait_longer_than_the_busy_timeout_is_kept_behind_an_unqueued_writer(ledger_path: Path) -> None:
    """A turn that comes at once, with the caller's own `wait`, waits for a writer outside the queue (the
    sqlite3 shell, an older reclaim) for that whole `wait`, not for the connection's busy timeout."""
    outside = sqlite3.connect(ledger_path, isolation_level=None)
    outside.execute("BEGIN IMMEDIATE")  # SQLite's lock, held with no ticket
    t, result = write_in_thread(ledger_path, "after the outsider", busy_timeout_ms=100)  # only `wait` may bound it
    t.join(timeout=1.0)  # ten busy timeouts: still waiting, not failed
    alive = t.is_alive()
    outside.execute("COMMIT")
    outside.close()
    t.join(timeout=60)
    assert alive, f"the writer gave up before its wait: {result}"
    assert result == [None]
    assert written(ledger_path) == ["after the outsider"]


def test_a_writer_writing_in_a_loop_keeps_its_turn_at_most_streak_turns_while_another_waits(
    ledger_path: Path, wait_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows wide enough that no scheduling delay ends a streak early: the order below is then exact.
    monkeypatch.setattr(writers, "LINGER_SECONDS", 30.0)
    monkeypatch.setattr(writers, "STREAK_SECONDS", 30.0)
    monkeypatch.setattr(writers, "_BARGE_NS", 30 * 10**9)
    warm, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        c = connect(ledger_path)
        try:
            with write_tx(c):
                note(c, "warm")  # alone: this writer has just let a turn go, as one writing in a loop has
            warm.set()
            go.wait(60)
            for i in range(20):
                with write_tx(c, wait=60):
                    note(c, f"a{i}")
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)
        finally:
            c.close()

    looping = threading.Thread(target=loop)
    looping.start()
    assert warm.wait(60)
    first = tickets(ledger_path)
    holder = connect(ledger_path)
    hold = write_tx(holder)
    hold.__enter__()
    go.set()
    wait_for(lambda: tickets(ledger_path) == first + 1, timeout=30, what="the looping writer queued")
    other, result = write_in_thread(ledger_path, "b")
    wait_for(lambda: tickets(ledger_path) == first + 2, timeout=30, what="the other writer queued")
    note(holder, "x")
    hold.__exit__(None, None, None)
    looping.join(timeout=120)
    other.join(timeout=120)
    holder.close()
    assert not errors and result == [None], (errors, result)
    streak = [f"a{i}" for i in range(writers.STREAK)]
    rest = [f"a{i}" for i in range(writers.STREAK, 20)]
    assert written(ledger_path) == ["warm", "x", *streak, "b", *rest]
    assert writers.sidecar(ledger_path).read_bytes()[24:32] == bytes(8)  # no turn left lingering


def test_a_lingering_turn_nobody_comes_back_to_is_taken_by_the_next_writer(
    ledger_path: Path, wait_for: Callable[..., Any]
) -> None:
    import time

    c = connect(ledger_path)
    with write_tx(c):
        note(c, "first")  # makes the sidecar, header and all
    side = writers.sidecar(ledger_path)
    with open(side, "r+b") as f:  # as a writer killed while its turn lingered leaves it: far from over
        f.seek(24)
        f.write(b"\x07" * 8 + (time.monotonic_ns() + 3600 * 10**9).to_bytes(8, "little"))
    first = tickets(ledger_path)
    hold = write_tx(c)
    hold.__enter__()
    t, result = write_in_thread(ledger_path, "next")
    wait_for(lambda: tickets(ledger_path) == first + 1, timeout=30, what="the next writer queued")
    note(c, "holder")
    hold.__exit__(None, None, None)
    t.join(timeout=60)
    c.close()
    assert result == [None]
    assert written(ledger_path) == ["first", "holder", "next"]
    assert side.read_bytes()[24:32] == bytes(8)  # the next writer ended the lingering turn


def test_a_streak_ends_when_its_time_is_up_whatever_its_turns(
    ledger_path: Path, wait_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, but a streak may last no time at all: the looping writer's first turn is its whole streak.
    monkeypatch.setattr(writers, "LINGER_SECONDS", 30.0)
    monkeypatch.setattr(writers, "STREAK_SECONDS", 0.0)
    monkeypatch.setattr(writers, "_BARGE_NS", 30 * 10**9)
    warm, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        c = connect(ledger_path)
        try:
            with write_tx(c):
                note(c, "warm")
            warm.set()
            go.wait(60)
            for i in range(4):
                with write_tx(c, wait=60):
                    note(c, f"a{i}")
        except BaseException as e:
            errors.append(e)
        finally:
            c.close()

    looping = threading.Thread(target=loop)
    looping.start()
    assert warm.wait(60)
    first = tickets(ledger_path)
    holder = connect(ledger_path)
    hold = write_tx(holder)
    hold.__enter__()
    go.set()
    wait_for(lambda: tickets(ledger_path) == first + 1, timeout=30, what="the looping writer queued")
    other, result = write_in_thread(ledger_path, "b")
    wait_for(lambda: tickets(ledger_path) == first + 2, timeout=30, what="the other writer queued")
    note(holder, "x")
    hold.__exit__(None, None, None)
    looping.join(timeout=120)
    other.join(timeout=120)
    holder.close()
    assert not errors and result == [None], (errors, result)
    assert written(ledger_path) == ["warm", "x", "a0", "b", "a1", "a2", "a3"]


def test_the_next_writer_leaves_the_turn_to_a_live_writer_that_went_without_a_ticket(
    ledger_path: Path, wait_for: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer that went without a ticket and is slow to BEGIN (descheduled on a busy machine) must not lose
    # SQLite's lock to the queued writers: it would wait in SQLite's busy handler, whose sleeps grow to 100 ms,
    # while they went on one after another. The next in line waits for it as long as its process runs, even
    # with no time at all to spare for a lingering writer.
    monkeypatch.setattr(writers, "_BARGE_NS", 0)
    alone = connect(ledger_path)
    queue = writers.queue_of(alone)
    assert queue is not None
    first = tickets(ledger_path)
    assert queue.take(float("inf"))  # the turn, without a ticket; BEGIN IMMEDIATE not yet run
    assert tickets(ledger_path) == first
    assert alone_held(ledger_path)
    t, result = write_in_thread(ledger_path, "queued")
    wait_for(lambda: tickets(ledger_path) == first + 1, timeout=30, what="the next writer queued")
    alone.execute("BEGIN IMMEDIATE")
    note(alone, "without a ticket")
    alone.execute("COMMIT")
    queue.release()
    t.join(timeout=60)
    alone.close()
    assert result == [None]
    assert written(ledger_path) == ["without a ticket", "queued"]
    assert not alone_held(ledger_path)


def test_a_killed_writer_that_went_without_a_ticket_holds_nobody_up(
    ledger_path: Path, wait_for: Callable[..., Any]
) -> None:
    # Killed between taking its turn and BEGIN IMMEDIATE: the OS lets its byte go, so the next writer neither
    # waits for it nor queues (it finds nobody writing).
    code = (
        "import sys, time; from ledger import writers; from ledger.db import connect\n"
        f"c = connect({str(ledger_path)!r}); q = writers.queue_of(c); assert q.take(float('inf'))\n"
        "print('took', flush=True); time.sleep(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "took\n"
        assert alone_held(ledger_path)
        first = tickets(ledger_path)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    wait_for(lambda: not alone_held(ledger_path), timeout=30, what="the killed writer's byte let go")
    c = connect(ledger_path)
    with write_tx(c):
        note(c, "after the kill")
    c.close()
    assert tickets(ledger_path) == first  # nobody queued: the turn went without a ticket
    assert written(ledger_path) == ["after the kill"]


def test_of_two_writers_finding_nobody_at_once_only_one_goes_without_a_ticket(ledger_path: Path) -> None:
    c, d = connect(ledger_path), connect(ledger_path)
    with write_tx(c):
        note(c, "sidecar made")
    first, second = writers.queue_of(c), writers.queue_of(d)
    assert first is not None and second is not None
    assert first.take(float("inf"))  # nobody writing: the turn without a ticket, ALONE held
    assert first._direct and alone_held(ledger_path)
    assert second._open() is not None and second._map is not None
    assert not second._alone(second._open() or -1, second._map)  # saw nobody too, but the lock says no
    first.release()
    assert not alone_held(ledger_path)
    c.close()
    d.close()


def test_a_writer_that_finds_a_ticket_taken_once_it_holds_alone_queues(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other order: another writer takes its ticket between this writer's reading the counters and its
    # locking ALONE. Once the lock is held the counters are read again: this one gives ALONE back and queues.
    c, d = connect(ledger_path), connect(ledger_path)
    with write_tx(c):
        note(c, "sidecar made")
    late, other = writers.queue_of(c), writers.queue_of(d)
    assert late is not None and other is not None
    other_fd = other._open()
    assert other_fd is not None
    real_lock = writers._lock

    def ticket_taken_meanwhile(fd: int, kind: int, start: int, wait: bool = False) -> bool:
        if start == writers.ALONE and kind == fcntl.F_WRLCK and other._held is None:
            other._held = other._ticket(other_fd, float("inf"))  # the other writer's ticket, just before
        return real_lock(fd, kind, start, wait)

    monkeypatch.setattr(writers, "_lock", ticket_taken_meanwhile)
    before = tickets(ledger_path)
    fd = late._open()
    assert fd is not None and late._map is not None
    assert not late._alone(fd, late._map)
    assert not late._direct and not alone_held(ledger_path)
    assert tickets(ledger_path) == before + 1
    other.release()
    c.close()
    d.close()
