"""What the kernel says of a test's child process: running, stopped at a pause point, or gone."""

from __future__ import annotations

from pathlib import Path


def process_state(pid: int) -> str:
    """The process's state letter from /proc (T when stopped, R or S when running), or '' once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text.rpartition(")")[2].split()[0]
