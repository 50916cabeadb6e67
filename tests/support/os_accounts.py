"""Real OS accounts sharing one ledger: `Seats` runs the installed CLI as each (runuser, a clean environment,
each account's own signing key file) from a venv of the system python that every account can read.

The `seats` fixture (tests/cli/conftest.py) makes the accounts; they need root, which CI has.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.clock import SystemClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Seats:
    """Two real accounts (alice triage, bob triage+approver) sharing a ledger in os mode."""

    alice: str
    bob: str
    python: Path
    ledger: Path
    config: Path

    def key_file(self, who: str) -> Path:
        """Where `who` keeps their signing key: a folder of their own (mode 0700) beside the ledger's."""
        return self.ledger.parent.parent / "keys" / who / "signing-key"

    def run(self, who: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`reclaim ARGS` as the account `who`, with a clean environment (plus `env`) and their own key file."""
        return self._as(who, ["-m", "console", *args], env)

    def share_files(self) -> None:
        """Let every account read and write the ledger's files as root left them (the file, its -wal and -shm)."""
        for p in self.ledger.parent.iterdir():
            p.chmod(0o666)

    def run_python(self, who: str, script: Path) -> subprocess.CompletedProcess[str]:
        """The Python `script` as the account `who`, with the CLI's interpreter and environment."""
        return self._as(who, [str(script)], None)

    def _as(self, who: str, argv: list[str], env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
        base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "NO_COLOR": "1", "COLUMNS": "200",
                "PYTHONDONTWRITEBYTECODE": "1", "RECLAIM_LEDGER": str(self.ledger), "RECLAIM_CONFIG": str(self.config),
                "RECLAIM_SIGNING_KEY_FILE": str(self.key_file(who))}
        envs = [f"{k}={v}" for k, v in {**base, **(env or {})}.items()]
        return subprocess.run(
            ["runuser", "-u", who, "--", "env", "-i", *envs, str(self.python), *argv],
            capture_output=True, text=True, timeout=120, umask=0, cwd="/",
        )


def readable_by(account: str, path: Path) -> bool:
    return subprocess.run(["runuser", "-u", account, "--", "test", "-r", str(path)], capture_output=True).returncode == 0


def shared_venv(folder: Path, probe_account: str) -> Path:
    """A venv from the system python that sees this checkout and its installed packages (copied when the
    account cannot read them where they are)."""
    venv = folder / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    paths: list[Path] = []
    for src, probe in ((ROOT, ROOT / "ledger" / "__init__.py"),
                       (Path(sysconfig.get_paths()["purelib"]), Path(sysconfig.get_paths()["purelib"]) / "typer")):
        if readable_by(probe_account, probe):
            paths.append(src)
        else:
            copy = folder / f"copy-{len(paths)}"
            if src == ROOT:
                for pkg in ("ledger", "console"):
                    shutil.copytree(src / pkg, copy / pkg)
            else:
                shutil.copytree(src, copy, symlinks=True)
            paths.append(copy)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "reclaim-under-test.pth").write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    for p in [folder, *folder.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o755 if p.is_dir() else p.stat().st_mode | 0o444)
    return venv / "bin" / "python"


def held(sim: Simulator, conn: Any, cfg: Config, clock: Any, job_id: str = "held-1") -> JobKey:
    """A job submitted (and sent once) while the remote answers 503 to its status: held."""
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id, remotes=RemoteCache(cfg))
    assert res.state == "held"
    return res.key


def held_in(seats: Seats, sim: Simulator, job_id: str = "held-os") -> JobKey:
    cfg = parse_config({**raw_config(seats.config)}, base_dir=seats.config.parent)
    conn = connect(seats.ledger)
    try:
        key = held(sim, conn, cfg, SystemClock(), job_id)
    finally:
        conn.close()
    seats.share_files()
    return key


def raw_config(path: Path) -> dict[str, Any]:
    import tomllib

    return tomllib.loads(path.read_text(encoding="utf-8"))
