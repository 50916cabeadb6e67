"""Benchmark `reclaim console` itself: the process a person starts, in a terminal, on a big ledger.

Each round starts the real entry point (`.venv/bin/reclaim console --ledger L --config C --operator alice`, as a
person types it; the fixture config declares its identity, so it runs as any account) in a tmux pane of 120x40 on a
private tmux server, and reads the pane as a person would see it (`capture-pane -p`, every 5 ms, through one tmux
control-mode client, so polling starts no process). Figures, each min / median / max over --rounds rounds (warm and
cold interleaved, their order alternating):

  first paint     from spawning the process until the painted overview is on the pane: the held jobs' title with
                  its count and the first held row under the table's header.
  first key       the consumed group's key sent as soon as anything of the app is on the pane (its first frame),
                  until that group's first page (its title line and first row) is on the pane. A separate process
                  from the first-paint round (a key sent early replaces the overview before it paints); the note
                  says when that first frame came after the spawn.
  settled switch  the same key sent once the overview settled (the pane unchanged for 0.3 s), until the page.
  memory          the console process's peak RSS (VmHWM in /proc/PID/status of the pane's python process), read
                  after the first paint, the settled switch and a held job's screen opened (Enter on the overview).
  live lag        (warm only, after the rounds) another process commits a reservation (ledger.reservation.reserve,
                  this script's --writer mode); from its COMMIT (time.monotonic, shared by both processes) until the
                  reserving tile's count on the pane changed; p50 / p95 over --commits commits spaced at random.

Cold: before each cold round the ledger file and its -wal/-shm are fsynced and dropped from the OS page cache
(os.posix_fadvise POSIX_FADV_DONTNEED); /proc/meminfo "Cached:" before and after says how much left the cache
(reported in the note). The interpreter's and the libraries' files stay cached, as after any earlier run.

Baselines from the same run: `reclaim --help` from start to exit (warm), and every figure on a small ledger
(--small jobs, made with make_big_ledger.py). The aims (first paint < 0.5 s warm and < 2 s cold on the 1M ledger, a
key in the first frame answered < 0.2 s, memory < 80 MB) are printed in the notes; nothing here asserts them.

    .venv/bin/python scripts/bench_console.py [--ledger big.db --config big.toml] [-n 1000000] [--rounds 5]

The live-lag writer commits into the ledger: give it a copy you may change (bench.py gives a fresh one).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
TMUX = shutil.which("tmux") or "/usr/bin/tmux"
COLS, ROWS = 120, 40
OPERATOR = "alice"
POLL_S = 0.005
WAIT_S = 120.0
"""The longest any one thing on the pane is waited for (a cold open of a big ledger included)."""
SETTLE_S = 0.3
SWITCH_GROUP = "consumed"
LIVE_GROUP = "reserving"
GROUP_ORDER = ("reserving", "submitted", "done", "consumed", "held", "failed", "resolved")
"""The overview's tiles in order; tile N is key N (console.bindings.GROUP_ORDER, read there when importable)."""


def group_key(group: str) -> str:
    """The key bound to `group` in the console's bindings (its position among the tiles, counted from 1)."""
    try:
        from console.bindings import GROUP_ORDER as order
    except ImportError:
        order = GROUP_ORDER
    return str(tuple(order).index(group) + 1)


# -- the terminal ----------------------------------------------------------------------------------------------


