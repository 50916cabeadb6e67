"""Bad input through the real `reclaim` CLI: a distinct exit code, one line on stderr naming the thing,
and a ledger left exactly as it was (fingerprint from a fresh connection, or the file's bytes when
the file is not a usable ledger; a missing ledger is not created).

Exit codes (ledger/errors.py): 2 bad input, 6 refused, 7 ledger unusable, 8 ledger locked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.config import load_config
from ledger.db import create_ledger
from ledger.remotes import request_body_size
from ledger.simulator import Simulator
from ledger.store.sqlite import SCHEMA_VERSION
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
GOOD_PAYLOAD = json.dumps({"input": "hello"})


def assert_one_line_error(r: Any, rc: int, *needles: str) -> str:
    """The run failed with `rc` and exactly one stderr line, 'reclaim: error: ...', containing each needle."""
    assert r.rc == rc, f"exit {r.rc}, expected {rc}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{r.stderr}"
    assert lines[0].startswith("reclaim: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not named in: {lines[0]}"
    return lines[0]


def _sidecars(path: Path) -> list[Path]:
    return [p for p in (path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal")) if p.exists()]


# -- payload and operation ---------------------------------------------------------------------------
@pytest.mark.parametrize(("operation", "payload", "needles"), [
    ("nope.op", GOOD_PAYLOAD, ("operation 'nope.op'", "not declared", OP)),
    (OP, '{"input": ', ("payload", "not valid JSON")),
    (OP, "[1, 2]", ("payload", "must be a JSON object", "list")),
    (OP, '"just text"', ("payload", "must be a JSON object", "str")),
    (OP, "{}", ("payload", '"input"')),
    (OP, '{"input": "x", "colour": "red"}', ("payload", "'colour'")),
], ids=["unknown-operation", "malformed-json", "array", "string", "missing-input", "unknown-key"])
def test_bad_submit_is_refused_and_writes_nothing(
    operation: str, payload: str, needles: tuple[str, ...], sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("submit", operation, "--payload", payload, "--job-id", "j1")
    assert_one_line_error(r, 2, *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


# -- --payload @FILE and --payload - (stdin) -----------------------------------------------------------
def _payload_source(case: str, folder: Path) -> tuple[str, str | None]:
    """The --payload value (and the text on stdin) of one unusable source, made in `folder` (the CLI's cwd)."""
    match case:
        case "missing-file":
            return "@nope.json", None
        case "folder":
            (folder / "payloads").mkdir()
            return "@payloads", None
        case "not-utf8":
            (folder / "latin1.json").write_bytes('{"input": "café"}'.encode("latin-1"))
            return "@latin1.json", None
        case "empty-file":
            (folder / "empty.json").touch()
            return "@empty.json", None
        case "too-large":
            with (folder / "huge.json").open("wb") as f:  # sparse: refused by its size, never read
                f.truncate(64 * 1024 * 1024 + 1)
            return "@huge.json", None
        case "no-file-named":
            return "@", None
        case "empty-stdin":
            return "-", None
        case "blank-stdin":
            return "-", " \n\t\n"
    raise AssertionError(case)


@pytest.mark.parametrize(("case", "needles"), [
    ("missing-file", ("payload file nope.json", "not found", "check the path")),
    ("folder", ("payload file payloads", "is a folder", "pass the JSON file itself")),
    ("not-utf8", ("payload file latin1.json", "not UTF-8", "0xe9 at offset 14", "save it as UTF-8")),
    ("empty-file", ("payload file empty.json", "is empty")),
    ("too-large", ("payload file huge.json", "67,108,865 bytes", "more than the 64 MiB")),
    ("no-file-named", ("--payload @", "no file named", "--payload @FILE")),
    ("empty-stdin", ("--payload - (stdin)", "is empty", "pipe the JSON in")),
    ("blank-stdin", ("--payload - (stdin)", "is empty")),
])
def test_a_payload_source_that_cannot_be_read_is_refused_and_writes_nothing(
    case: str, needles: tuple[str, ...], sim: Simulator, ledger_path: Path, config_path: Path, tmp_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    value, stdin = _payload_source(case, tmp_path)
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", value, "--job-id", "src-1", stdin=stdin)
    assert_one_line_error(r, 2, *needles)
    assert "Traceback" not in r.stderr
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


@pytest.mark.parametrize("payload", ['{"input": ', "[1, 2]", '"just text"', "{}", '{"input": "x", "colour": "red"}',
                                     '{"input": "x", "generation_config": {"temperature": NaN}}'])
def test_a_bad_payload_from_a_file_or_stdin_is_refused_as_when_typed(
    payload: str, sim: Simulator, ledger_path: Path, config_path: Path, tmp_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    (tmp_path / "bad.json").write_text(payload, encoding="utf-8")
    before = fingerprint(ledger_path)
    typed = run_cli("submit", OP, "--payload", payload, "--job-id", "same-1")
    line = assert_one_line_error(typed, 2, "payload")
    for r in (run_cli("submit", OP, "--payload", "@bad.json", "--job-id", "same-1"),
              run_cli("submit", OP, "--payload", "-", "--job-id", "same-1", stdin=payload)):
        assert assert_one_line_error(r, 2) == line
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


def test_a_3_mb_payload_file_is_refused_by_the_default_size_rule(
    sim: Simulator, ledger_path: Path, config_path: Path, tmp_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    # The default policy: send_margin_seconds 2 s at min_send_rate 1,000,000 bytes/s, at most 2,000,000 bytes.
    payload = {"input": "tides " * 500_000}
    (tmp_path / "big.json").write_text(json.dumps(payload), encoding="utf-8")
    # The size is the create's whole body as the SDK writes it (the model and labels with the payload).
    size = request_body_size(load_config(config_path), OP, payload, idem_key="0" * 32, attempt=1)
    assert size > len(json.dumps(payload))
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", "@big.json", "--job-id", "big-1")
    assert_one_line_error(r, 2, f"payload of {size:,} bytes", "policy.min_send_rate", "policy.send_margin_seconds",
                          "send a smaller payload")
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


# -- the ledger file ---------------------------------------------------------------------------------
def test_missing_ledger_is_not_created(tmp_path: Path, sim: Simulator, config_path: Path,
                                       run_cli: Callable[..., Any]) -> None:
    missing = tmp_path / "missing.db"
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD], ["status"]):
        r = run_cli(*args, ledger=missing)
        assert_one_line_error(r, 7, str(missing), "not found", "reclaim init")
    assert not missing.exists()
    assert _sidecars(missing) == []
    assert sim.count(None) == 0


def test_ledger_in_a_missing_folder_is_not_created(tmp_path: Path, sim: Simulator, config_path: Path,
                                                   run_cli: Callable[..., Any]) -> None:
    path = tmp_path / "no-such-folder" / "reclaim.db"
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, ledger=path)
    assert_one_line_error(r, 7, "no-such-folder", "does not exist")
    r = run_cli("init", ledger=path)
    assert_one_line_error(r, 7, "no-such-folder", "does not exist")
    assert not path.parent.exists()
    assert sim.count(None) == 0


def test_an_empty_ledger_file_gives_advice_that_works(tmp_path: Path, config_path: Path,
                                                     run_cli: Callable[..., Any]) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for args in (["status"], ["init"], ["submit", OP, "--payload", GOOD_PAYLOAD]):
        r = run_cli(*args, ledger=empty)
        assert_one_line_error(r, 7, str(empty), "an empty file (0 bytes)")
        assert "remove it, then run 'reclaim init'" in r.stderr
    assert empty.stat().st_size == 0 and _sidecars(empty) == []
    empty.unlink()  # what the advice says
    assert run_cli("init", ledger=empty).rc == 0
    assert run_cli("status", ledger=empty).rc == 0


def test_a_sqlite_file_that_is_not_a_ledger(tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
                                            file_digest: Callable[[Path], str]) -> None:
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    c.execute("INSERT INTO customers (name) VALUES ('keep me')")
    c.commit()
    c.close()
    before = file_digest(other)
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD], ["init"], ["status"]):
        r = run_cli(*args, ledger=other)
        assert_one_line_error(r, 7, str(other), "not a reclaim ledger")
    assert file_digest(other) == before
    assert _sidecars(other) == []


