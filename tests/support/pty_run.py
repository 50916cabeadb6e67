"""Run a command with its stdout on a new pseudo-terminal (raw: no newline translation); print as hex what
that terminal received, then exit with the command's code. stderr passes through. For tests that check
what a command shows on a terminal: `run_cli(..., prefix=[sys.executable, "tests/support/pty_run.py"])`.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import tty

TIMEOUT = 60.0


def main(argv: list[str]) -> int:
    """Run `argv` on a terminal; print what it wrote there as hex; return its exit code."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen(argv, stdout=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], TIMEOUT)
        if not ready:
            proc.kill()
            print("pty_run: no output within the timeout", file=sys.stderr)
            return 124
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the command closed the terminal's last writer
            break
        if not data:
            break
        chunks.append(data)
    rc = proc.wait(timeout=TIMEOUT)
    os.close(master)
    print(b"".join(chunks).hex())
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
