"""Benchmark the Textual console on a big ledger, beside a naive "load every row into a DataTable" app.

Every measurement runs in its own child process (this script with --child ...), so peak RSS
(VmHWM from /proc/<pid>/status, read by the child itself or by the parent just before a kill;
resource.getrusage where /proc is missing) belongs to that measurement alone. Each child drives its app headless with `app.run_test(size=(120, 40))`.

  first paint   from the child's start (before importing the app's modules) until the overview's
                held table (#held-table) has rows; baseline: until the naive app's DataTable holds
                every row of `jobs` and has painted (killed after --naive-timeout s: ">120 s").
  group switch  from pressing the consumed group's key until the job list (#jobs-table) shows the
                first page of the consumed group; baseline: the naive app clears its table and adds
                the consumed rows again. The key is pressed as soon as the overview's held table has
                rows (while the overview is still drawing its first frame), and the clock stops once
                `pilot.press` returns and the page is there: `pilot.press` waits for two 20 ms slices in
                which the process is idle, so even a key bound to nothing measures ~105-130 ms this way.
                Also reported: "frame", the time until the first frame drawn with the page on screen (the
                screen's first refresh once the page is in the table: public `Widget.call_after_refresh`).
  settled switch  the same from an overview that has finished drawing (back to it, a pause, then the
                reserving group's key): pilot.press figure and frame figure.
  memory        peak RSS of the child after the first paint and the switch.
  live lag      a second process commits a reservation (ledger.reservation.reserve); time from its
                COMMIT (time.monotonic, shared by both processes) until the overview's group tiles
                display a changed count; p50 / p95 over --commits commits, spaced at random.
                Baseline: the same on a small ledger (--small jobs), to show what the size costs.

If console.app (make_app) cannot be imported, every row says "console not built" and nothing fails.

    .venv/bin/python scripts/bench_console.py [--ledger big.db --config big.toml] [-n 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

T_START = time.monotonic()  # the child's start: first paint counts imports too
SCRIPT = Path(__file__).resolve()
SIZE = (120, 40)
OPERATOR = "alice"
WAIT_S = 60.0


def _rss_mb() -> float:
    """This process's peak RSS in MB.

    /proc/self/status VmHWM first: ru_maxrss survives fork and exec on Linux, so a child started by a
    big parent would report the parent's peak instead of its own.
    """
    hwm = _vm_hwm_mb(os.getpid())
    if hwm is not None:
        return hwm
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _emit(**kw: Any) -> None:
    print("RESULT " + json.dumps(kw), flush=True)


async def _wait_until(pred: Any, timeout: float = WAIT_S, step: float = 0.002) -> float | None:
    """Poll `pred` on the app's event loop; the monotonic time it first held, or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return time.monotonic()
        except Exception:  # widgets may not exist yet while a screen composes
            pass
        await asyncio.sleep(step)
    return None


def _rows(screen: Any, selector: str) -> int:
    from textual.widgets import DataTable

    return int(screen.query_one(selector, DataTable).row_count)


def _group_key(group: str) -> str | None:
    """The key bound to the action group('<group>') in the console's bindings (None if not found)."""
    try:
        from console import bindings
    except ImportError:
        return None
    for b in getattr(bindings, "APP", []):
        if getattr(b, "action", "") in (f"group('{group}')", f'group("{group}")'):
            return str(b.key).split(",")[0].strip()
    return None


# -- children -----------------------------------------------------------------------------------------------