class Tmux:
    """A private tmux server and one control-mode client on it: each command a line on the client's stdin, its
    answer the lines between %begin and %end (%error: TmuxError). Panes' output is not streamed (no-output)."""

    def __init__(self, socket: str, env: dict[str, str]) -> None:
        self.socket = socket
        self.proc = subprocess.Popen(
            [TMUX, "-L", socket, "-f", "/dev/null", "-C", "new-session", "-s", "hold", "-x", str(COLS),
             "-y", str(ROWS), "sleep 86400"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1, env=env,
        )
        self._answer("the control client's start")  # the block answering the new-session that started it
        # (tmux 3.3a's server dies on a new-session after `window-size manual`: each session is sized at its start)
        for option in ("refresh-client -f no-output", "set -g status off", "set -g remain-on-exit on"):
            self.cmd(option)
        self.socket_path = Path(self.cmd("display -p '#{socket_path}'")[0])

    def cmd(self, line: str) -> list[str]:
        """Run one tmux command; its output lines."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._answer(line)

    def _answer(self, line: str) -> list[str]:
        """Read up to the end of the next %begin block; its lines (notifications between blocks are skipped)."""
        assert self.proc.stdout is not None
        out: list[str] = []
        inside = False
        while True:
            got = self.proc.stdout.readline()
            if not got:
                raise TmuxError(f"tmux control client ended during {line!r}")
            got = got.rstrip("\n")
            if got.startswith("%begin "):
                inside, out = True, []
            elif inside and (got.startswith("%end ") or got.startswith("%error ")):
                if got.startswith("%error "):
                    raise TmuxError(f"{line!r}: {' '.join(out)}")
                return out
            elif inside:
                out.append(got)

    def close(self) -> None:
        """Stop the server (every pane on it) and the client, and remove the server's socket file."""
        try:
            self.cmd("kill-server")
        except (TmuxError, BrokenPipeError, OSError):
            pass
        self.proc.wait(timeout=10)
        self.socket_path.unlink(missing_ok=True)


class TmuxError(RuntimeError):
    """tmux answered %error, or its control client went away."""


@dataclass
class Pane:
    """One console process in its own tmux session."""

    tmux: Tmux
    name: str
    started: float
    pid: int = 0

    def text(self) -> str:
        """What the pane shows now, as plain text lines."""
        return "\n".join(self.tmux.cmd(f"capture-pane -p -t {self.name}"))

    def send(self, key: str) -> float:
        """Send one key; the monotonic time it was handed to tmux."""
        t = time.monotonic()
        self.tmux.cmd(f"send-keys -t {self.name} {shlex.quote(key)}")
        return t

    def dead(self) -> bool:
        return self.tmux.cmd(f"display -p -t {self.name} '#{{pane_dead}}'") == ["1"]

    def wait_for(self, seen: Callable[[str], object], what: str, timeout: float = WAIT_S) -> tuple[float, str]:
        """Poll the pane every POLL_S until `seen(text)`; (the monotonic time it first held, the text). Raises
        RoundFailed with the pane's last text on a timeout or when the process ended."""
        deadline = time.monotonic() + timeout
        polls = 0
        while True:
            text = self.text()
            now = time.monotonic()
            if seen(text):
                return now, text
            polls += 1
            if now > deadline or (polls % 100 == 0 and self.dead()):
                last = " | ".join(line.strip() for line in text.splitlines() if line.strip())[-300:]
                raise RoundFailed(f"{what}: not on the pane after {now - self.started:.1f} s ({last or 'blank'})")
            time.sleep(POLL_S)

    def settle(self, quiet: float = SETTLE_S, timeout: float = 10.0) -> None:
        """Wait (bounded) until the pane has not changed for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last, since = self.text(), time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < quiet:
            time.sleep(POLL_S * 4)
            now = self.text()
            if now != last:
                last, since = now, time.monotonic()

    def peak_rss_mb(self) -> float | None:
        """VmHWM of the console's python process (the pane's process, or its child when that is a shell)."""
        pid = self.pid
        comm = _read(f"/proc/{pid}/comm").strip()
        if comm in ("sh", "bash", "dash"):
            children = _read(f"/proc/{pid}/task/{pid}/children").split()
            pid = int(children[0]) if children else pid
        for line in _read(f"/proc/{pid}/status").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
        return None

    def quit(self) -> None:
        """ctrl+q, then the session goes (killed if the console has not ended within 10 s)."""
        try:
            if not self.dead():
                self.send("C-q")
                deadline = time.monotonic() + 10
                while not self.dead() and time.monotonic() < deadline:
                    time.sleep(0.02)
            self.tmux.cmd(f"kill-session -t {self.name}")
        except TmuxError:
            pass


class RoundFailed(RuntimeError):
    """Something the round waited for never reached the pane."""


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def spawn(tmux: Tmux, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> Pane:
    """Start `argv` in a new 120x40 session; the clock starts as the command is handed to tmux."""
    command = "exec env " + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()) + " " + shlex.join(argv)
    started = time.monotonic()
    tmux.cmd(f"new-session -d -s {name} -x {COLS} -y {ROWS} -c {shlex.quote(str(cwd))} {shlex.quote(command)}")
    pane = Pane(tmux, name, started)
    pane.pid = int(tmux.cmd(f"display -p -t {name} '#{{pane_pid}}'")[0])
    return pane


# -- what the pane shows -----------------------------------------------------------------------------------------


HELD_TITLE = re.compile(r"Held jobs — (?:[\d,]+ of )?[\d,]+ held")


def overview_painted(text: str) -> bool:
    """The overview has painted its read: the held jobs' title with its count ('30 held', '50 of 3,000 held'), and
    a row under the table's header (the header line starts 'age' and names 'job')."""
    if not HELD_TITLE.search(text):
        return False
    lines = [line.strip(" │") for line in text.splitlines()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith("age ") and " job " in line and "stage" in line:
            return bool(lines[i + 1].strip())
    return False


def any_frame(text: str) -> bool:
    """Anything of the app is on the pane."""
    return bool(text.strip())


def page_shown(group: str) -> Callable[[str], bool]:
    """A test for `group`'s job list with its first page: its title line (' consumed · rows 1–50 of ...') and a
    row under the column header."""
    title = re.compile(rf"^\s*{group} · rows \d")

    def shown(text: str) -> bool:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if title.match(line):
                return i + 2 < len(lines) and bool(lines[i + 2].strip())
        return False

    return shown


JOB_TITLE = re.compile(r"^\s*Job \S.*·.*·")


def job_screen_shown(text: str) -> bool:
    """A job's screen with its fields read: its title line and the 'job id' field."""
    lines = text.splitlines()
    return any(JOB_TITLE.match(line) for line in lines) and any(line.strip().startswith("job id ") for line in lines)


def tile_count(text: str, group: str) -> int | None:
    """The count on `group`'s tile (' 2 reserving '), or None when not on the pane."""
    m = re.search(rf"│\s*([\d,]+) {group}\s*│", text)
    return int(m.group(1).replace(",", "")) if m else None


def count_changed(before: int | None, text: str) -> bool:
    """The live group's tile shows a count other than `before`."""
    return tile_count(text, LIVE_GROUP) not in (before, None)


# -- cold ------------------------------------------------------------------------------------------------------------


def cached_mb() -> float | None:
    """/proc/meminfo 'Cached:' in MB (None where there is none)."""
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) / 1024.0
    return None


