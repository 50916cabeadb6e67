"""Bad values never crash: payloads, undecodable arguments, header secrets, config numbers and URLs,
corrupt pages, a full disk at init, bad times stored or given, and out-of-range options.

Each case runs the real `reclaim` CLI and checks: the documented exit code, exactly one stderr line
`reclaim: error: ...` naming the thing, and a ledger left as it was (fingerprint from a fresh connection, or
the file digest). The rules are the CLI's and run on SQLite; the values only one backend could not store (a NUL
character, an integer beyond 64 bits, the longest names, a bad time already stored) run on both (`both_backends`),
with the same message and exit code on both.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ledger_reads import QmarkSql
from test_bad_input import assert_one_line_error

from ledger.clock import ManualClock
from ledger.config import load_config
from ledger.db import connect
from ledger.errors import BadInput, PayloadError
from ledger.reservation import check_json_value, reserve
from ledger.simulator import Simulator
from ledger.store import evidence as evidence_store

OP = "article.generate"
GOOD_PAYLOAD = json.dumps({"input": "hello"})


# -- 1. payloads ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("payload", "needles"), [
    ('{"input": "\\ud800"}', ("payload", "$.input", "lone surrogate")),
    ('{"input": "x", "generation_config": {"\\udcff": 1}}', ("payload", "a key in $.generation_config",
                                                             "lone surrogate")),
    ('{"input": ' + "[" * 1500 + "]" * 1500 + "}", ("payload", "nested too deeply")),
    ('{"input": "x", "generation_config": {"seed": ' + "7" * 5000 + "}}", ("payload", "4,300 digits")),
    ('{"input": "x", "generation_config": {"seed": ' + "9" * 30 + "}}", ("payload", "$.generation_config.seed",
                                                                         "64 bits")),
    ('{"input": "x", "generation_config": {"temperature": NaN}}', ("payload", "nan", "finite")),
    ('{"input": "x", "generation_config": {"temperature": -Infinity}}', ("payload", "-inf", "finite")),
    ('{"input": "x", "generation_config": {"temperature": Infinity}}', ("payload", "inf", "finite")),
    ('{"input": "x", "generation_config": {"seed": -' + "9" * 20 + "}}", ("payload", "$.generation_config.seed",
                                                                           "64 bits")),
], ids=["lone-surrogate", "surrogate-key", "nested-1500", "int-5000-digits", "int-beyond-64-bits", "nan", "-inf",
        "inf", "int-below-64-bits"])
def test_an_unusable_payload_is_refused_naming_the_payload(
    payload: str, needles: tuple[str, ...], sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", payload, "--job-id", "p1")
    assert_one_line_error(r, 2, *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


@pytest.mark.both_backends
def test_a_nul_character_in_a_payload_string_is_kept_on_every_backend(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    read_job: Callable[..., Any],
) -> None:
    # JSON text carries it escaped (\u0000), so PostgreSQL's text stores it like SQLite does: not bad input.
    r = run_cli("submit", OP, "--payload", '{"input": "a\\u0000b"}', "--job-id", "nul-1")
    assert r.rc == 0, r.stderr
    job = read_job(ledger_path, "nul-1")
    assert job is not None and job.payload == {"input": "a\x00b"}


# -- 1b. text the ledger stores as it is: no NUL character, bounded lengths ------------------------------------
NUL_REFUSALS = {"job-id": ("job id", {"job_id": "a\x00b"}), "target": ("target", {"job_id": "t1", "target": "t\x00"}),
                "actor": ("actor", {"job_id": "t2", "actor": "bot\x00"})}


@pytest.mark.both_backends
@pytest.mark.parametrize("case", list(NUL_REFUSALS))
def test_a_nul_character_in_a_stored_name_is_refused_alike_on_every_backend(
    case: str, ledger_path: Path, conn: Any, cfg: Any, clock: ManualClock, fingerprint: Callable[[Path], str],
) -> None:
    # No argument or environment variable can carry a NUL: this is the API the console and scripts call.
    name, kw = NUL_REFUSALS[case]
    before = fingerprint(ledger_path)
    with pytest.raises(BadInput) as refused:
        reserve(conn, cfg, OP, {"input": "x"}, clock=clock, **kw)
    assert str(refused.value) == f"{name}: holds a NUL character (\\x00), which a ledger cannot store; remove it"
    assert fingerprint(ledger_path) == before


@pytest.mark.both_backends
def test_a_nul_character_in_a_triage_field_is_refused_alike_on_every_backend(
    ledger_path: Path, config_path: Path, conn: Any, cfg: Any, clock: ManualClock,
    fingerprint: Callable[[Path], str],
) -> None:
    from ledger import triage
    from ledger.model import JobKey

    _held_jobs(ledger_path, config_path, ["held-1"])
    key = JobKey("held-1", OP)
    before = fingerprint(ledger_path)
    calls = {
        "owner (--owner)": lambda: triage.assign(conn, cfg, key, "bo\x00b", 1_796_200_000.0, actor="alice",
                                                 clock=clock, reason="on call"),
        "reason (--reason)": lambda: triage.assign(conn, cfg, key, "bob", 1_796_200_000.0, actor="alice",
                                                   clock=clock, reason="why\x00"),
        "note (--note)": lambda: triage.record_finding(conn, cfg, key, "not_received", "seen\x00", actor="alice",
                                                       clock=clock),
        "handle (--handle)": lambda: triage.reconcile(conn, cfg, key, "v1\x00h", actor="bob", clock=clock,
                                                      reason="r", unverified=True),
    }
    for field, call in calls.items():
        with pytest.raises(BadInput) as refused:
            call()
        assert f"{field}: holds a NUL character" in str(refused.value)
    assert fingerprint(ledger_path) == before


@pytest.mark.parametrize(("args", "needles"), [
    (["--job-id", "j" * 513], ("job id", "1 to 512 characters")),
    (["--job-id", "   "], ("job id", "not blank")),
    (["--job-id", "t1", "--target", "t" * 513], ("target", "at most 512 characters")),
], ids=["job-id-513", "job-id-blank", "target-513"])
def test_an_over_long_or_blank_name_is_refused(
    args: list[str], needles: tuple[str, ...], sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, *args)
    assert_one_line_error(r, 2, *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


@pytest.mark.both_backends
def test_the_longest_names_fit_every_backend(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    # 512 four-byte characters: 2 KiB in each of PostgreSQL's indexes on (job_id, operation) and (target, state).
    job_id, target = "\U0001F600" * 512, "\U0001F4E6" * 512
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", job_id, "--target", target)
    assert r.rc == 0, r.stderr
    job = read_job(ledger_path, job_id)
    assert job is not None and job.target == target


def test_payload_values_are_checked_without_recursion() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(PayloadError, match="'input' is nested more than 64 levels deep"):
        check_json_value({"input": deep})
    check_json_value({"input": ["ok", 1, 2.5, None, True, {"k": [2**63 - 1, -(2**63 - 1)]}]})
    with pytest.raises(PayloadError, match=r"\$\.input\[1\]"):
        check_json_value({"input": ["ok", b"bytes"]})


# -- 2. undecodable arguments (argv bytes that are not UTF-8 arrive as lone surrogates) ----------------
BAD_BYTES = "bad-\udcff-\udcfe"  # os.fsencode gives b"bad-\xff-\xfe": not UTF-8


@pytest.mark.parametrize(("args", "env", "named"), [
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", BAD_BYTES], {}, "--job-id"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1", "--target", BAD_BYTES], {}, "--target"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1", "--operator", BAD_BYTES], {}, "--operator"),
    (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "j1"], {"RECLAIM_OPERATOR": BAD_BYTES},
     "RECLAIM_OPERATOR"),
    (["submit", OP, "--payload", '{"input": "' + BAD_BYTES + '"}', "--job-id", "j1"], {}, "--payload"),
    (["show", BAD_BYTES], {}, "argument JOB_ID"),
    (["assign", BAD_BYTES, "--owner", "bob", "--due", "2026-12-03T09:00Z"], {}, "argument JOB_ID"),
    (["status", "--ledger", f"/tmp/{BAD_BYTES}.db"], {}, "--ledger"),
], ids=["job-id", "target", "operator", "operator-env", "payload", "show", "assign", "ledger-path"])
def test_an_argument_that_is_not_utf8_is_refused_naming_it(
    args: list[str], env: dict[str, str], named: str, sim: Simulator, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli(*args, env=env)
    assert_one_line_error(r, 2, named, "not valid UTF-8")
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


# -- 3. header values from the environment ------------------------------------------------------------------
CLEANUP = "storage.cleanup"
TOKEN_ENV = "RCLM_TEST_BAD_HEADER_TOKEN"


def _http_config(config_dict: dict[str, Any], sim: Simulator, write_config: Callable[..., Path]) -> Path:
    doc = dict(config_dict)
    doc["remotes"] = {**doc["remotes"], "cleaner": {
        "kind": "http", "url": f"{sim.url}/cleanup", "lookup_url": f"{sim.url}/cleanup/{{handle}}",
        "timeout_seconds": 5, "header_env": {"Authorization": TOKEN_ENV}}}
    doc["operations"] = {**doc["operations"], CLEANUP: {"remote": "cleaner", "daily_quota": 10}}
    return write_config(doc)


@pytest.mark.parametrize("secret", ["Bearer ключ-s3cret", "Bearer s3cret-\udcff", "Bearer s3cret\x01x"],
                         ids=["not-latin-1", "undecodable", "control-char"])
def test_a_header_value_no_http_header_can_carry_is_refused_before_anything_is_reserved(
    secret: str, sim: Simulator, ledger_path: Path, config_dict: dict[str, Any], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config = _http_config(config_dict, sim, write_config)
    env = {TOKEN_ENV: secret}
    before = fingerprint(ledger_path)
    r = run_cli("submit", CLEANUP, "--payload", '{"bucket": "b"}', "--job-id", "h1", env=env)
    line = assert_one_line_error(r, 2, "remote cleaner", TOKEN_ENV, "Authorization", "cannot carry")
    assert "s3cret" not in r.stderr + r.stdout and "s3cret" not in line
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0

    # A job reserved earlier (by a process with a good token) is not claimed by a pass that cannot send it.
    conn = connect(ledger_path)
    try:
        reserve(conn, load_config(config), CLEANUP, {"bucket": "b"}, clock=ManualClock(1_796_126_400.0),
                job_id="h2")
    finally:
        conn.close()
    before = fingerprint(ledger_path)
    r = run_cli("tick", env=env)
    assert_one_line_error(r, 2, "remote cleaner", TOKEN_ENV, "Authorization")
    assert "s3cret" not in r.stderr + r.stdout
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


# -- 4. the config file and its values ----------------------------------------------------------------------
@pytest.mark.parametrize(("content", "needles"), [
    (b"\xff\xfe\x00\x01 binary \x00", ("not UTF-8 text", "byte 0xff")),
    (b'timezone = "UTC"\n# caf\xe9 in Latin-1\n', ("not UTF-8 text", "byte 0xe9")),
    (b"# padding\n" * 120_000, ("larger than 1024 KiB",)),
], ids=["binary", "latin-1", "over-1-mib"])
def test_a_config_file_that_is_not_utf8_text_is_refused_naming_it(
    content: bytes, needles: tuple[str, ...], tmp_path: Path, ledger_path: Path, sim: Simulator,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config = tmp_path / "odd.toml"
    config.write_bytes(content)
    before = fingerprint(ledger_path)
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "c1"], ["status"], ["init"]):
        r = run_cli(*args, config=config)
        assert_one_line_error(r, 2, str(config), *needles)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


@pytest.mark.parametrize(("path", "needles"), [
    ("/dev/zero", ("not a regular file",)),
    ("/dev/urandom", ("not a regular file",)),
    ("FOLDER", ("is a folder",)),
    ("FIFO", ("not a regular file",)),
], ids=["dev-zero", "dev-urandom", "folder", "fifo"])
def test_a_config_that_is_not_a_regular_file_ends_at_once(
    path: str, needles: tuple[str, ...], tmp_path: Path, ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    if path == "FOLDER":
        config = tmp_path / "conf.d"
        config.mkdir()
    elif path == "FIFO":
        config = tmp_path / "conf.fifo"
        os.mkfifo(config)  # nobody writes: reading it would wait for ever
    else:
        config = Path(path)
    before = fingerprint(ledger_path)
    r = run_cli("status", config=config, timeout=30)  # a hang fails by the subprocess timeout
    assert_one_line_error(r, 2, str(config), *needles)
    assert fingerprint(ledger_path) == before


def _config_with(doc: dict[str, Any], path: tuple[str, ...], raw: str, write_config: Callable[..., Path]) -> Path:
    """Write the config with `path` set to the raw TOML literal `raw` (nan, inf, 1e12 ...); return its path."""
    marker = "__RAW_VALUE__"
    cur = doc
    for p in path[:-1]:
        cur = cur.setdefault(p, {})
    cur[path[-1]] = marker
    config = write_config(doc)
    config.write_text(config.read_text(encoding="utf-8").replace(json.dumps(marker), raw), encoding="utf-8")
    return config


NUMBERS = [
    (("policy", "lease_seconds"), "nan", "finite"),
    (("policy", "lease_seconds"), "inf", "finite"),
    (("policy", "lease_seconds"), "-inf", "finite"),
    (("policy", "lease_seconds"), "1e12", "at most"),
    (("policy", "lease_seconds"), "9" * 400, "at most"),
    (("policy", "stale_reserving_seconds"), "nan", "finite"),
    (("policy", "stale_reserving_seconds"), "-1", ">= 0"),
    (("policy", "retry_backoff_seconds"), "nan", "finite"),
    (("policy", "retry_backoff_seconds"), "inf", "finite"),
    (("policy", "send_margin_seconds"), "nan", "finite"),
    (("policy", "outcome_retry_seconds"), "inf", "finite"),
    (("policy", "remote_probe_seconds"), "0", "> 0"),
    (("policy", "remote_probe_seconds"), "4e8", "at most"),
    (("policy", "poll_concurrency"), "0", "from 1 to 256"),
    (("policy", "poll_concurrency"), "10000000", "from 1 to 256"),
    (("remotes", "gemini", "timeout_seconds"), "nan", "finite"),
    (("remotes", "gemini", "timeout_seconds"), "inf", "finite"),
    (("remotes", "gemini", "timeout_seconds"), "-5", "> 0"),
    (("operations", OP, "daily_quota"), "-1", "from 0 to"),
    (("operations", OP, "daily_quota"), "1" + "0" * 30, "from 0 to"),
]


@pytest.mark.parametrize(("path", "raw", "needle"), NUMBERS,
                         ids=[f"{'.'.join(p[-1:])}={r[:8]}" for p, r, _ in NUMBERS])
def test_every_config_number_must_be_finite_and_in_range(
    path: tuple[str, ...], raw: str, needle: str, config_dict: dict[str, Any], write_config: Callable[..., Path],
    ledger_path: Path, sim: Simulator, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    config = _config_with(config_dict, path, raw, write_config)
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "n1")
    key = ".".join(f'"{p}"' if "." in p else p for p in path)
    assert_one_line_error(r, 2, str(config), f"config key {key}", needle)
    assert fingerprint(ledger_path) == before, "the job was reserved before the config was refused"
    assert sim.count(None) == 0


URLS = [
    (("remotes", "gemini", "base_url"), "not a url", "spaces"),
    (("remotes", "gemini", "base_url"), "ftp://files.example.com/x", "scheme 'ftp'"),
    (("remotes", "gemini", "base_url"), "localhost:8765", "http:// or https://"),
    (("remotes", "gemini", "base_url"), "http:///nohost", "with a host"),
    (("remotes", "gemini", "base_url"), "http://127.0.0.1:99999", "not a valid URL"),
    (("remotes", "cleaner", "url"), "file:///etc/passwd", "scheme 'file'"),
    (("remotes", "cleaner", "lookup_url"), "gopher://x/{handle}", "scheme 'gopher'"),
    (("notify", "oncall", "url"), "mailto:oncall@example.com", "scheme 'mailto'"),
]


@pytest.mark.parametrize(("path", "url", "needle"), URLS, ids=[f"{p[-1]}={u[:12]}" for p, u, _ in URLS])
def test_every_url_must_be_http_with_a_host(
    path: tuple[str, ...], url: str, needle: str, config_dict: dict[str, Any], sim: Simulator,
    write_config: Callable[..., Path], ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    doc = dict(config_dict)
    doc["remotes"] = {**doc["remotes"], "cleaner": {"kind": "http", "url": f"{sim.url}/cleanup"}}
    doc["notify"] = {"oncall": {"kind": "webhook", "url": f"{sim.url}/hook"}}
    config = _config_with(doc, path, json.dumps(url), write_config)
    before = fingerprint(ledger_path)
    r = run_cli("submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "u1")
    assert_one_line_error(r, 2, str(config), f"config key {'.'.join(path)}", needle)
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


@pytest.mark.parametrize("section", ["operations", "remotes", "operators", "notify"])
def test_a_config_name_with_a_control_character_is_refused(
    section: str, config_dict: dict[str, Any], sim: Simulator, write_config: Callable[..., Path], ledger_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    # A name the ledger stores (operation, remote, operator): PostgreSQL text cannot hold a NUL; none prints.
    doc = dict(config_dict)
    extra = {"operations": ("bad\x00op", {"remote": "gemini", "daily_quota": 1}),
             "remotes": ("bad\x01remote", {"kind": "http", "url": f"{sim.url}/cleanup"}),
             "operators": ("eve\x00", ["triage"]),
             "notify": ("on\x1bcall", {"kind": "webhook", "url": f"{sim.url}/hook"})}[section]
    doc[section] = {**doc.get(section, {}), extra[0]: extra[1]}
    config = write_config(doc)
    before = fingerprint(ledger_path)
    for args in (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "n1"], ["quota"]):
        r = run_cli(*args)
        assert_one_line_error(r, 2, str(config), f"config key {section}", repr(extra[0]), "control character")
    assert fingerprint(ledger_path) == before
    assert sim.count(None) == 0


def test_a_header_name_must_be_an_http_token(config_dict: dict[str, Any], sim: Simulator, tmp_path: Path) -> None:
    from ledger.config import parse_config
    from ledger.errors import ConfigError

    doc = dict(config_dict)
    doc["remotes"] = {**doc["remotes"], "cleaner": {"kind": "http", "url": f"{sim.url}/cleanup",
                                                    "header_env": {"X Bad: header": "TOKEN"}}}
    with pytest.raises(ConfigError, match=r"header_env.*not an HTTP header name"):
        parse_config(doc, base_dir=tmp_path)


# -- 5. a ledger file with corrupt pages ----------------------------------------------------------------
CORRUPT = ("the ledger file is corrupt", "restore it from a backup", "reclaim verify")


def _ledger_with_jobs(ledger: Path, config: Path, n: int = 60) -> None:
    conn = connect(ledger)
    try:
        cfg = load_config(config)
        clock = ManualClock(1_796_126_400.0)
        for i in range(n):
            reserve(conn, cfg, OP, {"input": f"MARK-{i:03d} " + "x" * 300}, clock=clock, job_id=f"job-{i:03d}")
    finally:
        conn.close()  # the last connection: the WAL is checkpointed into the file


def _corrupt_page_holding(ledger: Path, marker: bytes) -> int:
    """Overwrite the whole b-tree page that holds `marker` with garbage (not the file header); its number."""
    data = bytearray(ledger.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    page = data.index(marker) // page_size
    assert page > 0, "the marker is on the first page, beside the file header"
    data[page * page_size:(page + 1) * page_size] = b"\xa5" * page_size
    ledger.write_bytes(bytes(data))
    return page + 1


def _corrupt_schema_page(ledger: Path) -> None:
    """Keep the 100-byte file header, garble the rest of page 1 (the schema's root page)."""
    data = bytearray(ledger.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    data[100:page_size] = b"\xa5" * (page_size - 100)
    ledger.write_bytes(bytes(data))


@pytest.mark.slow
@pytest.mark.sqlite_only  # garbles the SQLite file's own pages
@pytest.mark.parametrize("where", ["jobs-page", "schema-page"])
def test_a_corrupt_ledger_is_exit_7_for_every_command_and_verify_finds_it(
    where: str, sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    file_digest: Callable[[Path], str],
) -> None:
    _ledger_with_jobs(ledger_path, config_path)
    if where == "jobs-page":
        _corrupt_page_holding(ledger_path, b"MARK-000")
    else:
        _corrupt_schema_page(ledger_path)
    before = file_digest(ledger_path)
    reads_the_page = [  # every command that reads the damaged page meets the damage
        ["show", "job-000"], ["jobs", "reserving"], ["tick"],
        ["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "job-000"],
    ]
    reads_other_pages = [["status"], ["status", "--json"], ["events"], ["events", "--limit", "5"], ["init"],
                         ["console", "--read-only"], ["console"]]
    for args in reads_the_page + (reads_other_pages if where == "schema-page" else []):
        r = run_cli(*args, timeout=30)  # as the scheduler: a sender may run every command here
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert_one_line_error(r, 7, str(ledger_path), *CORRUPT)
        assert file_digest(ledger_path) == before, f"{args} changed the corrupt file"
    if where == "jobs-page":
        # Opening checks the header, the schema and the newest event, never every page (a million jobs would
        # take half a minute cold): status answers from the pages it reads, and says the full check never passed.
        r = run_cli("status", timeout=30)
        assert r.rc == 0 and "full check: never passed on this ledger; run 'reclaim verify'" in r.stdout, r
        assert json.loads(run_cli("status", "--json").stdout)["verified"] == {}
        assert file_digest(ledger_path) == before
    assert sim.count(None) == 0

    r = run_cli("verify")
    assert r.rc == 11, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "malformed" in r.stdout + r.stderr or "btreeInitPage" in r.stdout + r.stderr
    r = run_cli("verify", "--json")
    assert r.rc == 11 and "Traceback" not in r.stderr
    doc = json.loads(r.stdout.splitlines()[0])
    assert doc.get("ok") is False or doc.get("exit_code") == 11
    assert file_digest(ledger_path) == before


@pytest.mark.sqlite_only  # garbles the SQLite file's own pages
def test_verify_reports_damage_it_cannot_read_instead_of_raising(
    ledger_path: Path, config_path: Path,
) -> None:
    from ledger.audit import verify

    _ledger_with_jobs(ledger_path, config_path)
    _corrupt_page_holding(ledger_path, b"MARK-000")
    conn = connect(ledger_path, readonly=True)
    try:
        verdict = verify(conn)
    finally:
        conn.close()
    assert not verdict.ok
    assert any("malformed" in p or "btreeInitPage" in p for p in verdict.integrity), verdict.integrity


# -- 6. init on a full disk, and a read-only directory -------------------------------------------------------
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test needs root, as CI has): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _remount(where: Path, options: str) -> None:
    done = subprocess.run(["mount", "-o", f"remount,{options}", str(where)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@needs_root
@pytest.mark.sqlite_only  # the SQLite file and its journal on a full file system
@pytest.mark.parametrize("size", ["64k", "320k"], ids=["no-room-for-the-journal", "no-room-for-the-ledger"])
def test_init_on_a_full_disk_leaves_nothing_and_works_once_there_is_room(
    size: str, tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    from ledger.journal import JOURNAL_BYTES

    with _tmpfs(tmp_path / "disk", size) as disk:
        ledger = disk / "reclaim.db"
        for _ in range(2):  # the second init meets the same clean state: no stub to refuse, no loop
            r = run_cli("init", ledger=ledger)
            assert_one_line_error(r, 7, str(ledger), "disk is full")
            assert sorted(os.listdir(disk)) == [], "init left a stub, a temporary file or a half-made journal"
        r = run_cli("status", ledger=ledger)
        assert_one_line_error(r, 7, str(ledger), "not found", "reclaim init")

        _remount(disk, "size=4m")
        r = run_cli("init", ledger=ledger)
        assert r.rc == 0, r.stderr
        assert sorted(os.listdir(disk)) == ["reclaim.db", "reclaim.db.outcomes"]
        assert (disk / "reclaim.db.outcomes").stat().st_size == JOURNAL_BYTES
        assert run_cli("status", ledger=ledger).rc == 0


@needs_root
@pytest.mark.sqlite_only  # the SQLite file in a read-only folder
def test_a_read_only_directory_is_named_as_such(
    tmp_path: Path, config_path: Path, sim: Simulator, run_cli: Callable[..., Any],
    file_digest: Callable[[Path], str],
) -> None:
    # As root, chmod does not stop writes: a tmpfs remounted read-only does.
    with _tmpfs(tmp_path / "ro", "4m") as folder:
        ledger = folder / "reclaim.db"
        assert run_cli("init", ledger=ledger).rc == 0
        _remount(folder, "ro")
        before = file_digest(ledger)
        for args in (["submit", OP, "--payload", GOOD_PAYLOAD, "--job-id", "ro-1"], ["status"], ["events"]):
            r = run_cli(*args, ledger=ledger)
            line = assert_one_line_error(r, 7, str(ledger), f"the directory {folder} is read-only")
            assert "file is read-only" not in line
        other = folder / "other.db"
        r = run_cli("init", ledger=other)
        assert_one_line_error(r, 7, str(other), f"the directory {folder} is read-only")
        assert sorted(os.listdir(folder)) == ["reclaim.db", "reclaim.db.outcomes"]
        assert file_digest(ledger) == before
        assert sim.count(None) == 0


@pytest.mark.sqlite_only  # how a SQLite file name is opened
def test_a_ledger_name_with_uri_characters_opens_that_file(
    tmp_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    ledger = tmp_path / "odd #1 ?x=%41.db"
    assert run_cli("init", ledger=ledger).rc == 0
    assert ledger.exists()
    r = run_cli("status", ledger=ledger)
    assert r.rc == 0, r.stderr


# -- 7. times and owners: validated when written, shown as "invalid" when a bad one is already stored -------
def _held_jobs(ledger: Path, config: Path, ids: list[str]) -> None:
    """Held jobs (send outcome unknown), written through the ledger's own functions."""
    from ledger.leases import claim_for_send
    from ledger.remotes.base import SendOutcome
    from ledger.worker import record_send_outcome

    cfg = load_config(config)
    clock = ManualClock(1_796_126_400.0)
    conn = connect(ledger)
    try:
        for job_id in ids:
            res = reserve(conn, cfg, OP, {"input": "x"}, clock=clock, job_id=job_id)
            claim = claim_for_send(conn, cfg, res.key, owner="w", now=clock.now())
            assert claim is not None
            record_send_outcome(conn, cfg, claim, SendOutcome("unknown", error="reset", reason="reset"),
                                now=clock.now())
    finally:
        conn.close()


@pytest.mark.parametrize("due", ["inf", "-inf", "nan", "1e20", "-1e20", "-1", "0001-01-01T00:00Z",
                                 "9999-99-99", "253402300800"])
def test_a_due_time_outside_1970_to_9999_is_refused(
    due: str, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    _held_jobs(ledger_path, config_path, ["held-1"])
    before = fingerprint(ledger_path)
    for args in (["assign", "held-1", "--owner", "bob", "--due", due, "--reason", "r"],
                 ["bulk-assign", "--owner", "bob", "--due", due, "--reason", "r"],
                 ["bulk-assign", "--owner", "bob", "--due", due, "--yes", "--reason", "r"]):
        r = run_cli(*args, operator="alice")
        assert_one_line_error(r, 2, "--due", due)
    assert fingerprint(ledger_path) == before
    r = run_cli("assign", "held-1", "--owner", "bob", "--due", "9999-12-31T00:00Z", "--reason", "r", operator="alice")
    assert r.rc == 0, r.stderr  # the last year is still a time


@pytest.mark.parametrize("owner", ["", "   ", "x" * 201], ids=["empty", "blank", "too-long"])
def test_an_owner_must_name_someone(
    owner: str, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    _held_jobs(ledger_path, config_path, ["held-1"])
    before = fingerprint(ledger_path)
    for args in (["assign", "held-1", "--owner", owner, "--due", "2026-12-03T09:00Z", "--reason", "r"],
                 ["bulk-assign", "--owner", owner, "--due", "2026-12-03T09:00Z", "--yes", "--reason", "r"]):
        r = run_cli(*args, operator="alice")
        assert_one_line_error(r, 2, "owner")
    assert fingerprint(ledger_path) == before


BAD_STORED = {"due-inf": ("due_at", float("inf")), "due-1e20": ("due_at", 1e20),
              "due-neg-huge": ("due_at", -1e20), "held-at-neg-inf": ("held_at", float("-inf")),
              "created-1e20": ("created_at", 1e20)}


def store_bad_times(ledger: Path) -> None:
    """Bypass validation the way a hand edit (or an older reclaim) would: a bare UPDATE of the jobs table,
    on either backend (an autocommit connection: each UPDATE commits)."""
    raw = connect(ledger)
    try:
        for job_id, (column, value) in BAD_STORED.items():
            QmarkSql(raw).execute(f"UPDATE jobs SET {column} = ?, owner = 'bob' WHERE job_id = ?", (value, job_id))
    finally:
        raw.close()


@pytest.mark.both_backends
def test_a_bad_time_already_stored_is_shown_as_invalid(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any],
) -> None:
    _held_jobs(ledger_path, config_path, list(BAD_STORED))
    store_bad_times(ledger_path)
    for job_id, (column, _) in BAD_STORED.items():
        for args in (["show", job_id], ["show", job_id, "--json"]):
            r = run_cli(*args)
            assert r.rc == 0 and "Traceback" not in r.stderr, (args, r.stderr)
        r = run_cli("show", job_id)
        row = next(line for line in r.stdout.splitlines() if f" {column} " in line)
        assert "invalid" in row, row
    for args in (["jobs", "held"], ["jobs", "held", "--json"], ["status"], ["events"]):
        r = run_cli(*args)
        assert r.rc == 0 and "Traceback" not in r.stderr, (args, r.stdout, r.stderr)
    r = run_cli("verify")  # the times were written past the seal: verify names that edit (exit 11), never raises
    assert r.rc in (0, 11) and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    r = run_cli("jobs", "held")
    assert "invalid" in r.stdout  # the age column of the job created "in the year 3 million"


def test_time_formatting_never_raises() -> None:
    from console.live import age, clock_time
    from ledger.clock import iso

    for bad in (float("inf"), float("-inf"), float("nan"), 1e20, -1e20, 253402300800.0, -1.0):
        assert iso(bad) == "invalid"
        assert clock_time(bad, "Asia/Tokyo", with_date=True) == "invalid"
        assert clock_time(bad) == "invalid"
    for bad in (float("inf"), float("nan"), 1e20, -1e20):
        assert age(bad) == "invalid"
    assert iso(0.0) == "1970-01-01T00:00:00Z" and iso(253402300799.0) == "9999-12-31T23:59:59Z"
    assert age(90) == "1m" and iso(None) == ""


# -- 8. every number a user gives is bounded ------------------------------------------------------------------
OPTION_CASES = [
    (["events", "--limit", "-1"], "--limit"),
    (["events", "--limit", "0"], "--limit"),
    (["events", "--limit", "1000000"], "--limit"),
    (["events", "--after", "-5"], "--after"),
    (["events", "--after", "1" + "0" * 30], "--after"),
    (["events", "--after", str(2**63)], "--after"),
    (["jobs", "--page", "1" + "0" * 30], "--page"),
    (["jobs", "--page", "0"], "--page"),
    (["jobs", "--limit", "-3"], "--limit"),
    (["quota", "--days", "0"], "--days"),
    (["quota", "--days", "100000"], "--days"),
    (["worker", "--interval", "-5"], "--interval"),
    (["worker", "--interval", "nan"], "--interval"),
    (["worker", "--interval", "inf"], "--interval"),
    (["worker", "--interval", "0"], "--interval"),
    (["receiver", "--port", "-1"], "--port"),
    (["receiver", "--port", "70000"], "--port"),
    (["simulator", "--port", "70000"], "--port"),
    (["simulator", "--complete-after", "nan"], "--complete-after"),
    (["simulator", "--complete-after", "-1"], "--complete-after"),
    (["demo", "--no-ui", "--seconds", "nan"], "--seconds"),
    (["demo", "--no-ui", "--seconds", "-1"], "--seconds"),
    (["demo", "--no-ui", "--rate", "0"], "--rate"),
    (["demo", "--no-ui", "--rate", "inf"], "--rate"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "option"), OPTION_CASES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in OPTION_CASES])
def test_an_option_number_out_of_range_is_refused_at_once(
    args: list[str], option: str, tmp_path: Path, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli(*args, timeout=30)  # a busy loop or a hang fails here, by the timeout
    assert_one_line_error(r, 2, option, "must be")
    assert fingerprint(ledger_path) == before
    assert not (tmp_path / "demo").exists(), "the demo started although its options were refused"


@pytest.mark.both_backends
def test_the_largest_event_number_is_a_number_every_backend_takes(
    ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    before = fingerprint(ledger_path)
    r = run_cli("events", "--after", str(2**63 - 1), "--json", timeout=30)
    assert r.rc == 0 and "Traceback" not in r.stderr, r.stderr
    assert fingerprint(ledger_path) == before


# -- 9. a signed webhook delivery whose ids no ledger can store ---------------------------------------------------
@pytest.mark.both_backends
@pytest.mark.parametrize("where", ["handle", "idem"])
def test_a_delivery_holding_a_nul_is_refused_or_its_hint_dropped_on_every_backend(
    where: str, ledger_path: Path, make_config: Callable[..., dict[str, Any]], tmp_path: Path, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch, fingerprint: Callable[[Path], str],
) -> None:
    import uuid
    from datetime import UTC, datetime

    from standardwebhooks.webhooks import Webhook

    from ledger.config import parse_config
    from ledger.receiver import receive

    secret = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtMTIzNDU2Nzg="
    monkeypatch.setenv("RECLAIM_TEST_WHSEC", secret)
    doc = make_config(base_url="http://127.0.0.1:9")
    doc["remotes"]["gemini"]["webhook_secret_env"] = "RECLAIM_TEST_WHSEC"
    cfg = parse_config(doc, base_dir=tmp_path)
    ids = {"handle": "v1_ok", "idem": "ok"}
    ids[where] = {"handle": "v1_a\x00b", "idem": "idem\x00"}[where]
    body = json.dumps({"type": "interaction.completed", "timestamp": datetime.now(UTC).isoformat(),
                       "data": {"id": ids["handle"], "status": "completed",
                                "user_metadata": {"idem": ids["idem"], "attempt": "1"}}})
    msg, when = f"msg_{uuid.uuid4().hex}", datetime.now(UTC)
    headers = {"webhook-id": msg, "webhook-timestamp": str(int(when.timestamp())),
               "webhook-signature": Webhook(secret).sign(msg, when, body)}
    before = fingerprint(ledger_path)
    conn = connect(ledger_path)
    try:
        answer = receive(conn, cfg, {"gemini": secret}, body.encode(), headers, clock=clock)
    finally:
        conn.close()
    if where == "handle":  # not 503: no retry loop
        assert (answer.status, answer.message) == (400, "interaction.completed without a usable data.id")
        assert fingerprint(ledger_path) == before
    else:  # user_metadata is an undocumented hint: a NUL in it is dropped, the delivery is recorded
        assert answer.status == 202
        conn = connect(ledger_path)
        try:
            [ev] = evidence_store.orphans(conn)
        finally:
            conn.close()
        assert ev.handle == "v1_ok" and "idem" not in ev.detail.get("hint", {})


# -- 10. a remote's own words holding a NUL: recorded alike on every backend ---------------------------------------
@pytest.mark.both_backends
@pytest.mark.parametrize(("status", "state"), [(400, "failed"), (503, "held")], ids=["refused", "unknown"])
def test_a_remote_error_holding_a_nul_is_recorded_alike_on_every_backend(
    status: int, state: str, sim: Simulator, ledger_path: Path, conn: Any, cfg: Any, clock: ManualClock,
    read_job: Callable[..., Any],
) -> None:
    from ledger.worker import RemoteCache, submit_now

    sim.add_fault("status", status=status, reason="BAD\x00REASON", error_shape="google")  # ErrorInfo.reason
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="nul-err", remotes=RemoteCache(cfg))
    assert res.state == state
    job = read_job(ledger_path, "nul-err")
    assert job is not None and job.state == state
    assert "(BAD\\x00REASON)" in job.last_error  # the four characters \x00: what PostgreSQL text can hold
    assert sim.count("create") == 1


@pytest.mark.both_backends
def test_a_remote_status_holding_a_nul_holds_the_job_on_every_backend(
    sim: Simulator, ledger_path: Path, conn: Any, cfg: Any, clock: ManualClock, read_job: Callable[..., Any],
) -> None:
    from ledger.worker import RemoteCache, submit_now, tick

    sim.add_fault("end_status", end_status="we\x00ird", text="t")
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="nul-status", remotes=RemoteCache(cfg))
    assert res.state == "submitted"
    clock.advance(1)
    tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w")  # the poll pass: no error, the job held
    job = read_job(ledger_path, "nul-status")
    assert job is not None and job.state == "held" and "\x00" not in (job.held_reason or "")
    assert sim.count("create") == 1


@pytest.mark.both_backends
@pytest.mark.parametrize(("reply_id", "shown"), [("v1_odd\x00id", "v1_odd\\x00id"), ("v1_\ud800", "v1_\\ud800")],
                         ids=["nul", "lone-surrogate"])
def test_an_accepted_send_whose_id_no_ledger_can_store_holds_the_job_alike_on_every_backend(
    reply_id: str, shown: str, sim: Simulator, ledger_path: Path, conn: Any, cfg: Any, clock: ManualClock,
    read_job: Callable[..., Any],
) -> None:
    """A reply naming an id no ledger can store (a NUL in it, or a lone surrogate: not Unicode) is not a handle:
    the send is uncertain, the job held with the id escaped in the error for a person to look up, never sent
    again; the worker does not fail."""
    from ledger.worker import RemoteCache, submit_now, tick

    sim.add_fault("reply_id", text=reply_id)
    res = submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="nul-handle", remotes=RemoteCache(cfg))
    assert res.state == "held"
    job = read_job(ledger_path, "nul-handle")
    assert job is not None and job.state == "held" and job.handle is None
    assert f"'{shown}', an id no ledger can store" in (job.last_error or "")
    assert "\x00" not in (job.last_error or "") and "\ud800" not in (job.last_error or "")
    fresh = connect(ledger_path)
    try:
        assert evidence_store.for_job(fresh, job) == []  # no handle was recorded as evidence
    finally:
        fresh.close()
    clock.advance(3600)
    tick(conn, cfg, clock=clock, remotes=RemoteCache(cfg), owner="w")  # held: never sent again by a worker
    assert sim.count("create") == 1
