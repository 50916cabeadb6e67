"""A SQLite ledger in a folder shared with its group: `reclaim init` and `reclaim status` say when the folder lacks
the setgid bit (the -wal and -shm files would take their maker's group and shut the other accounts out), with the
command that mends it, and say nothing of it once the bit is set."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SETGID_WORDS = "but not setgid"


def _shared(tmp_path: Path, mode: int) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    assert folder.stat().st_mode & 0o7777 == mode
    return folder / "reclaim.db"


@pytest.mark.parametrize("mode", [0o1770, 0o770], ids=["sticky", "not-sticky"])
def test_a_group_writable_folder_without_setgid_is_named_with_its_fix_by_init_and_status(
    tmp_path: Path, config_path: Path, run_cli: Callable[..., Any], mode: int,
) -> None:
    ledger = _shared(tmp_path, mode)
    fix = f"chmod g+s {ledger.parent}"
    init = run_cli("init", ledger=ledger)
    assert init.rc == 0, init.stderr
    assert ledger.exists()  # a warning: the ledger is made all the same
    warned = [line for line in init.stdout.splitlines() if SETGID_WORDS in line]
    assert len(warned) == 1 and warned[0].startswith("WARNING: ") and warned[0].endswith(fix), init.stdout

    status = run_cli("status", ledger=ledger)
    assert status.rc == 0, status.stderr
    assert [line for line in status.stdout.splitlines() if SETGID_WORDS in line and line.endswith(fix)], status.stdout
    doc = json.loads(run_cli("status", "--json", ledger=ledger).stdout)
    assert [w for w in doc["warnings"] if SETGID_WORDS in w and w.endswith(fix)]

    ledger.parent.chmod(mode | 0o2000)  # what the warning says to do
    again = json.loads(run_cli("status", "--json", ledger=ledger).stdout)
    assert not [w for w in again["warnings"] if SETGID_WORDS in w]


def test_a_shared_folder_with_setgid_gets_no_warning(
    tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    ledger = _shared(tmp_path, 0o3770)
    init = run_cli("init", "--json", ledger=ledger)
    assert init.rc == 0, init.stderr
    assert json.loads(init.stdout)["permission_warnings"] == []
    status = run_cli("status", "--json", ledger=ledger)
    assert status.rc == 0, status.stderr
    assert not [w for w in json.loads(status.stdout)["warnings"] if SETGID_WORDS in w or "writable by" in w]
    assert SETGID_WORDS not in run_cli("status", ledger=ledger).stdout


def test_a_folder_only_its_owner_may_write_gets_no_setgid_warning(
    tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    ledger = _shared(tmp_path, 0o755)
    init = run_cli("init", ledger=ledger)
    assert init.rc == 0, init.stderr
    assert "WARNING" not in init.stdout
