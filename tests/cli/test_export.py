"""`reclaim export`: jobs and events out of a real ledger, through the real CLI, on SQLite and PostgreSQL.

The events export recomputes to the head `reclaim verify` reports; the CSV opens with csv.DictReader and
holds every job; filters select what they say; bad input is one line, exit 2, and writes nothing (no
file made or changed, the ledger's rows unchanged); a read-only ledger file and a read-only PostgreSQL
role export; stdout may be a pipe (read to the end, or closed early) or a terminal, where nothing that
drives it is printed raw. Both backends give the same bytes for the same data.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger import triage
from ledger.chain import event_hash
from ledger.clock import ManualClock, iso, parse_time
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger
from ledger.export import EVENT_COLUMNS, JOB_COLUMNS
from ledger.leases import claim_for_send
from ledger.remotes.base import SendOutcome
from ledger.reservation import reserve
from ledger.worker import record_send_outcome

T0 = parse_time("2026-12-01T12:00:00Z")
OP = "article.generate"
OP2 = "storage.cleanup"
HOSTILE = "a\x1b[31mred\x1b]8;;http://evil\x1b\\x\x9b1m\u202eend, \"quoted\"\nnext line"
_ACTIVE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What a terminal acts on: C0 but newline, DEL, C1, separators, bidi controls (CR too: it moves the cursor)."""

# job id, operation, target, held with this error (None: stays reserving), owner
JOBS: list[tuple[str, str, str, str | None, str | None]] = [
    ("zeta", OP, "bucket-a", None, None),
    ("Alpha", OP, "bucket-b", "timeout after 30 s", "alice"),
    ("\u00c4rger", OP2, "bucket-a", None, None),  # 'Ä': after 'zeta' in UTF-8 byte order, not in a locale's
    ("beta", OP2, "bucket-d", "HTTP 503 UNAVAILABLE", None),
    ("hostile", OP, HOSTILE, HOSTILE, "bob"),
    ("beta", OP, "bucket-c", None, None),
]


def _config_doc(tmp_path: Path) -> dict[str, Any]:
    return {
        "timezone": "UTC",
        "identity": {"source": "declared"},
        "operators": {"alice": ["triage"], "bob": ["triage", "approver"], "scheduler": ["sender"]},
        "remotes": {"gemini": {"kind": "gemini", "base_url": "http://127.0.0.1:9", "model": "gemini-sim"}},
        "operations": {OP: {"remote": "gemini", "daily_quota": 100, "sink": str(tmp_path / "results")},
                       OP2: {"remote": "gemini", "daily_quota": 100, "sink": str(tmp_path / "results")}},
    }


def fill(ledger: str | Path, cfg: Config) -> None:
    """The JOBS, one a minute from T0: reserved; some claimed and held with an error; some given an owner."""
    clock = ManualClock(T0)
    conn = connect(ledger)
    try:
        for job_id, op, target, error, owner in JOBS:
            res = reserve(conn, cfg, op, {"input": f"{job_id} {target}"}, clock=clock, job_id=job_id, target=target)
            if error is not None:
                claim = claim_for_send(conn, cfg, res.key, owner="worker-1", now=clock.now())
                assert claim is not None
                applied = record_send_outcome(conn, cfg, claim, SendOutcome("unknown", error=error, reason=error),
                                              now=clock.now())
                assert applied.ok
            if owner is not None:
                triage.assign(conn, cfg, res.key, owner, clock.now() + 3600, actor="bob", clock=clock, reason="mine")
            clock.advance(60)
    finally:
        conn.close()


@pytest.fixture
def filled(tmp_path: Path, ledger_path: Path, write_config: Callable[..., Path]) -> Path:
    """`ledger_path` holding JOBS, and the config written where `run_cli` reads it."""
    doc = _config_doc(tmp_path)
    write_config(doc)
    fill(ledger_path, parse_config(doc, base_dir=tmp_path))
    return ledger_path


