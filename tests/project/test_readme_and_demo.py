"""The README's quick start, run literally; and `reclaim demo` headless, leaving no process behind.

The quick start's `reclaim init` writes the simulator's port into the starter config (8765 when free, else
another free one) and `reclaim simulator --config reclaim.toml` listens there. The test runs the very same
commands, unchanged, while it holds 8765 itself (when nothing else does), so `init` picks another free port and
two runs (or anything else on 8765) never collide.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- quickstart -->\s*```sh\n(.*?)```\s*<!-- /quickstart -->", text, re.S)
    assert block, "the README lost its quick start block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _python_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- python -->\s*```python\n(.*?)```\s*<!-- /python -->", text, re.S)
    assert block, "the README lost its Python block"
    return block.group(1)


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for k in ("RECLAIM_LEDGER", "RECLAIM_CONFIG", "RECLAIM_OPERATOR"):
        env.pop(k, None)
    commands = _quickstart_commands()
    sim_cmds = [c for c in commands if shlex.split(c.rstrip("&"))[:2] == ["reclaim", "simulator"]]
    assert len(sim_cmds) == 1 and sim_cmds[0].endswith("&"), commands
    assert "--config reclaim.toml" in sim_cmds[0] and "--port" not in sim_cmds[0], sim_cmds[0]
    sim_url = ""
    background: list[subprocess.Popen[bytes]] = []
    outputs: list[tuple[str, int, str]] = []
    held = socket.socket()
    try:
        with contextlib.suppress(OSError):  # already taken by something else: taken all the same
            held.bind(("127.0.0.1", 8765))
            held.listen(1)
        for cmd in commands:
            if cmd.endswith("&"):
                argv = shlex.split(cmd[:-1])
                background.append(subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE))
                assert background[-1].stdout is not None
                line = background[-1].stdout.readline().decode()
                assert "listening on" in line, line
                if cmd == sim_cmds[0]:
                    sim_url = line.split("listening on", 1)[1].strip()
                continue
            res = subprocess.run(shlex.split(cmd), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            outputs.append((cmd, res.returncode, res.stdout + res.stderr))
            assert res.returncode == 0, (cmd, res.stdout, res.stderr)
        assert sim_url.startswith("http://127.0.0.1:") and not sim_url.endswith(":8765"), sim_url
        assert f'base_url = "{sim_url}"' in (tmp_path / "reclaim.toml").read_text(encoding="utf-8")
        status = subprocess.run(["reclaim", "status", "--json"], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=60)
        doc = json.loads(status.stdout)
        assert doc["states"]["consumed"] == 1
        submits = [out for cmd, _, out in outputs if " submit " in f" {cmd} "]
        assert "reserved" in submits[0] and "duplicate" in submits[1]
        assert len(list((tmp_path / "results").glob("*.json"))) == 1
        calls = json.loads(subprocess.run(["python", "-c", "import urllib.request;print(urllib.request.urlopen("
                                           f"'{sim_url}/_sim/calls').read().decode())"],
                                          env=env, capture_output=True, text=True, timeout=30).stdout)
        assert calls["by_method"]["create"] == 1
        # The README's Python block, in the same folder, after the commands: one more job, sent once, consumed.
        ran = subprocess.run([sys.executable, "-c", _python_block()], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=60)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines() == ["reserved submitted", "consumed"], ran.stdout
        doc = json.loads(subprocess.run(["reclaim", "status", "--json"], cwd=tmp_path, env=env, capture_output=True,
                                        text=True, timeout=60).stdout)
        assert doc["states"]["consumed"] == 2 and len(list((tmp_path / "results").glob("*.json"))) == 2
        with urllib.request.urlopen(f"{sim_url}/_sim/calls", timeout=30) as reply:
            assert json.loads(reply.read())["by_method"]["create"] == 2  # the new job sent once
    finally:
        held.close()
        for p in background:
            p.terminate()
            p.wait(10)


def _held_job(folder: Path) -> str | None:
    if not (folder / "reclaim.db").exists():
        return None
    res = subprocess.run([str(BIN / "reclaim"), "jobs", "held", "--json", "--ledger", str(folder / "reclaim.db")],
                         capture_output=True, text=True, timeout=30)
    jobs = json.loads(res.stdout)["jobs"] if res.returncode == 0 else []
    return jobs[0]["job_id"] if jobs else None


def _reached(folder: Path) -> set[str]:
    """Every state the event log shows a job moving into."""
    if not (folder / "reclaim.db").exists():
        return set()
    show = subprocess.run([str(BIN / "reclaim"), "events", "--json", "--after", "0", "--ledger",
                           str(folder / "reclaim.db")], capture_output=True, text=True, timeout=60)
    return {json.loads(line)["to_state"] for line in show.stdout.splitlines() if line.startswith("{")}


EVERY_GROUP = {"reserving", "submitted", "done", "consumed", "held", "failed", "rejected"}


def test_demo_headless_fills_every_group_and_leaves_no_process(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    # The demo runs until every group was reached (however fast this machine is), then is stopped by
    # SIGTERM, as an operator would; its own deadline only bounds a run that never gets there.
    demo = subprocess.Popen(
        [str(BIN / "reclaim"), "demo", "--no-ui", "--seconds", "600", "--rate", "6", "--dir", str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # A person closes one held job while the demo runs, so the resolved group is reached too.
        _wait(lambda: _held_job(folder) is not None, 60, "a held job in the demo")
        job_id = _held_job(folder)
        reject = subprocess.run(
            [str(BIN / "reclaim"), "reject", str(job_id), "--reason", "duplicate of a manual run",
             "--ledger", str(folder / "reclaim.db"), "--config", str(folder / "reclaim.toml"), "--operator", "bob"],
            capture_output=True, text=True, timeout=30)
        assert reject.returncode == 0, reject.stderr
        _wait(lambda: EVERY_GROUP <= _reached(folder), 300, f"every group ({sorted(EVERY_GROUP)}) in the demo")
        demo.send_signal(signal.SIGTERM)
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
    res = subprocess.CompletedProcess(demo.args, demo.returncode, out, err)
    assert res.returncode == 0, res.stderr
    url = re.search(r"simulator at (http://127\.0\.0\.1:(\d+))", res.stdout)
    assert url, res.stdout
    # Nothing the demo started is still running: the simulator's port is closed, no worker names the folder.
    _wait(lambda: not _port_open(int(url.group(2))), 10, "the simulator to stop")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert str(folder) not in cmdline or "pytest" in cmdline, f"left running: {cmdline!r}"
    # Every state the worker moves jobs through was reached, held included (read from the event log).
    assert EVERY_GROUP <= _reached(folder)
    # The last line suggests a command that runs as printed, from where the demo was started.
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("demo stopped; the ledger stays: "), res.stdout
    status = subprocess.run(shlex.split(last.split(": ", 1)[1]), capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "jobs by state" in status.stdout, (last, status.stderr)


def test_a_second_demo_refuses_while_another_process_has_the_ledger_open(tmp_path: Path) -> None:
    """`reclaim demo` over a folder whose ledger a console (here: any process) still has open refuses with exit 8,
    names the process, starts nothing and removes nothing; once that process is gone, the check passes."""
    folder = tmp_path / "demo"
    folder.mkdir()
    ledger = folder / "reclaim.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE t(x)');"
         " c.commit(); print('open', flush=True); sys.stdin.readline()", str(ledger)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        before = ledger.read_bytes()
        r = subprocess.run([str(BIN / "reclaim"), "demo", "--no-ui", "--seconds", "1", "--dir", str(folder)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 8, r
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"reclaim: error: demo: {ledger} is open in process {holder.pid} ("), line
        assert line.endswith("start another demo beside it with --dir demo-2; nothing was removed"), line
        assert ledger.read_bytes() == before and not (folder / "demo.log").exists()  # nothing started or removed
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    from console.demo import ledger_holders

    assert ledger_holders(ledger) == []
