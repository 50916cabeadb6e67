"""`reclaim simulator` on a port that is already taken: one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def test_simulator_on_a_busy_port_says_so_in_one_line(tmp_path: Path) -> None:
    # Occupy a port ourselves: bound by the OS (port 0) and listening, so nothing else can take it meanwhile.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        res = subprocess.run([str(BIN / "reclaim"), "simulator", "--port", str(port)], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert f"port {port} on 127.0.0.1 is in use" in lines[0], lines[0]
    assert "--port 0" in lines[0], lines[0]
    assert "listening on" not in res.stdout, res.stdout