def _schema_version(ledger: Path) -> int:
    """The version this reclaim understands on the ledger's backend."""
    if isinstance(ledger, str):
        from ledger.store.postgres import schema_version

        return schema_version()
    return SCHEMA_VERSION


def _stamp_schema_version(ledger: Path, version: int) -> None:
    """Stamp the ledger as of schema `version`, as a newer reclaim would: the file's user_version, or the
    database's reclaim_meta row."""
    if isinstance(ledger, str):
        import psycopg

        with psycopg.connect(ledger, autocommit=True) as c:
            c.execute("UPDATE reclaim_meta SET value = %s WHERE key = 'schema_version'", (str(version),))
        return
    c = sqlite3.connect(ledger)
    c.execute(f"PRAGMA user_version = {version}")
    c.close()  # the last connection: WAL checkpointed into the main file


def test_a_ledger_of_a_newer_schema(ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
                                    file_digest: Callable[[Path], str], fingerprint: Callable[[Path], str]) -> None:
    version = _schema_version(ledger_path)
    rows = fingerprint(ledger_path)
    _stamp_schema_version(ledger_path, version + 1)
    before = file_digest(ledger_path)  # SQLite: the file's bytes, stamp included ("missing" for a URL)
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD], ["status"], ["init"]):
        r = run_cli(*args, ledger=ledger_path)
        assert_one_line_error(r, 7, str(ledger_path), f"schema version {version + 1}", "upgrade reclaim")
    assert file_digest(ledger_path) == before
    _stamp_schema_version(ledger_path, version)  # nothing migrated it down or wrote a row meanwhile:
    assert fingerprint(ledger_path) == rows