def child_console(ledger: str, config_path: str, mode: str, commits: int) -> None:
    """Measure the real console: first paint, group switch (mode=paint) or live lag (mode=live)."""
    try:
        from console.app import make_app
    except ImportError as e:
        _emit(kind="missing", error=f"{type(e).__name__}: {e}")
        return
    from ledger.config import load_config

    config = load_config(config_path)
    app = make_app(ledger, config, OPERATOR, read_only=False)

    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            painted = await _wait_until(lambda: _rows(app.screen, "#held-table") > 0)
            if painted is None:
                _emit(kind="paint", error=f"#held-table had no rows within {WAIT_S:.0f} s")
                return
            _emit(kind="paint", seconds=painted - T_START, rss_mb=_rss_mb())
            if mode == "paint":
                await switch(pilot)
            else:
                await live(pilot)

    async def frame_after(shown: Any) -> float | None:
        """When the first frame with the page was drawn: as soon as `shown()` holds (the page is in the table),
        ask the screen to call back after its next refresh (public `Widget.call_after_refresh`: it runs once the
        screen has composited and displayed its dirty widgets, or at once when nothing is left to draw)."""
        drawn: list[float] = []
        if await _wait_until(shown) is None:
            return None
        app.screen.call_after_refresh(lambda: drawn.append(time.monotonic()))
        await _wait_until(lambda: bool(drawn), timeout=5.0)
        return drawn[0] if drawn else None

    async def switch_to(pilot: Any, group: str, kind: str) -> None:
        key = _group_key(group)

        def shown() -> bool:
            page = getattr(app.screen, "page", None)
            return _rows(app.screen, "#jobs-table") > 0 and (page is None or page.group == group)

        t0 = time.monotonic()
        frame = asyncio.ensure_future(frame_after(shown))  # watches while the key is handled
        if key is not None:
            await pilot.press(key)
        else:
            await app.run_action(f"group('{group}')")
        done = await _wait_until(shown)
        if done is None:
            frame.cancel()
            _emit(kind=kind, error=f"#jobs-table did not show the {group} group within {WAIT_S:.0f} s")
            return
        drawn = await frame
        _emit(kind=kind, seconds=done - t0, frame_seconds=(drawn - t0) if drawn is not None else None,
              rss_mb=_rss_mb(), via=f"key {key}" if key else "action")

    async def switch(pilot: Any) -> None:
        await switch_to(pilot, "consumed", "switch")
        await pilot.press("o")
        await pilot.pause(0.5)  # let the overview finish drawing (a bench may wait; tests may not)
        await switch_to(pilot, "reserving", "settled")

    async def live(pilot: Any) -> None:
        def counts() -> dict[str, Any]:
            return {t.group: t.count for t in app.screen.query("GroupTile")}

        ready = await _wait_until(lambda: counts() and None not in counts().values())
        if ready is None:
            _emit(kind="live", error="no GroupTile with a count on the overview")
            return
        writer = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--writer", ledger, config_path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )
        assert writer.stdin is not None and writer.stdout is not None
        loop = asyncio.get_running_loop()
        lags: list[float] = []
        misses = 0
        rng = random.Random(7)
        try:
            if (await loop.run_in_executor(None, writer.stdout.readline)).strip() != "ready":
                raise RuntimeError("writer did not start")
            for _ in range(commits):
                await asyncio.sleep(rng.uniform(0.05, 0.35))  # spread commits over the poll cycle
                before = counts()
                writer.stdin.write("go\n")
                writer.stdin.flush()
                seen = await _wait_until(lambda before=before: counts() != before, timeout=10.0)
                line = await loop.run_in_executor(None, writer.stdout.readline)
                committed = float(line)
                if seen is None:
                    misses += 1
                else:
                    lags.append(seen - committed)
        finally:
            writer.stdin.close()
            writer.wait(timeout=10)
        lags.sort()
        _emit(kind="live", lags=lags, misses=misses, rss_mb=_rss_mb())

    asyncio.run(run())