def summary(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def head_of(line: str) -> str:
    m = re.search(r"audit head at export: \d+ events, hash ([0-9a-f]{64})", line)
    assert m is not None, line
    return m.group(1)


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_events_recompute_to_the_head_verify_reports(filled: Path, run_cli: Callable[..., Any]) -> None:
    r = run_cli("export", "events", "--format", "jsonl")
    assert r.rc == 0, r
    rows = jsonl(r.stdout)
    assert [list(row) for row in rows] == [list(EVENT_COLUMNS)] * len(rows)
    prev = None
    for row in rows:
        assert row["prev_hash"] == prev
        want = event_hash(prev, row["at"], row["job_id"], row["operation"], row["seq"], row["actor"], row["kind"],
                          row["from_state"], row["to_state"], row["epoch"], row["detail"], row["seal"])
        assert row["hash"] == want, row
        prev = want
    v = run_cli("verify", "--json")
    assert v.rc == 0, v
    verdict = json.loads(v.stdout)
    assert verdict["ok"] and verdict["events"] == len(rows) > len(JOBS)
    assert prev == verdict["head_hash"] == head_of(summary(r.stderr))
    assert f"exported {len(rows)} events as jsonl to stdout" in r.stderr
    j = run_cli("export", "events", "--json")  # the summary as JSON, for a script that keeps the anchor
    assert j.rc == 0 and j.stdout == r.stdout
    assert json.loads(j.stderr) == {"exported": len(rows), "what": "events", "format": "jsonl", "output": "stdout",
                                    "redacted_rows": 0, "secrets_checked": True, "terminal_escaped": False,
                                    "audit": {"events": len(rows), "head_hash": verdict["head_hash"]}}


def test_csv_opens_with_dictreader_and_holds_every_job(
    filled: Path, run_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    out = tmp_path / "jobs.csv"
    r = run_cli("export", "jobs", "--output", str(out))  # the format from the suffix
    assert r.rc == 0, r
    assert f"exported {len(JOBS)} jobs as csv to {out}" in summary(r.stderr)
    with out.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == list(JOB_COLUMNS)
        got = list(reader)
    assert {(j["job_id"], j["operation"]) for j in got} == {(j[0], j[1]) for j in JOBS}
    # (job_id, operation) in UTF-8 byte order on both backends
    assert [(j["job_id"], j["operation"]) for j in got] == sorted(
        ((j[0], j[1]) for j in JOBS), key=lambda k: (k[0].encode(), k[1].encode()))
    hostile = next(j for j in got if j["job_id"] == "hostile")
    assert hostile["target"] == HOSTILE and HOSTILE in hostile["held_reason"]  # as stored, in a file
    assert hostile["state"] == "held" and hostile["owner"] == "bob"
    assert json.loads(hostile["payload"]) == {"input": f"hostile {HOSTILE}"}
    reserving = next(j for j in got if j["job_id"] == "zeta")
    assert reserving["owner"] == "" and reserving["created_at"] == repr(T0)
    # the json array and the jsonl lines hold the same rows
    arr = run_cli("export", "jobs", "--format", "json")
    lines = run_cli("export", "jobs", "--format", "jsonl")
    assert arr.rc == lines.rc == 0
    assert json.loads(arr.stdout) == jsonl(lines.stdout)
    assert [j["job_id"] for j in json.loads(arr.stdout)] == [j["job_id"] for j in got]


def _ids(run_cli: Callable[..., Any], what: str, *args: str, **kw: Any) -> list[Any]:
    r = run_cli("export", what, *args, **kw)
    assert r.rc == 0, r
    rows = jsonl(r.stdout)
    assert f"exported {len(rows)} " in summary(r.stderr)
    return [(row["job_id"], row["operation"]) if what == "jobs" else row["id"] for row in rows]


def test_filters(filled: Path, run_cli: Callable[..., Any]) -> None:
    assert _ids(run_cli, "jobs", "--state", "held") == [("Alpha", OP), ("beta", OP2), ("hostile", OP)]
    assert _ids(run_cli, "jobs", "--state", "reserving,held", "-o", OP2) == [("beta", OP2), ("\u00c4rger", OP2)]
    assert _ids(run_cli, "jobs", "--operation", "storage.*", "--target", "bucket-a") == [("\u00c4rger", OP2)]
    assert _ids(run_cli, "jobs", "--job", "beta") == [("beta", OP), ("beta", OP2)]
    assert _ids(run_cli, "jobs", "--job", "beta", "--operation", OP2) == [("beta", OP2)]
    assert _ids(run_cli, "jobs", "--filter", "owner:alice") == [("Alpha", OP)]
    assert _ids(run_cli, "jobs", "--filter", "owner:me", operator="bob") == [("hostile", OP)]
    assert _ids(run_cli, "jobs", "--filter", "reason:503") == [("beta", OP2)]
    # created one a minute from T0: [T0+1m, T0+3m) holds the second and third
    window = ("--since", iso(T0 + 60), "--until", str(T0 + 180))
    assert _ids(run_cli, "jobs", *window) == [("Alpha", OP), ("\u00c4rger", OP2)]
    assert _ids(run_cli, "jobs", "--since", "1h", now=T0 + 3600 + 270) == [("beta", OP)]  # created T0+5m

    every = _ids(run_cli, "events")
    assert every == list(range(1, len(every) + 1))
    r = run_cli("export", "events", "--job", "hostile")
    kinds = [e["kind"] for e in jsonl(r.stdout)]
    assert kinds[0] == "reserve" and "assign" in kinds and {e["job_id"] for e in jsonl(r.stdout)} == {"hostile"}
    held_events = jsonl(run_cli("export", "events", "--state", "held").stdout)
    assert {e["job_id"] for e in held_events} == {"Alpha", "beta", "hostile"}
    assert {(e["job_id"], e["operation"]) for e in held_events} == {("Alpha", OP), ("beta", OP2), ("hostile", OP)}
    assert _ids(run_cli, "events", "--after", str(every[-3])) == every[-2:]
    # a filtered event still proves itself: its hash covers its previous hash and its own fields
    for e in held_events:
        assert e["hash"] == event_hash(e["prev_hash"], *(e[c] for c in EVENT_COLUMNS[1:11]), e["seal"])


def _files(folder: Path) -> list[str]:
    """The files in `folder` but the ledger's own (a reader may leave SQLite's -wal / -shm behind)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("reclaim.db"))


REFUSALS = [
    (["export", "rows"], "export 'rows': unknown; export jobs or events"),
    (["export", "jobs", "--format", "xlsx"], "--format 'xlsx': unknown"),
    (["export", "jobs", "--state", "stuck"], "state 'stuck': unknown"),
    (["export", "jobs", "--filter", "colour:red"], "filter key 'colour:': unknown"),
    (["export", "jobs", "--after", "3"], "--after: an event id, for events only"),
    (["export", "events", "--after", "-1"], "--after -1: must be an event id"),
    (["export", "events", "--since", "yesterday-ish"], "--since 'yesterday-ish': not a time"),
    (["export", "events", "--since", "2026-12-02", "--until", "2026-12-01"], "--until: must be later than --since"),
    (["export", "jobs", "--output", "no-such-folder/jobs.csv"], "folder no-such-folder does not exist"),
    (["export", "jobs", "--output", "existing.csv"], "--output existing.csv: already exists; pass --force"),
    (["export", "jobs", "--output", "."], "--output .: is a folder"),
]


@pytest.mark.parametrize(("args", "says"), REFUSALS, ids=[" ".join(a[1:]) for a, _ in REFUSALS])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    filled: Path, run_cli: Callable[..., Any], tmp_path: Path, fingerprint: Callable[[Path], str],
    args: list[str], says: str,
) -> None:
    existing = tmp_path / "existing.csv"
    existing.write_text("keep me\n", encoding="utf-8")
    before_files = _files(tmp_path)
    before = fingerprint(filled)
    r = run_cli(*args)
    assert r.rc == 2, r
    assert says in summary(r.stderr) and summary(r.stderr).startswith("reclaim: error: ")
    assert r.stdout == ""
    assert _files(tmp_path) == before_files  # no file made, no temporary left
    assert existing.read_text(encoding="utf-8") == "keep me\n"
    assert fingerprint(filled) == before


def test_force_replaces_a_file_whole(filled: Path, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "events.json"
    out.write_text("old\n", encoding="utf-8")
    r = run_cli("export", "events", "--output", str(out), "--force")
    assert r.rc == 0, r
    assert len(json.loads(out.read_text(encoding="utf-8"))) == len(jsonl(run_cli("export", "events").stdout))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".events.json")] == []


def test_force_replaces_only_a_regular_file(filled: Path, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    target = tmp_path / "kept.json"
    target.write_text("keep me\n", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    for out, kind in ((fifo, "a FIFO"), (Path("/dev/null"), "a device"), (link, "a symbolic link")):
        r = run_cli("export", "events", "--output", str(out), "--force")
        assert r.rc == 2, r
        assert f"is {kind}, not a regular file" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISCHR(Path("/dev/null").lstat().st_mode)
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.sqlite_only
def test_a_read_only_ledger_file_exports_and_stays_as_it_was(
    filled: Path, run_cli: Callable[..., Any], tmp_path: Path, file_digest: Callable[[Path], str],
) -> None:
    c = connect(filled)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    os.chmod(filled, stat.S_IRUSR | stat.S_IRGRP)
    try:
        before = file_digest(filled)
        r = run_cli("export", "events", "--output", str(tmp_path / "ev.jsonl"))
        assert r.rc == 0, r
        assert len(jsonl((tmp_path / "ev.jsonl").read_text(encoding="utf-8"))) > len(JOBS)
        r = run_cli("export", "jobs", "--format", "csv")
        assert r.rc == 0 and len(list(csv.DictReader(io.StringIO(r.stdout)))) == len(JOBS)
        assert file_digest(filled) == before
    finally:
        os.chmod(filled, stat.S_IRUSR | stat.S_IWUSR)


def test_a_read_only_postgresql_role_exports(
    pg_url: str, tmp_path: Path, write_config: Callable[..., Path], run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str],
) -> None:
    """A viewer's PostgreSQL role may only SELECT, and its transactions are read-only: the export still runs.
    (The SQLite counterpart is the read-only file above.)"""
    doc = _config_doc(tmp_path)
    write_config(doc)
    create_ledger(pg_url)
    fill(pg_url, parse_config(doc, base_dir=tmp_path))
    import psycopg

    m = re.match(r"postgresql://([^@]*)@/([^?]+)(\?.*)", pg_url)
    assert m is not None
    role = f"viewer_{m.group(2)}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        admin.execute(f'ALTER ROLE "{role}" SET default_transaction_read_only = on')
    viewer = f"postgresql://{role}@/{m.group(2)}{m.group(3)}"
    before = fingerprint(pg_url)  # type: ignore[arg-type]  # the URL, where a path goes
    r = run_cli("export", "events", ledger=viewer)
    assert r.rc == 0, r
    assert head_of(summary(r.stderr)) == jsonl(r.stdout)[-1]["hash"]
    r = run_cli("export", "jobs", "--format", "csv", "--state", "held", ledger=viewer)
    assert r.rc == 0 and len(list(csv.DictReader(io.StringIO(r.stdout)))) == 3
    # the role really cannot write: an operator action through it is refused as an unusable ledger
    refused = run_cli("assign", "hostile", "--owner", "alice", "--due", "2h", "--reason", "r", ledger=viewer,
                      operator="bob")
    assert refused.rc == 7, refused
    assert fingerprint(pg_url) == before  # type: ignore[arg-type]


def test_same_bytes_from_sqlite_and_postgresql(
    tmp_path: Path, pg_url: str, run_cli: Callable[..., Any], write_config: Callable[..., Path],
) -> None:
    """The same data in both backends exports to the same bytes, in every format, filtered or not."""
    doc = _config_doc(tmp_path)
    write_config(doc)
    cfg = parse_config(doc, base_dir=tmp_path)
    ledgers: list[str | Path] = [tmp_path / "same.db", pg_url]
    for ledger in ledgers:
        create_ledger(ledger)
        fill(ledger, cfg)
    for args in (["jobs", "--format", "csv"], ["jobs", "--format", "json"], ["events", "--format", "jsonl"],
                 ["events", "--format", "csv", "--state", "held"], ["jobs", "--format", "jsonl", "-o", "*.cleanup"]):
        outs = []
        for i, ledger in enumerate(ledgers):
            out = tmp_path / f"same-{i}-{args[0]}.{args[2]}"
            out.unlink(missing_ok=True)
            r = run_cli("export", *args, "--output", str(out), ledger=ledger)
            assert r.rc == 0, (args, r)
            outs.append((out.read_bytes(), head_of(summary(r.stderr))))
        assert outs[0] == outs[1], args
        assert outs[0][0].strip()


def test_output_to_a_pipe(filled: Path, run_cli: Callable[..., Any], start_cli: Callable[..., Any],
                          tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    assert run_cli("export", "events", "--output", str(out)).rc == 0
    proc = start_cli("export", "events")  # stdout is a pipe, read to its end
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert stdout == out.read_text(encoding="utf-8")
    # a reader that leaves at once: no traceback, one line, the broken pipe's exit code
    proc = start_cli("export", "events")
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 141, stderr
    assert "the reader closed the pipe" in summary(stderr) and "Traceback" not in stderr


PTY_RUN = [sys.executable, str(Path(__file__).parents[1] / "support" / "pty_run.py")]
"""A `run_cli` prefix: the command's stdout is a terminal; what that terminal received comes back as hex."""


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json"])
def test_on_a_terminal_nothing_drives_it(filled: Path, run_cli: Callable[..., Any], fmt: str) -> None:
    r = run_cli("export", "jobs", "--format", fmt, "--state", "held", prefix=PTY_RUN)
    assert r.rc == 0, r
    shown = bytes.fromhex(r.stdout.strip()).decode("utf-8")
    assert "hostile" in shown
    text = shown.replace("\r\n", "\n")  # CSV's own line ends
    found = _ACTIVE.search(text)
    assert found is None, f"raw {found.group()!r} reached the terminal: {text[max(found.start() - 40, 0):][:80]!r}"
    if fmt == "csv":
        assert "a\\x1b[31mred\\x1b]8;;http://evil" in text and "\\x9b1m\\u202eend" in text
        assert "control characters shown escaped for the terminal" in summary(r.stderr)
    else:
        rows = jsonl(text) if fmt == "jsonl" else json.loads(text)
        assert next(j for j in rows if j["job_id"] == "hostile")["target"] == HOSTILE  # escaped, not lost


def test_secrets_the_config_names_are_redacted(filled: Path, run_cli: Callable[..., Any]) -> None:
    """A stored value that is (now) a secret the config names never leaves: GEMINI_API_KEY equals a payload."""
    r = run_cli("export", "jobs", "--format", "csv", env={"GEMINI_API_KEY": "beta bucket-d"})
    assert r.rc == 0, r
    assert "beta bucket-d" not in r.stdout and "[redacted:GEMINI_API_KEY]" in r.stdout
    assert "secrets replaced in 1 row(s)" in summary(r.stderr)
    ev = run_cli("export", "events", env={"GEMINI_API_KEY": "timeout after 30 s"})
    assert ev.rc == 0 and "timeout after 30 s" not in ev.stdout and "[redacted:GEMINI_API_KEY]" in ev.stdout
    assert "(those events no longer match their hash)" in summary(ev.stderr)
    # without a readable config no secret can be looked for: the export still runs, and says so
    bare = run_cli("export", "jobs", config=Path("/nonexistent/reclaim.toml"))
    assert bare.rc == 0, bare
    assert "not read, so no secret was looked for" in summary(bare.stderr)