def drop_from_cache(ledger: Path) -> float | None:
    """fsync then drop the ledger file and its -wal/-shm from the OS page cache; the MB 'Cached:' fell by."""
    before = cached_mb()
    for path in (ledger, Path(f"{ledger}-wal"), Path(f"{ledger}-shm")):
        if not path.exists():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    after = cached_mb()
    return None if before is None or after is None else before - after


# -- rounds ------------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """One ledger's figures, each a list over the rounds (seconds; MB for memory)."""

    paint: dict[str, list[float]] = field(default_factory=lambda: {"warm": [], "cold": []})
    first_key: dict[str, list[float]] = field(default_factory=lambda: {"warm": [], "cold": []})
    first_frame: dict[str, list[float]] = field(default_factory=lambda: {"warm": [], "cold": []})
    """From spawning the process to the first frame on the pane (in the first-key rounds)."""
    settled: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    dropped_mb: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    missed: int = 0
    errors: list[str] = field(default_factory=list)


class Bench:
    """Rounds of `reclaim console` on one tmux server."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env = child_env(workdir)
        self.tmux = Tmux(f"bench{os.getpid()}", {**os.environ, **self.env})
        self.count = 0

    def spawn(self, ledger: Path, config: Path) -> Pane:
        self.count += 1
        argv = [*reclaim_argv(), "console", "--ledger", str(ledger), "--config", str(config), "--operator", OPERATOR]
        return spawn(self.tmux, f"r{self.count}", argv, self.env, self.workdir)

    def paint_round(self, ledger: Path, config: Path, temp: str, into: Figures) -> None:
        """First paint; then the settled switch, a held job's screen, and the peak RSS after them."""
        if temp == "cold":
            into.dropped_mb.append(drop_from_cache(ledger) or 0.0)
        pane = self.spawn(ledger, config)
        try:
            painted, _ = pane.wait_for(overview_painted, "the painted overview")
            into.paint[temp].append(painted - pane.started)
            pane.settle()
            sent = pane.send(group_key(SWITCH_GROUP))
            shown, _ = pane.wait_for(page_shown(SWITCH_GROUP), f"the {SWITCH_GROUP} page")
            if temp == "warm":
                into.settled.append(shown - sent)
            pane.send("o")
            pane.wait_for(overview_painted, "the overview again")
            pane.send("Enter")  # the held job at the cursor
            pane.wait_for(job_screen_shown, "a held job's screen")
            rss = pane.peak_rss_mb()
            if rss is not None:
                into.rss_mb.append(rss)
        except RoundFailed as e:
            into.errors.append(f"{temp} paint: {e}")
        finally:
            pane.quit()

    def key_round(self, ledger: Path, config: Path, temp: str, into: Figures) -> None:
        """The group key sent in the first frame, until its page is on the pane."""
        if temp == "cold":
            into.dropped_mb.append(drop_from_cache(ledger) or 0.0)
        pane = self.spawn(ledger, config)
        try:
            framed, _ = pane.wait_for(any_frame, "the first frame")
            into.first_frame[temp].append(framed - pane.started)
            sent = pane.send(group_key(SWITCH_GROUP))
            shown, _ = pane.wait_for(page_shown(SWITCH_GROUP), f"the {SWITCH_GROUP} page after an early key")
            into.first_key[temp].append(shown - sent)
        except RoundFailed as e:
            into.errors.append(f"{temp} first key: {e}")
        finally:
            pane.quit()

    def live_round(self, ledger: Path, config: Path, commits: int, into: Figures) -> None:
        """Commits in another process, each until the reserving tile's count changed on the pane."""
        pane = self.spawn(ledger, config)
        writer = subprocess.Popen([sys.executable, str(SCRIPT), "--writer", str(ledger), str(config)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                  env={**os.environ, **self.env})
        assert writer.stdin is not None and writer.stdout is not None
        rng = random.Random(7)
        try:
            pane.wait_for(lambda t: overview_painted(t) and tile_count(t, LIVE_GROUP) is not None, "the tiles")
            pane.settle()
            if writer.stdout.readline().strip() != "ready":
                raise RoundFailed("the writer did not start")
            for _ in range(commits):
                time.sleep(rng.uniform(0.05, 0.35))  # spread the commits over the console's poll cycle
                before = tile_count(pane.text(), LIVE_GROUP)
                writer.stdin.write("go\n")
                writer.stdin.flush()
                seen: float | None
                try:
                    seen, _ = pane.wait_for(partial(count_changed, before), "the changed count", timeout=10.0)
                except RoundFailed:
                    seen = None
                said = writer.stdout.readline()
                if not said.strip():
                    raise RoundFailed("the writer ended")
                committed = float(said)
                if seen is None:
                    into.missed += 1
                else:
                    into.lags.append(seen - committed)
        except RoundFailed as e:
            into.errors.append(f"live: {e}")
        finally:
            writer.stdin.close()
            writer.wait(timeout=30)
            pane.quit()

    def close(self) -> None:
        self.tmux.close()


def reclaim_argv() -> list[str]:
    """The `reclaim` command as installed beside this interpreter (what a person runs); `python -m console` when
    there is no such script."""
    script = Path(sys.executable).parent / "reclaim"
    return [str(script)] if script.exists() else [sys.executable, "-m", "console"]


def child_env(workdir: Path) -> dict[str, str]:
    """What every process started here gets on top of this one's environment: a signing key of its own folder
    (nothing is written to the account's home), and this script's import path."""
    env = {"RECLAIM_SIGNING_KEY_FILE": str(workdir / "signing-key")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def help_seconds(rounds: int, workdir: Path) -> list[float]:
    """`reclaim --help` from start to exit, `rounds` times after one untimed run (warm)."""
    argv = [*reclaim_argv(), "--help"]
    env = {**os.environ, **child_env(workdir), "COLUMNS": str(COLS)}
    subprocess.run(argv, capture_output=True, env=env, timeout=60, check=True)
    out = []
    for _ in range(rounds):
        t0 = time.monotonic()
        subprocess.run(argv, capture_output=True, env=env, timeout=60, check=True)
        out.append(time.monotonic() - t0)
    return out


# -- the writer ------------------------------------------------------------------------------------------------------


def child_writer(ledger: str, config_path: str) -> None:
    """Commit one reservation per 'go' line on stdin; answer with the monotonic time after COMMIT."""
    from ledger.clock import SystemClock
    from ledger.config import load_config
    from ledger.db import connect
    from ledger.reservation import reserve

    config = load_config(config_path)
    operation = sorted(config.operations)[0]
    conn = connect(ledger)
    clock = SystemClock()
    print("ready", flush=True)
    for i, line in enumerate(sys.stdin):
        if line.strip() != "go":
            break
        res = reserve(conn, config, operation, {"input": f"live lag probe {i}"}, clock=clock,
                      job_id=f"live-probe-{os.getpid()}-{i}", target=f"live-probe-{os.getpid()}-{i}")
        committed = time.monotonic()
        if res.outcome != "reserved":
            raise SystemExit(f"writer: reserve said {res.outcome}")
        print(f"{committed:.6f}", flush=True)
    conn.close()


# -- rows ------------------------------------------------------------------------------------------------------------


def spread(values: list[float], unit: str = "s") -> str:
    """'min / median / max' with the unit (ms under a second); 'not measured' when empty."""
    if not values:
        return "not measured"
    if unit == "MB":
        return " / ".join(f"{v:,.0f}" for v in (min(values), statistics.median(values), max(values))) + " MB"
    three = (min(values), statistics.median(values), max(values))
    if max(values) < 1.0:
        return " / ".join(f"{v * 1000:,.0f}" for v in three) + " ms"
    return " / ".join(f"{v:,.2f}" for v in three) + " s"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def lag_text(f: Figures) -> str:
    if not f.lags:
        return f"no change seen ({f.missed} missed)" if f.missed else "not measured"
    missed = f", {f.missed} missed" if f.missed else ""
    return f"{pct(f.lags, 0.5) * 1000:,.0f} / {pct(f.lags, 0.95) * 1000:,.0f} ms{missed}"


def ratio(a: list[float], b: list[float]) -> float | None:
    """median(a) / median(b), or None when either is missing."""
    if not a or not b or not statistics.median(b):
        return None
    return statistics.median(a) / statistics.median(b)


def rows_for(label: str, small_label: str, big: Figures, small: Figures, helps: list[float], rounds: int,
             commits: int, load: tuple[float, float]) -> list[dict[str, Any]]:
    """bench.py's rows: each figure on the big ledger beside the small one (ratio: big median / small median)."""
    dropped = statistics.median(big.dropped_mb) if big.dropped_mb else None
    cold = ("cold: ledger + -wal/-shm fsynced and dropped by posix_fadvise(DONTNEED)"
            + (f", page cache -{dropped:,.0f} MB (median)" if dropped is not None else ""))
    key = group_key(SWITCH_GROUP)
    rows: list[dict[str, Any]] = [
        {"figure": f"`reclaim console` first paint, warm: spawn -> overview painted ({label})",
         "value": spread(big.paint["warm"]), "baseline": f"{spread(small.paint['warm'])} on {small_label}",
         "ratio": ratio(big.paint["warm"], small.paint["warm"]),
         "note": f"min / median / max of {rounds}; aim < 0.5 s; `reclaim --help` to exit: {spread(helps)}"},
        {"figure": f"`reclaim console` first paint, cold ({label})",
         "value": spread(big.paint["cold"]), "baseline": f"{spread(small.paint['cold'])} on {small_label}",
         "ratio": ratio(big.paint["cold"], small.paint["cold"]), "note": f"aim < 2 s; {cold}"},
        {"figure": f"first key: group key {key} sent in the first frame -> {SWITCH_GROUP} page on the pane, warm",
         "value": spread(big.first_key["warm"]), "baseline": f"{spread(small.first_key['warm'])} on {small_label}",
         "ratio": ratio(big.first_key["warm"], small.first_key["warm"]),
         "note": f"aim < 0.2 s; the first frame came {spread(big.first_frame['warm'])} after the spawn "
                 f"({spread(small.first_frame['warm'])} on {small_label})"},
        {"figure": "first key, cold",
         "value": spread(big.first_key["cold"]), "baseline": f"{spread(small.first_key['cold'])} on {small_label}",
         "ratio": ratio(big.first_key["cold"], small.first_key["cold"]),
         "note": f"cold as above; the first frame came {spread(big.first_frame['cold'])} after the spawn "
                 f"({spread(small.first_frame['cold'])} on {small_label})"},
        {"figure": f"settled switch: key {key} on a settled overview -> {SWITCH_GROUP} page (warm)",
         "value": spread(big.settled), "baseline": f"{spread(small.settled)} on {small_label}",
         "ratio": ratio(big.settled, small.settled), "note": "pane polled every 5 ms"},
        {"figure": "console peak RSS (VmHWM) after paint, switch and a held job's screen",
         "value": spread(big.rss_mb, "MB"), "baseline": f"{spread(small.rss_mb, 'MB')} on {small_label}",
         "ratio": ratio(big.rss_mb, small.rss_mb), "note": "aim < 80 MB; warm and cold rounds"},
        {"figure": f"live lag p50 / p95: commit in another process -> tile count on the pane ({commits} commits)",
         "value": lag_text(big), "baseline": f"{lag_text(small)} on {small_label}", "ratio": None,
         "note": f"load average {load[0]:.2f} before, {load[1]:.2f} after"},
    ]
    errors = big.errors + small.errors
    if errors:
        rows.append({"figure": f"rounds that failed: {len(errors)}", "value": "see note", "baseline": "-",
                     "ratio": None, "note": "; ".join(errors)[:400]})
    return rows


def ensure_ledger(workdir: Path, n: int, name: str) -> tuple[Path, Path]:
    """A fresh fixture ledger and config of `n` jobs in `workdir` (make_big_ledger.py)."""
    sys.path.insert(0, str(SCRIPT.parent))
    import make_big_ledger as mbl

    path, cfg = workdir / f"{name}.db", workdir / f"{name}.toml"
    info = mbl.generate(path, n, min(3000, max(1, n // 300)), 14, time.time(), 1, "full")
    cfg.write_text(mbl.config_toml(max(info["max_per_day"] * 2, 1000)), encoding="utf-8")
    return path, cfg


def job_count(ledger: Path) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])


def run(ledger: Path | None = None, config: Path | None = None, n: int = 1_000_000, rounds: int = 5,
        commits: int = 20, small: int = 1_000, workdir: Path | None = None) -> list[dict[str, Any]]:
    """Figure rows for bench.py (figure, value, baseline, ratio, note): `reclaim console` on `ledger` (made with
    `n` jobs when None) beside a `small`-job ledger, each figure over `rounds` rounds."""
    # The console as installed caches its bytecode: a shell's PYTHONDONTWRITEBYTECODE, passed on to the tmux server
    # and so to every console started in it, would time a recompile of every module of a source checkout instead.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not Path(TMUX).exists():
        return [{"figure": "`reclaim console` in tmux", "value": "not run", "baseline": "-", "ratio": None,
                 "note": "tmux is not installed"}]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-console-", dir=workdir) as d:
        folder = Path(d)
        if ledger is None or config is None:
            ledger, config = ensure_ledger(folder, n, "big")
        small_ledger, small_config = ensure_ledger(folder, small, "small")
        big_f, small_f = Figures(), Figures()
        bench = Bench(folder)
        try:
            helps = help_seconds(rounds, folder)
            sides = ((ledger.resolve(), config.resolve(), big_f), (small_ledger, small_config, small_f))
            for i in range(rounds):  # warm and cold interleaved, their order alternating; the two ledgers too
                for temp in ("warm", "cold") if i % 2 == 0 else ("cold", "warm"):
                    for path, cfg, into in sides if i % 2 == 0 else sides[::-1]:
                        bench.paint_round(path, cfg, temp, into)
                        bench.key_round(path, cfg, temp, into)
            bench.live_round(ledger.resolve(), config.resolve(), commits, big_f)
            bench.live_round(small_ledger, small_config, commits, small_f)
        finally:
            bench.close()
        label = f"{job_count(ledger):,}-job ledger"
    return rows_for(label, f"{small:,} jobs", big_f, small_f, helps, rounds, commits, (load_before[0],
                                                                                         os.getloadavg()[0]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledger", type=Path, help="an existing big ledger (default: generate one); live lag writes to it")
    ap.add_argument("--config", type=Path, help="its config TOML (make_big_ledger.py --config-out)")
    ap.add_argument("-n", type=int, default=1_000_000, help="jobs to generate when no --ledger (default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per figure, warm and cold each (default 5)")
    ap.add_argument("--commits", type=int, default=20, help="live-lag commits (default 20)")
    ap.add_argument("--small", type=int, default=1_000, help="jobs in the baseline ledger (default 1,000)")
    ap.add_argument("--dir", type=Path, default=None, help="folder for temporary ledgers (default: $TMPDIR)")
    ap.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.writer:
        child_writer(*args.paths)
        return 0
    for row in run(args.ledger, args.config, args.n, args.rounds, args.commits, args.small, args.dir):
        r = row["ratio"]
        shown = "" if r is None else f"  ratio {r:.2f}"
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}{shown}  [{row['note']}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
