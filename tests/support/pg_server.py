"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temporary folder, unix socket only.

`PgServer.start()` finds the server binaries (/usr/lib/postgresql/*/bin, or on PATH), makes a data folder
and a socket folder under a fresh temporary directory, and starts the server with `fsync=off` and no TCP
listener. As root it runs initdb and pg_ctl as the `postgres` user through `runuser` (PostgreSQL refuses
to run as root); otherwise as the current user. `new_database()` makes an empty database and returns its
`postgresql://` URL (a socket path in `host=`), so each test, and each pytest-xdist worker, gets its own.

`new_ledger()` makes a database holding a fresh, empty ledger by cloning a template ledger made once per
server (`CREATE DATABASE ... TEMPLATE`), instead of running the ledger's creation in every test.

`shared(root)` is the one server of a test session: the first pytest-xdist worker to ask starts it under a
file lock in `root` (the session's shared temporary folder) and writes where it is; the others attach to it.
`stop_shared(root)` stops it at the end of the session (the xdist controller, or the only process) and leaves
the removal of its folder to a detached `rm`, so the run does not wait for it.

`unavailable()` says why no server can be started here (no binaries), or None.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

TEMPLATE = "ledger_template"
"""The database that holds an empty ledger of the current schema; every `new_ledger()` is a copy of it."""
STATE = "pg-server.json"
"""The file in a session's shared folder that says where the shared server is."""


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def unavailable() -> str | None:
    """Why a throwaway server cannot be started on this machine, or None when it can."""
    if _bin_dir() is None:
        return "PostgreSQL server binaries not found (apt-get install -y postgresql; `make test` does it as root)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: cannot start PostgreSQL as the postgres user"
    return None


class PgServer:
    """One throwaway server; `start()`, then `new_database()` as often as needed, then `stop()`."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else Path(tempfile.mkdtemp(prefix="reclaim-pg-"))
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.bin = _bin_dir()
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else os.environ.get("USER") or "postgres"
        self._n = itertools.count()

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, cwd=self.root)

    def start(self) -> PgServer:
        """initdb and start the server (fsync off, unix socket only); raises RuntimeError saying why not."""
        why = unavailable()
        if why:
            raise RuntimeError(why)
        self.sock.mkdir()
        os.chmod(self.root, 0o755)
        if self.as_root:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sock, "postgres")
        out = self._run("initdb", "-D", str(self.data), "-U", self.user, "-A", "trust", "-E", "UTF8", "--no-sync")
        if out.returncode:
            raise RuntimeError(f"initdb failed: {out.stderr.strip()[-400:]}")
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server on its existing data folder (after `start()` made it, or after `halt()`)."""
        opts = (
            f"-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c listen_addresses='' "
            f"-c unix_socket_directories={self.sock} -c max_connections=200 -c shared_buffers=32MB"
        )
        out = self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "-t", "60",
                        "start")
        if out.returncode:
            log = (self.root / "log").read_text(errors="replace")[-600:] if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {out.stderr.strip()[-300:]} {log}")

    def halt(self) -> None:
        """Stop the server (fast shutdown: every session is cut, what was committed is kept; an immediate one
        would lose commits with this server's fsync=off), keeping its data for `resume()`."""
        out = self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        if out.returncode:
            raise RuntimeError(f"pg_ctl stop failed: {out.stderr.strip()[-300:]}")

    def url(self, dbname: str = "postgres") -> str:
        """The URL of `dbname` on this server, over its unix socket."""
        return f"postgresql://{self.user}@/{dbname}?host={quote(str(self.sock), safe='')}"

    def new_database(self, prefix: str = "t") -> str:
        """Create an empty database with a fresh name; return its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._n)}"
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def make_template(self) -> None:
        """Create the template database and the current ledger schema in it (once per server)."""
        import psycopg

        from ledger.db import create_ledger

        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{TEMPLATE}"')
        create_ledger(self.url(TEMPLATE))

    def new_ledger(self, prefix: str = "t") -> str:
        """A database with a fresh, empty ledger in it, copied from the template; returns its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._n)}"
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}" STRATEGY FILE_COPY')
        return self.url(name)

    def stop(self, *, wait: bool = True) -> None:
        """Stop the server (immediate shutdown) and remove its folder; with `wait=False` the folder (a session's
        hundreds of databases, gigabytes of small files) is removed by a detached `rm`, and this returns at once."""
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        if wait:
            shutil.rmtree(self.root, ignore_errors=True)
            return
        gone = self.root.with_name(self.root.name + ".removing")
        self.root.rename(gone)
        subprocess.Popen(["rm", "-rf", "--", str(gone)], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def shared(root: Path) -> PgServer:
    """The session's one server, with its template ledger: started by the first caller (under a lock in
    `root`), attached to by the others. Raises RuntimeError saying why it could not be started."""
    with _locked(root / f"{STATE}.lock"):
        state = root / STATE
        if state.exists():
            return PgServer(Path(json.loads(state.read_text())["root"]))
        server = PgServer()
        try:
            server.start()
            server.make_template()
        except BaseException:
            server.stop()
            raise
        state.write_text(json.dumps({"root": str(server.root), "pid": os.getpid()}))
        return server


def stop_shared(root: Path) -> None:
    """Stop the session's shared server, if one was started in `root`; a second call does nothing."""
    with _locked(root / f"{STATE}.lock"):
        state = root / STATE
        if state.exists():
            PgServer(Path(json.loads(state.read_text())["root"])).stop(wait=False)
            state.unlink()