def child_naive(ledger: str) -> None:
    """The naive baseline: one DataTable holding every row of `jobs`, loaded on mount."""
    import sqlite3

    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    cols = "created_at, job_id, operation, state, target, owner, attempt, COALESCE(held_reason, last_error, handle, '')"

    class Naive(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(id="all")

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns("created", "job", "operation", "state", "target", "owner", "try", "last word")
            conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
            self.all_rows = conn.execute(f"SELECT {cols} FROM jobs").fetchall()
            conn.close()
            table.add_rows(self.all_rows)

        def show_state(self, state: str) -> int:
            table = self.query_one(DataTable)
            table.clear()
            rows = [r for r in self.all_rows if r[3] == state]
            table.add_rows(rows)
            return len(rows)

    app = Naive()

    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            total = None
            while total is None:
                try:
                    total = len(app.all_rows)
                except AttributeError:
                    await asyncio.sleep(0.01)
            await _wait_until(lambda: _rows(app.screen, "#all") >= total, timeout=10_000)
            await pilot.pause()  # let it paint
            _emit(kind="paint", seconds=time.monotonic() - T_START, rss_mb=_rss_mb(), rows=total)
            t0 = time.monotonic()
            n = app.show_state("consumed")
            await _wait_until(lambda: _rows(app.screen, "#all") >= n, timeout=10_000)
            await pilot.pause()
            _emit(kind="switch", seconds=time.monotonic() - t0, rss_mb=_rss_mb(), rows=n)

    asyncio.run(run())


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


# -- parent -------------------------------------------------------------------------------------------------


def _vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def run_child(args: list[str], phase_timeout: float) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Run a child; each RESULT line must arrive within `phase_timeout` s of the previous one.

    Returns the results by kind and {"killed": bool, "hwm_mb": peak RSS seen if killed, "stderr": tail}.
    """
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    results: dict[str, dict[str, Any]] = {}
    info: dict[str, Any] = {"killed": False, "hwm_mb": None, "stderr": ""}
    deadline = time.monotonic() + phase_timeout
    buf = ""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            info["hwm_mb"] = _vm_hwm_mb(proc.pid)
            proc.kill()
            info["killed"] = True
            break
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
        if not ready:
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536).decode()
        if not chunk:
            break
        buf += chunk
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            if line.startswith("RESULT "):
                r = json.loads(line[7:])
                results[r["kind"]] = r
                deadline = time.monotonic() + phase_timeout
    proc.wait()
    info["stderr"] = proc.stderr.read()[-2000:]
    return results, info


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, round(p * (len(values) - 1)))]


def _fmt_s(r: dict[str, Any] | None, killed: bool, limit: float) -> str:
    if r is None:
        return f">{limit:.0f} s (killed)" if killed else "not measured"
    if "error" in r:
        return f"failed: {r['error']}"
    return f"{r['seconds']:.2f} s"


def _frame_note(r: dict[str, Any] | None) -> str:
    if not r or not r.get("frame_seconds"):
        return "frame not measured"
    return f"first frame with the page at {r['frame_seconds'] * 1000:.0f} ms"


def console_importable() -> str | None:
    """None when console.app.make_app imports, else why not (checked in a child, so nothing loads here)."""
    res = subprocess.run([sys.executable, "-c", "from console.app import make_app"], capture_output=True, text=True)
    if res.returncode == 0:
        return None
    return (res.stderr.strip().splitlines() or ["import failed"])[-1]


def ensure_ledger(workdir: Path, n: int, name: str) -> tuple[Path, Path, float]:
    """A fresh fixture ledger and config of `n` jobs in `workdir`; returns (ledger, config, seconds)."""
    import make_big_ledger as mbl

    path, cfg = workdir / f"{name}.db", workdir / f"{name}.toml"
    info = mbl.generate(path, n, min(3000, max(1, n // 300)), 14, time.time(), 1, "full")
    cfg.write_text(mbl.config_toml(max(info["max_per_day"] * 2, 1000)), encoding="utf-8")
    return path, cfg, info["seconds"]


def run(ledger: Path | None = None, config: Path | None = None, n: int = 1_000_000, commits: int = 30,
        small: int = 10_000, naive_timeout: float = 120.0, workdir: Path | None = None) -> list[dict[str, Any]]:
    """Figure rows for bench.py."""
    why = console_importable()
    names = ["console first paint", "console group switch (consumed)", "console settled switch (frame)",
             "console peak RSS",
             f"console live lag p50 / p95 ({commits} commits)"]
    if why is not None:
        return [{"figure": f"{name} (1M ledger)", "value": "console not built", "baseline": "-", "ratio": None,
                 "note": why[:80]} for name in names]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="reclaim-bench-console-", dir=workdir) as d:
        if ledger is None or config is None:
            ledger, config, _ = ensure_ledger(Path(d), n, "big")
        import sqlite3

        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
            total = c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        label = f"{total:,}-job ledger"
        con, con_info = run_child(["--child", "paint", str(ledger), str(config)], WAIT_S + 30)
        nai, nai_info = run_child(["--child", "naive", str(ledger), str(config)], naive_timeout)
        if "missing" in con:
            return [{"figure": f"{name} ({label})", "value": "console not built", "baseline": "-", "ratio": None,
                     "note": con["missing"]["error"][:80]} for name in names]

        def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | str | None:
            """baseline / console; a lower bound (">N") when the baseline was killed."""
            if not a or "seconds" not in a or not a["seconds"]:
                return None
            if b and "seconds" in b:
                return float(b["seconds"]) / float(a["seconds"])
            if b is None and nai_info["killed"]:
                return f">{naive_timeout / float(a['seconds']):.0f}"
            return None

        err = (con_info["stderr"].strip().splitlines() or [""])[-1][:80]
        rows.append({
            "figure": f"console first paint: start -> #held-table rows ({label})",
            "value": _fmt_s(con.get("paint"), con_info["killed"], WAIT_S),
            "baseline": _fmt_s(nai.get("paint"), nai_info["killed"], naive_timeout) + " naive all-rows DataTable",
            "ratio": ratio(con.get("paint"), nai.get("paint")),
            "note": "ratio = baseline / console (x faster)" + (f"; {err}" if "paint" not in con else ""),
        })
        rows.append({
            "figure": "console group switch: key -> consumed first page",
            "value": _fmt_s(con.get("switch"), con_info["killed"], WAIT_S),
            "baseline": (_fmt_s(nai.get("switch"), nai_info["killed"], naive_timeout) + " naive re-add rows")
            if "paint" in nai else "not reached (paint killed)",
            "ratio": ratio(con.get("switch"), nai.get("switch")) if "paint" in nai else None,
            "note": (f"via {con['switch'].get('via')}; " if "switch" in con and "via" in con["switch"] else "")
            + _frame_note(con.get("switch")) + "; pressed mid-first-frame, pilot.press floor ~105-130 ms",
        })
        settled = con.get("settled")
        rows.append({
            "figure": "console group switch from a settled overview: key -> reserving page drawn (frame)",
            "value": f"{settled['frame_seconds'] * 1000:.0f} ms" if settled and settled.get("frame_seconds")
            else _fmt_s(settled, con_info["killed"], WAIT_S),
            "baseline": _fmt_s(settled, con_info["killed"], WAIT_S) + " until pilot.press returns",
            "ratio": None,
            "note": "frame = the screen's first refresh with the page (Widget.call_after_refresh)",
        })
        con_mb = max((r.get("rss_mb") or 0 for r in con.values()), default=0) or None
        nai_mb = max((r.get("rss_mb") or 0 for r in nai.values()), default=0) or nai_info["hwm_mb"]
        rows.append({
            "figure": "console peak RSS (paint + switch, own process)",
            "value": f"{con_mb:,.0f} MB" if con_mb else "not measured",
            "baseline": (f"{nai_mb:,.0f} MB" if nai_mb else "not measured")
            + (" naive (at kill)" if nai_info["killed"] else " naive"),
            "ratio": ((">" if nai_info["killed"] else "") + f"{nai_mb / con_mb:.1f}") if con_mb and nai_mb else None,
            "note": "ratio = baseline / console" + ("; naive still growing when killed" if nai_info["killed"] else ""),
        })
        big, _ = run_child(["--child", "live", str(ledger), str(config), "--commits", str(commits)], WAIT_S + 60)
        small_ledger, small_cfg, _ = ensure_ledger(Path(d), small, "small")
        little, _ = run_child(["--child", "live", str(small_ledger), str(small_cfg), "--commits", str(commits)],
                              WAIT_S + 60)

        def lag(r: dict[str, Any] | None) -> str:
            if r is None:
                return "not measured"
            if "error" in r:
                return f"failed: {r['error']}"
            if not r["lags"]:
                return f"no change seen ({r['misses']} misses)"
            lags = r["lags"]
            miss = f", {r['misses']} missed" if r["misses"] else ""
            return f"{_pct(lags, 0.5) * 1000:,.0f} / {_pct(lags, 0.95) * 1000:,.0f} ms{miss}"

        rows.append({
            "figure": f"console live lag p50 / p95: commit in another process -> counts shown ({commits} commits)",
            "value": lag(big.get("live")),
            "baseline": lag(little.get("live")) + f" on {small:,} jobs",
            "ratio": None,
            "note": "follower polls data_version every 0.2 s",
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ledger", type=Path, help="an existing big ledger (default: generate one)")
    ap.add_argument("--config", type=Path, help="its config TOML (make_big_ledger.py --config-out)")
    ap.add_argument("-n", type=int, default=1_000_000, help="jobs to generate when no --ledger (default 1,000,000)")
    ap.add_argument("--commits", type=int, default=30, help="live-lag commits (default 30)")
    ap.add_argument("--small", type=int, default=10_000, help="jobs in the live-lag baseline ledger (default 10,000)")
    ap.add_argument("--naive-timeout", type=float, default=120.0, help="kill the naive baseline after this (s)")
    ap.add_argument("--dir", type=Path, default=None, help="folder for temporary ledgers (default: $TMPDIR)")
    ap.add_argument("--child", choices=("paint", "naive", "live"), help=argparse.SUPPRESS)
    ap.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.writer:
        child_writer(*args.paths)
        return 0
    if args.child == "naive":
        child_naive(args.paths[0])
        return 0
    if args.child in ("paint", "live"):
        child_console(args.paths[0], args.paths[1], args.child, args.commits)
        return 0
    sys.path.insert(0, str(SCRIPT.parent))
    for row in run(args.ledger, args.config, args.n, args.commits, args.small, args.naive_timeout, args.dir):
        r = row["ratio"]
        ratio = "" if r is None else f"  ratio {r:.2f}" if isinstance(r, float) else f"  ratio {r}"
        print(f"{row['figure']}: {row['value']}  vs  {row['baseline']}{ratio}  {row['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
