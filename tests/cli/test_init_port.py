"""`reclaim init` writes a starter config whose simulator port is free: 8765 when it is, another free one when not;
`reclaim simulator --config` listens where that config points."""

from __future__ import annotations

import contextlib
import errno
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from console.cli.seats import simulator_port_of
from console.cli.setup import SIMULATOR_PORT
from ledger.config import load_config


@contextlib.contextmanager
def port_taken(port: int) -> Iterator[socket.socket | None]:
    """A socket listening on 127.0.0.1:`port` for the block; None when something else already holds the port
    (then it is taken all the same)."""
    s = socket.socket()
    try:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            assert e.errno == errno.EADDRINUSE, e
            yield None
            return
        s.listen(1)
        yield s
    finally:
        s.close()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_init_where_8765_is_taken_writes_another_free_port(tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    config = tmp_path / "reclaim.toml"
    with port_taken(SIMULATOR_PORT):
        assert not _bindable(SIMULATOR_PORT)
        r = run_cli("init", config=config)
        assert r.rc == 0, r.stderr
        written = load_config(config).remotes["gemini"].base_url
        assert written is not None
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", written)
        assert m, written
        port = int(m.group(1))
        assert port != SIMULATOR_PORT and _bindable(port)
        assert simulator_port_of(config) == port
        assert f"simulator is on 127.0.0.1:{port}: reclaim simulator --config {config}" in r.stdout
