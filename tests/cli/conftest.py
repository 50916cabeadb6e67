"""The CLI tests' own fixtures: `seats`, two real OS accounts sharing a ledger (tests/support/os_accounts.py)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from os_accounts import Seats, shared_venv

from ledger.db import create_ledger
from ledger.simulator import Simulator


@pytest.fixture
def seats(sim: Simulator, config_dict: dict[str, Any], write_config: Callable[..., Path]) -> Iterator[Seats]:
    if os.geteuid() != 0 or not shutil.which("useradd") or not Path("/usr/bin/python3").exists():
        pytest.fail("the OS-account tests need root, useradd and /usr/bin/python3 (CI runs as root)")
    if sys.version_info[:2] != tuple(int(x) for x in subprocess.run(
            ["/usr/bin/python3", "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True, text=True, check=True).stdout.split()):
        pytest.fail("/usr/bin/python3 is not the same minor version as the test interpreter: packages would not load")
    tag = secrets.token_hex(3)
    alice, bob = f"rc-alice-{tag}", f"rc-bob-{tag}"
    made: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="reclaim-seats-", dir="/tmp"))
    try:
        for name in (alice, bob):
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                           capture_output=True, timeout=60)
            made.append(name)
            keys = folder / "keys" / name
            keys.mkdir(parents=True)
            keys.chmod(0o700)
            shutil.chown(keys, name)
        folder.chmod(0o755)
        python = shared_venv(folder, alice)
        data = folder / "data"
        data.mkdir()
        data.chmod(0o777)
        config_dict.pop("identity")  # the default: identity from the OS account
        config_dict["operators"] = {alice: ["triage"], bob: ["triage", "approver"], "scheduler": ["sender"]}
        config = write_config(config_dict, data / "reclaim.toml")
        ledger = data / "reclaim.db"
        create_ledger(ledger)
        yield Seats(alice, bob, python, ledger, config)
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