def test_a_file_that_is_not_sqlite(tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
                                   file_digest: Callable[[Path], str]) -> None:
    notes = tmp_path / "notes.db"
    notes.write_text("these are my notes, not a database\n" * 200, encoding="utf-8")
    before = file_digest(notes)
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD], ["status"], ["init"]):
        r = run_cli(*args, ledger=notes)
        assert_one_line_error(r, 7, str(notes), "not a SQLite database")
    assert file_digest(notes) == before


# Root ignores file modes (CAP_DAC_OVERRIDE), so `chmod 0444` alone does not make a ledger read-only
# when the tests run as root, as they do in CI containers. Running the CLI as another user is not an
# option there (the interpreter lives under /root, mode 0700). So, as root, the CLI runs under
# `setpriv` with CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER removed from its bounding set:
# still uid 0 (owner of the test's files) but now bound by the 0444 mode, as any operator would be.
# If that cannot be arranged (no setpriv, no CAP_SETPCAP), the test is skipped and says why.
_DROP_DAC = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def _read_only_prefix(path: Path) -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: chmod 0444 cannot make the ledger read-only for root")
    probe = subprocess.run([*_DROP_DAC, "test", "-w", str(path)], capture_output=True, timeout=10)
    if probe.returncode != 1:
        pytest.skip(f"running as root and setpriv could not drop CAP_DAC_OVERRIDE ({probe.stderr!r})")
    return _DROP_DAC


@contextlib.contextmanager
def _made_read_only(ledger: Path) -> Iterator[list[str]]:
    """Make the ledger read-only for the CLI: the file's mode 0444 (and, as root, the argv prefix that makes
    the mode count), or the database's default_transaction_read_only; yields the prefix; undone after."""
    if isinstance(ledger, str):
        import psycopg
        from psycopg import sql

        off = "-c default_transaction_read_only=off"  # this session may still change the setting back
        name = sql.Identifier(psycopg.conninfo.conninfo_to_dict(ledger)["dbname"])
        with psycopg.connect(ledger, autocommit=True, options=off) as c:
            c.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(name))
        try:
            yield []
        finally:
            with psycopg.connect(ledger, autocommit=True, options=off) as c:
                c.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(name))
        return
    ledger.chmod(0o444)
    try:
        yield _read_only_prefix(ledger)
    finally:
        ledger.chmod(0o644)


def test_a_read_only_ledger(ledger_path: Path, config_path: Path, sim: Simulator, run_cli: Callable[..., Any],
                            fingerprint: Callable[[Path], str]) -> None:
    before = fingerprint(ledger_path)
    with _made_read_only(ledger_path) as prefix:
        r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "ro-1", prefix=prefix)
        assert sim.count(None) == 0, "a send went out although the reservation could not be written"
        assert_one_line_error(r, 7, str(ledger_path), "read-only")
        # Reading is still allowed: a viewer can look at a read-only ledger.
        r = run_cli("status", prefix=prefix)
        assert r.rc == 0, r.stderr
    assert fingerprint(ledger_path) == before


