"""Fuzz every CLI command with hostile input: the exit code is always a documented one, nothing escapes
as a traceback, and a refusal (bad input, refused, unusable) leaves the ledger exactly as it was.

The CLI runs in-process (typer's CliRunner) so hundreds of examples fit in `make test`; each example gets
its own copy of a small worked ledger (sent, held, a finding) and talks to the bundled simulator over
loopback. `RECLAIM_FUZZ_EXAMPLES` raises the count (`make fuzz`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from ledger_reads import job_fingerprint
from typer.testing import CliRunner

from console.cli import app
from ledger.clock import ManualClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.errors import (
    EXIT_BAD_INPUT,
    EXIT_BLOCKED_BY_HOLD,
    EXIT_HELD,
    EXIT_LEDGER_LOCKED,
    EXIT_LEDGER_UNUSABLE,
    EXIT_OK,
    EXIT_QUOTA_EXCEEDED,
    EXIT_REFUSED,
    EXIT_RESERVED_NOT_SENT,
    EXIT_SEND_TAKEN_OVER,
    EXIT_VERIFY_FAILED,
)
from ledger.simulator import Simulator
from ledger.worker import RemoteCache, submit_now

OP = "article.generate"
DOCUMENTED = {EXIT_OK, EXIT_BAD_INPUT, EXIT_QUOTA_EXCEEDED, EXIT_HELD, EXIT_BLOCKED_BY_HOLD, EXIT_REFUSED,
              EXIT_LEDGER_UNUSABLE, EXIT_LEDGER_LOCKED, EXIT_RESERVED_NOT_SENT, EXIT_SEND_TAKEN_OVER,
              EXIT_VERIFY_FAILED}
REFUSALS = {EXIT_BAD_INPUT, EXIT_REFUSED, EXIT_LEDGER_UNUSABLE}
"""Exit codes that promise nothing was written."""
EXAMPLES = int(os.environ.get("RECLAIM_FUZZ_EXAMPLES", examples(500)))
KNOWN_JOBS = ["held-1", "sent-1", "shared"]

# -- strategies ---------------------------------------------------------------------------------------
# Text as a hostile caller can pass it: any code point, lone surrogates included (that is how Python
# hands over argv bytes that are not UTF-8), markup, controls, bidi overrides, huge and empty.
any_text = st.text(st.characters(blacklist_categories=()), max_size=60)
hostile = st.sampled_from([
    "", " ", "[bold red]x[/]", "[link=http://evil]y[/link]", "\x1b]8;;http://evil\x1b\\z\x1b]8;;\x1b\\",
    "\x1b[31m", "\x9b31m", "\u202e", "\ud800", "\udcff", "a" * 5000, "-", "--json", "%s%n", "../../etc/passwd",
])
text = st.one_of(any_text, hostile)
job_id = st.one_of(st.sampled_from(KNOWN_JOBS), text)
number_text = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1", "1e20", "10" * 20, "1e309", "0x10", "", " 3 "]),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
due = st.one_of(
    number_text,
    st.sampled_from(["2026-12-03T09:00Z", "9999-12-31T23:59:59Z", "10000-01-01T00:00Z", "1969-12-31T23:59Z",
                     "0001-01-01", "2h", "tomorrow 09:00", "yesterday", "2026-13-45", "T", "Z"]),
    text,
)
json_value: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
payload = st.one_of(
    json_value.map(lambda v: json.dumps(v, allow_nan=True)),
    st.dictionaries(st.sampled_from(["input", "system_instruction", "generation_config", "x"]), json_value,
                    max_size=3).map(lambda v: json.dumps(v, allow_nan=True)),
    st.sampled_from(['{"input": "\\ud800"}', "[" * 2000 + "]" * 2000, '{"input": ' + "9" * 5000 + "}",
                     '{"input": "ok"}', "not json", "", "{}", '{"input": 1e999}']),
    text,
)
operator = st.sampled_from(["alice", "bob", "carol", "scheduler", "nobody", "", "\ud800", "[b]bob[/b]"])
reason = st.one_of(st.just([]), text.map(lambda r: ["--reason", r]))
"""A reason, or none at all (every write needs one: refused with exit 2)."""
filters = st.one_of(text, st.lists(st.sampled_from(["owner:me", "op:article.*", "target:b*", "reason:503",
                                                    "reason:", "text:a:b", "foo:bar", "Owner:x", "held", "1"]),
                                   max_size=4).map(" ".join))
DRY_RUNS = {"query", "finding", "assign", "release", "reconcile", "reject", "remediate"}


@st.composite
def command(draw: st.DrawFn) -> list[str]:
    """One CLI invocation: a command and fuzzed arguments (never one that serves or loops forever)."""
    name = draw(st.sampled_from([
        "submit", "show", "finding", "assign", "bulk-assign", "release", "reconcile", "reject", "remediate",
        "query", "jobs", "views", "events", "quota", "status", "verify", "tick", "notification", "evidence",
        "resume", "worker", "notifications",
    ]))
    j = draw(job_id)
    args: list[str]
    match name:
        case "submit":
            args = [draw(st.one_of(st.just(OP), text)), "--payload", draw(payload), "--job-id", j]
            if draw(st.booleans()):
                args += ["--target", draw(text)]
        case "show" | "query" | "evidence":
            args = [j]
        case "finding":
            args = [j, "--category", draw(st.one_of(st.just("not_received"), text)), "--note", draw(text)]
        case "assign":
            args = [j, "--owner", draw(st.one_of(operator, text)), "--due", draw(due), *draw(reason)]
        case "bulk-assign":
            args = ["--owner", draw(st.one_of(operator, text)), "--due", draw(due), "--filter", draw(filters),
                    *draw(reason), *(["--yes"] if draw(st.booleans()) else [])]
        case "release" | "reject":
            args = [j, *draw(reason)]
        case "reconcile":
            args = [j, "--handle", draw(text), *draw(reason), *(["--unverified"] if draw(st.booleans()) else [])]
        case "remediate":
            args = [j, "--note", draw(text)]
        case "jobs":
            args = [draw(st.one_of(st.just("held"), text)), "--filter", draw(filters), "--limit", draw(number_text),
                    "--page", draw(number_text)]
        case "views":
            args = ["--save", draw(text), "--group", draw(text), "--filter", draw(text)]
        case "events":
            args = ["--limit", draw(number_text), "--after", draw(number_text)]
        case "quota":
            args = ["--days", draw(number_text)]
        case "notification":
            args = [draw(text), "--mark", draw(st.one_of(st.just("confirmed"), text))]
        case "resume":
            args = [draw(st.one_of(st.just("gemini"), text)), "--reason", draw(text)]
        case "worker":
            # Only intervals a worker must refuse: a valid one would run until stopped.
            args = ["--interval", draw(st.sampled_from(["-5", "nan", "inf", "-inf", "0", "1e999", "x", ""]))]
        case _:
            args = []
    if name in DRY_RUNS and draw(st.booleans()):
        args.append("--dry-run")
    if draw(st.booleans()):
        args.append("--json")
    return [name, *args]


# -- the worked ledger each example starts from ------------------------------------------------------------
@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    """A simulator, a config pointing at it and a template ledger: one job sent, one held with a finding."""
    folder = Path(tempfile.mkdtemp(prefix="reclaim-fuzz-"))
    with Simulator(complete_after=0.0).start() as sim:
        raw = {
            "timezone": "UTC",
            "identity": {"source": "declared"},
            "policy": {"lease_seconds": 60, "stale_reserving_seconds": 120},
            "operators": {"alice": ["triage"], "bob": ["triage", "approver"], "carol": ["approver"],
                          "scheduler": ["sender"]},
            "remotes": {"gemini": {"kind": "gemini", "base_url": sim.url, "model": "gemini-sim",
                                   "timeout_seconds": 2}},
            "operations": {OP: {"remote": "gemini", "daily_quota": 5, "sink": str(folder / "results")}},
        }
        config = folder / "reclaim.toml"
        config.write_text(_toml(raw), encoding="utf-8")
        template = folder / "template.db"
        create_ledger(template)
        cfg = parse_config(raw, base_dir=folder)
        conn = connect(template)
        clock = ManualClock(1_796_000_000.0)
        try:
            submit_now(conn, cfg, OP, {"input": "a"}, clock=clock, job_id="sent-1", remotes=RemoteCache(cfg))
            submit_now(conn, cfg, OP, {"input": "s"}, clock=clock, job_id="shared", remotes=RemoteCache(cfg))
            sim.add_fault("status", status=503)
            submit_now(conn, cfg, OP, {"input": "h"}, clock=clock, job_id="held-1", remotes=RemoteCache(cfg))
            sim.clear_faults()
            from ledger import triage

            triage.record_finding(conn, cfg, _key("held-1"), "not_received", "absent", actor="alice", clock=clock)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        yield {"folder": folder, "config": config, "template": template}
    shutil.rmtree(folder, ignore_errors=True)


def _key(job: str) -> Any:
    from ledger.model import JobKey

    return JobKey(job, OP)


def _fingerprint(path: Path) -> tuple[str, int]:
    conn = connect(path, readonly=True)
    try:
        return job_fingerprint(conn), conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    finally:
        conn.close()


def _run(world: dict[str, Any], args: list[str], *, config: Path | None = None) -> tuple[int, str, str, Path]:
    ledger = Path(tempfile.mkdtemp(dir=world["folder"])) / "reclaim.db"
    shutil.copyfile(world["template"], ledger)
    before = _fingerprint(ledger)
    env = {"RECLAIM_LEDGER": str(ledger), "RECLAIM_CONFIG": str(config or world["config"]),
           "RECLAIM_OPERATOR": "scheduler", "NO_COLOR": "1", "COLUMNS": "200"}
    result = CliRunner().invoke(app, args, env=env, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(result.exception))
        raise AssertionError(f"reclaim {args!r} raised instead of a one-line error:\n{tb}")
    rc = result.exit_code
    assert rc in DOCUMENTED, f"reclaim {args!r}: exit {rc} is not a documented exit code\n{result.output}"
    if rc in REFUSALS or "--dry-run" in args:
        assert _fingerprint(ledger) == before, f"reclaim {args!r} exited {rc} but changed the ledger"
    return rc, result.stdout, result.stderr, ledger


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.large_base_example])


@pytest.mark.slow
@FUZZ
@given(args=command())
def test_every_command_with_hostile_arguments(world: dict[str, Any], args: list[str]) -> None:
    _run(world, args)


config_number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30))


@settings(max_examples=max(EXAMPLES // 5, examples(100)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from([("policy", "lease_seconds"), ("policy", "stale_reserving_seconds"),
                         ("policy", "retry_backoff_seconds"), ("policy", "send_margin_seconds"),
                         ("policy", "poll_concurrency"), ("remotes", "gemini", "timeout_seconds"),
                         ("remotes", "gemini", "base_url"), ("operations", OP, "daily_quota"),
                         ("timezone",), ("identity", "source")]),
    value=st.one_of(config_number, text, st.booleans()),
    args=st.sampled_from([["status"], ["submit", OP, "--payload", '{"input": "x"}', "--job-id", "cfg-fuzz"],
                          ["tick"], ["show", "held-1"], ["release", "held-1", "--reason", "r", "--operator", "bob"]]),
)
def test_config_values(world: dict[str, Any], key: tuple[str, ...], value: Any, args: list[str]) -> None:
    raw = tomllib.loads(world["config"].read_text(encoding="utf-8"))
    node = raw
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value
    path = Path(tempfile.mkdtemp(dir=world["folder"])) / "fuzzed.toml"
    try:
        path.write_text(_toml(raw), encoding="utf-8", errors="surrogatepass")
    except UnicodeEncodeError:
        return
    _run(world, args, config=path)


def _toml(doc: dict[str, Any], prefix: str = "") -> str:
    """TOML for a config (possibly with fuzzed scalars: nan and inf as TOML writes them, strings as basic strings."""
    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else json.dumps(v)

    lines, tables = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            tables.append((f"{prefix}{json.dumps(k)}", v))
        elif isinstance(v, list):
            lines.append(f"{json.dumps(k)} = [{', '.join(scalar(x) for x in v)}]")
        else:
            lines.append(f"{json.dumps(k)} = {scalar(v)}")
    out = "\n".join(lines) + "\n"
    for name, table in tables:
        out += f"\n[{name}]\n" + _toml(table, prefix=f"{name}.")
    return out


@pytest.mark.parametrize("content", [b"\x00\x01\x02binary\xff\xfe", b"timezone = \"\xff\xfe\"\n", b"[[[",
                                     b"a = 1\n" * 10, "timezone = \"\ud800\"".encode("utf-8", "surrogatepass")])
def test_config_files_that_are_not_utf8_toml(world: dict[str, Any], content: bytes) -> None:
    path = Path(tempfile.mkdtemp(dir=world["folder"])) / "bad.toml"
    path.write_bytes(content)
    rc, _, _, _ = _run(world, ["status"], config=path)
    assert rc == EXIT_BAD_INPUT


@pytest.mark.parametrize("zone", ["a" * 5000, "../../../etc/passwd", "UTC\x00", "Europe/"])
def test_a_time_zone_that_is_no_zone_is_refused(world: dict[str, Any], zone: str) -> None:
    """Found by the fuzz: a zone name too long for a file name escaped as OSError."""
    raw = tomllib.loads(world["config"].read_text(encoding="utf-8"))
    raw["timezone"] = zone
    path = Path(tempfile.mkdtemp(dir=world["folder"])) / "zone.toml"
    path.write_text(_toml(raw), encoding="utf-8")
    rc, _, _, _ = _run(world, ["status"], config=path)
    assert rc == EXIT_BAD_INPUT


def test_the_template_every_example_copies_verifies(world: dict[str, Any]) -> None:
    """A control: the template the examples copy is a sound ledger (so refusals are the CLI's doing)."""
    rc, out, _, _ = _run(world, ["verify"])
    assert rc == EXIT_OK, out
