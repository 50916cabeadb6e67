"""One browser connection's console process: started in its own process group, reaped when the connection ends.

textual-serve's `AppService` speaks the WebDriver packet protocol with the child; this subclass only changes how
the child is started (an argv, no shell; a new session, so the child and anything it starts share one process
group) and adds `reap`, which does not trust the child to leave: textual-serve's own `stop` sends "quit" and
waits forever, and a console whose browser vanished has been seen spinning and ignoring SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

QUIT_GRACE_SECONDS = 1.0
"""How long a console gets to quit by itself when asked, before its process group is sent SIGTERM."""
TERM_GRACE_SECONDS = 1.5
"""How long after SIGTERM before SIGKILL."""


class SeatProcess(AppService):
    """The console process behind one browser connection."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        write_bytes: Callable[[bytes], Awaitable[None]],
        write_str: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(" ".join(argv), write_bytes=write_bytes, write_str=write_str, close=close,
                         download_manager=DownloadManager())
        self.argv = argv
        self.extra_env = env

    @property
    def pid(self) -> int | None:
        """The console's pid (also its process group id), once started."""
        return self._process.pid if self._process is not None else None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        """Start the console: argv without a shell, textual-serve's driver environment plus ours, own session."""
        env = self._build_environment(width=width, height=height)
        for name in ("RECLAIM_OPERATOR", "RECLAIM_SEAT_OPERATOR"):
            env.pop(name, None)  # the seat's name comes from `extra_env` only
        env.update(self.extra_env)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def reap(self) -> None:
        """End the console and everything in its process group, within QUIT + TERM grace and a SIGKILL; then
        wait for it, so no process and no zombie is left. Safe to call more than once."""
        process = self._process
        if process is None:
            return
        pgid = process.pid
        if process.returncode is None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send_meta({"type": "quit"}), QUIT_GRACE_SECONDS)
            if not await _exited(process, QUIT_GRACE_SECONDS):
                _signal_group(pgid, signal.SIGTERM)
                if not await _exited(process, TERM_GRACE_SECONDS):
                    _signal_group(pgid, signal.SIGKILL)
                    await process.wait()
        _signal_group(pgid, signal.SIGKILL)  # anything the console started and left behind in its group
        if self._stdin is not None:
            self._stdin.close()
        if self._task is not None:
            task, self._task = self._task, None
            if not await _finished(task, TERM_GRACE_SECONDS):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def _finished(task: asyncio.Task[None], seconds: float) -> bool:
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return bool(done)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the console's process, before exec: on Linux, ask the kernel to SIGKILL it when `reclaim serve` dies
    (even by SIGKILL, when no reaping can run). Elsewhere nothing: the seat's own reaping still applies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() == 1:  # the seat died between the fork and the prctl: nobody would reap this console
        os._exit(1)