@contextlib.contextmanager
def _write_lock_held(ledger: Path) -> Iterator[None]:
    """Hold SQLite's write lock (BEGIN IMMEDIATE), which every writer must take, in another connection.
    PostgreSQL's locks are tests/system/test_postgres.py's."""
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.slow
def test_a_locked_ledger_fails_after_the_busy_timeout(
    ledger_path: Path, config_path: Path, sim: Simulator, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    with _write_lock_held(ledger_path):
        started = time.monotonic()
        r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "locked-1", timeout=60)
        waited = time.monotonic() - started
    assert_one_line_error(r, 8, str(ledger_path), "locked")
    assert waited >= 4.5, f"gave up after {waited:.1f}s, before the 5 s busy timeout"
    assert sim.count(None) == 0
    assert fingerprint(ledger_path) == before


# -- the config --------------------------------------------------------------------------------------
def _broken(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "needles"), [
    (("operators", "dave"), ["superuser"], ("operators.dave", "superuser")),
    (("operators", "dave"), "approver", ("operators.dave", "list of roles")),
    (("policy", "lease_seconds"), "sixty", ("policy.lease_seconds",)),
    (("policy", "four_eyes"), "no", ("policy.four_eyes",)),
    (("remotes", "gemini", "timeout_seconds"), "5", ("remotes.gemini.timeout_seconds",)),
    (("operations", OP, "daily_quota"), "ten", (f'operations."{OP}".daily_quota',)),
], ids=["unknown-role", "roles-not-a-list", "lease-string", "four-eyes-string", "timeout-string", "quota-string"])
def test_a_bad_config_names_the_key(
    path: tuple[str, ...], value: Any, needles: tuple[str, ...], config_dict: dict[str, Any],
    write_config: Callable[..., Path], ledger_path: Path, sim: Simulator, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    config = write_config(_broken(config_dict, path, value))
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "cfg-1")
    assert_one_line_error(r, 2, str(config), *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


def test_a_missing_config_file(tmp_path: Path, ledger_path: Path, run_cli: Callable[..., Any],
                               fingerprint: Callable[[Path], str]) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, config=tmp_path / "nope.toml")
    assert_one_line_error(r, 2, "nope.toml", "not found")
    assert fingerprint(ledger_path) == before


# -- arguments ---------------------------------------------------------------------------------------
def test_assign_with_a_due_that_is_not_a_time(
    sim: Simulator, conn: Any, cfg: Any, clock: Any, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    sim.add_fault("status", status=503)
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="held-1", remotes=RemoteCache(cfg))
    assert res.state == "held"
    before = fingerprint(ledger_path)
    r = run_cli("assign", "held-1", "--owner", "bob", "--due", "notatime", "--operation", OP, "--reason", "on call",
                operator="alice")
    assert_one_line_error(r, 2, "--due", "notatime")
    assert fingerprint(ledger_path) == before
    # The same command with a real time is accepted: it was the due time that was refused.
    r = run_cli("assign", "held-1", "--owner", "bob", "--due", "2026-12-03T09:00Z", "--operation", OP,
                "--reason", "on call", operator="alice", now=clock.now())
    assert r.rc == 0, r.stderr
    assert fingerprint(ledger_path) != before


@pytest.mark.parametrize("extra", [[], ["--operation", OP]], ids=["by-id", "by-id-and-operation"])
def test_show_of_a_missing_job(extra: list[str], ledger_path: Path, config_path: Path,
                               run_cli: Callable[..., Any], fingerprint: Callable[[Path], str]) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("show", "no-such-job", *extra)
    assert_one_line_error(r, 2, "no-such-job", "not in the ledger")
    assert fingerprint(ledger_path) == before


def test_missing_ledger_for_show_is_not_created(tmp_path: Path, run_cli: Callable[..., Any]) -> None:
    missing = tmp_path / "gone.db"
    r = run_cli("show", "j1", ledger=missing)
    assert_one_line_error(r, 7, str(missing), "not found")
    assert not missing.exists()
    create_ledger(tmp_path / "exists.db")  # sanity: the same folder can hold a ledger
