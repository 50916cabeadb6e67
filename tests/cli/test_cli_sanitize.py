"""The CLI prints untrusted text through the console's one sanitiser: markup literal, controls escaped, no links.

A job whose id, target, payload, error, remote snapshot, finding note, owner and evidence handle carry
Rich markup, an OSC 8 hyperlink, CSI and C1 sequences and a bidi override is written into a real
SQLite ledger; then real `reclaim` subprocesses print it every way they can. Nothing a terminal acts
on may reach stdout or stderr, the markup must be shown as typed, and `--json` must stay valid JSON
that decodes to the exact value, with C1 and bidi controls written as `\\uXXXX` escapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.sanitize import clean, json_text
from ledger import triage
from ledger.clock import ManualClock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.leases import claim_for_send
from ledger.model import JobKey
from ledger.remotes.base import RemoteStatus, SendOutcome
from ledger.reservation import reserve
from ledger.worker import record_send_outcome

OP = "article.generate"
MARKUP = "[bold red]x[/]"
LINK = "[link=http://evil]y[/link]"
OSC8 = "\x1b]8;;http://evil\x1b\\z\x1b]8;;\x1b\\"
CSI = "\x1b[31m"
C1 = "\x9b31m"
BIDI = "\u202e"
HOSTILE = f"{MARKUP} {LINK} {OSC8} {CSI} {C1} {BIDI}end"
# What a terminal would act on: ESC (so CSI, OSC 8, OSC 52), any other C0 but newline, DEL, C1, bidi controls.
_ACTIVE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def assert_inert(text: str, what: str) -> None:
    """Nothing in `text` makes a terminal style, link, move or reorder anything."""
    found = _ACTIVE.search(text)
    assert found is None, f"{what}: raw {found.group()!r} at {found.start()}: {text[max(found.start() - 40, 0):][:80]!r}"
    assert "\x1b]8;;" not in text and "\x9d8;;" not in text, f"{what}: an OSC 8 hyperlink survived"


def assert_literal(text: str, what: str) -> None:
    """The markup is shown as typed, and the controls as visible escapes."""
    for literal in (MARKUP, LINK, "\\x1b[31m", "\\x9b31m", "\\u202eend", "\\x1b]8;;http://evil"):
        assert literal in text, f"{what}: {literal!r} is not shown literally"


@pytest.fixture
def hostile(config_dict: dict[str, Any], tmp_path: Path, ledger_path: Path, write_config: Callable[..., Path],
            clock: ManualClock) -> JobKey:
    """A held job carrying HOSTILE everywhere text can go, with a notification queued for it."""
    config_dict["notify"] = {"oncall": {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["held"]}}
    write_config(config_dict)
    cfg: Config = parse_config(config_dict, base_dir=tmp_path)
    conn = connect(ledger_path)
    try:
        res = reserve(conn, cfg, OP, {"input": HOSTILE}, clock=clock, job_id=HOSTILE, target=HOSTILE)
        claim = claim_for_send(conn, cfg, res.key, owner="worker-1", now=clock.now())
        assert claim is not None
        applied = record_send_outcome(conn, cfg, claim, SendOutcome("unknown", error=HOSTILE, reason=HOSTILE),
                                      now=clock.now())
        assert applied.ok and applied.job is not None and applied.job.state == "held"
        triage.record_query(conn, cfg, res.key, RemoteStatus("running", error=HOSTILE, handle=HOSTILE,
                                                             snapshot={"reply": HOSTILE, HOSTILE: 1}),
                            actor="bob", clock=clock)
        triage.record_finding(conn, cfg, res.key, "cannot_determine", HOSTILE, actor="bob", clock=clock)
        triage.assign(conn, cfg, res.key, HOSTILE, clock.now() + 3600, actor="bob", clock=clock, reason=HOSTILE)
    finally:
        conn.close()
    return res.key


def test_json_text_escapes_c1_and_bidi_and_round_trips() -> None:
    value = {HOSTILE: [HOSTILE, "\x7f", "\u2028", "\\\u202e", "\u2066\u2069\ufeff", "مرحبا 👩‍👩‍👧", 1.5, None]}
    text = json_text(value)
    assert_inert(text, "json_text")
    assert "\\u009b31m" in text and "\\u202e" in text and "\\u001b[31m" in text and "مرحبا 👩‍👩‍👧" in text
    assert json.loads(text) == value
    assert "\n" not in text


def test_clean_shows_markup_literally_and_controls_escaped() -> None:
    shown = clean(HOSTILE)
    assert_inert(shown, "clean")
    assert_literal(shown, "clean")


def test_every_cli_view_prints_hostile_text_inert_and_literal(hostile: JobKey, run_cli: Callable[..., Any]) -> None:
    views: dict[str, tuple[str, ...]] = {
        "show": ("show", HOSTILE),
        "jobs": ("jobs", "held"),
        "events": ("events", "--limit", "50"),
        "evidence": ("evidence", HOSTILE),
        "notifications": ("notifications",),
        "status": ("status",),
        "verify": ("verify",),
        "quota": ("quota",),
    }
    outputs: dict[str, str] = {}
    for name, args in views.items():
        out = run_cli(*args)
        assert out.rc == 0, f"{name}: rc {out.rc}: {out.stderr}"
        assert_inert(out.stdout + out.stderr, name)
        outputs[name] = out.stdout
    assert_literal(outputs["show"].split("\n", 1)[0], "show's title")
    for name in ("show", "events"):
        assert_literal(outputs[name], name)
    for name in ("jobs", "evidence", "notifications"):
        assert MARKUP in outputs[name] and LINK in outputs[name], f"{name}: markup not shown literally"
    assert "audit chain" in outputs["status"] and "ok:" in outputs["verify"]


def test_errors_naming_hostile_text_are_inert(hostile: JobKey, run_cli: Callable[..., Any]) -> None:
    missing = run_cli("show", HOSTILE + " (gone)")
    refused = run_cli("release", HOSTILE, "--operation", OP, "--reason", HOSTILE, operator="alice")
    unknown = run_cli("jobs", HOSTILE)
    for name, out in (("show missing", missing), ("release refused", refused), ("jobs unknown group", unknown)):
        assert out.rc != 0 and out.stderr.startswith("reclaim: error:"), f"{name}: {out}"
        assert_inert(out.stdout + out.stderr, name)
        assert MARKUP in out.stderr, f"{name}: the id is not named literally: {out.stderr!r}"
    as_json = run_cli("show", HOSTILE + " (gone)", "--json")
    assert_inert(as_json.stdout + as_json.stderr, "show missing --json")
    assert HOSTILE[:10] in json.loads(as_json.stdout)["error"]


def test_json_output_is_valid_escaped_and_round_trips(hostile: JobKey, run_cli: Callable[..., Any]) -> None:
    show = run_cli("show", HOSTILE, "--json")
    assert show.rc == 0, show.stderr
    assert_inert(show.stdout, "show --json")
    assert "\\u009b31m" in show.stdout and "\\u202eend" in show.stdout
    doc = json.loads(show.stdout)
    job = doc["job"]
    assert job["job_id"] == HOSTILE and job["target"] == HOSTILE and job["owner"] == HOSTILE
    assert job["payload"] == {"input": HOSTILE}
    assert HOSTILE in job["held_reason"] and job["last_error"] == HOSTILE
    query = next(e for e in doc["events"] if e["kind"] == "remote_query")
    assert query["detail"]["snapshot"] == {"reply": HOSTILE, HOSTILE: 1} and query["detail"]["handle"] == HOSTILE
    assert next(e for e in doc["events"] if e["kind"] == "finding")["detail"]["note"] == HOSTILE
    assert [e["handle"] for e in doc["evidence"]] == [HOSTILE]

    for args in (("jobs", "held", "--json"), ("events", "--json"), ("evidence", HOSTILE, "--json"),
                 ("notifications", "--json"), ("status", "--json")):
        out = run_cli(*args)
        assert out.rc == 0, f"{args}: {out.stderr}"
        assert_inert(out.stdout + out.stderr, " ".join(args))
        docs = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        assert docs, f"{args}: no JSON printed"
    events = [json.loads(line) for line in run_cli("events", "--json").stdout.splitlines()]
    assert {e["job_id"] for e in events} == {HOSTILE}
    listed = json.loads(run_cli("jobs", "held", "--json").stdout)["jobs"]
    assert [(j["job_id"], j["target"]) for j in listed] == [(HOSTILE, HOSTILE)]


def test_a_submit_through_the_simulator_prints_its_hostile_job_inertly(
    config_path: Path, ledger_path: Path, run_cli: Callable[..., Any]
) -> None:
    job_id = f"{MARKUP} {LINK}"
    out = run_cli("submit", OP, "--payload", json.dumps({"input": HOSTILE}), "--job-id", job_id, "--target", HOSTILE)
    assert out.rc == 0, out.stderr
    assert_inert(out.stdout + out.stderr, "submit")
    assert job_id in out.stdout and "-> submitted" in out.stdout
    tick = run_cli("tick")
    assert tick.rc == 0, tick.stderr
    show = run_cli("show", job_id)
    assert show.rc == 0, show.stderr
    assert_inert(show.stdout + show.stderr, "show after tick")
    assert show.stdout.startswith(f"job {job_id} / {OP}") and "consumed" in show.stdout
    doc = json.loads(run_cli("show", job_id, "--json").stdout)
    assert doc["job"]["target"] == HOSTILE and doc["job"]["payload"] == {"input": HOSTILE}


TWINS = {"a\nb": "a\\x0ab", "a\tb": "a\\x09b", "a b": "a b"}
"""Job ids that differ only in a newline, a tab or a space, and how each prints: never alike."""


def _first_cells(table: str) -> set[str]:
    """The first cell of every body row of a Rich table as printed."""
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    return {r for r in rows if r and r != "job"}


@pytest.fixture
def twins(config_dict: dict[str, Any], tmp_path: Path, ledger_path: Path, clock: ManualClock) -> list[JobKey]:
    """The TWINS held, each for a reason written on two lines."""
    cfg: Config = parse_config(config_dict, base_dir=tmp_path)
    conn = connect(ledger_path)
    keys = []
    try:
        for job_id in TWINS:
            res = reserve(conn, cfg, OP, {"input": job_id}, clock=clock, job_id=job_id)
            claim = claim_for_send(conn, cfg, res.key, owner="worker-1", now=clock.now())
            assert claim is not None
            held = record_send_outcome(conn, cfg, claim, SendOutcome("unknown", error="no reply",
                                                                     reason="first line\nsecond line"), now=clock.now())
            assert held.ok and held.job is not None and held.job.state == "held"
            keys.append(res.key)
    finally:
        conn.close()
    return keys


def test_ids_that_differ_only_in_a_newline_or_tab_print_differently(
    twins: list[JobKey], config_path: Path, run_cli: Callable[..., Any],
) -> None:
    listed = run_cli("jobs", "held")
    assert listed.rc == 0, listed.stderr
    assert_inert(listed.stdout, "jobs held")
    assert _first_cells(listed.stdout) == set(TWINS.values())
    assert "first line second line" in listed.stdout  # a reason is free text: its newline is a space

    events = run_cli("events", "--limit", "50")
    assert events.rc == 0, events.stderr
    for shown in TWINS.values():
        assert f"{shown} / {OP}" in events.stdout

    titles, errors = set(), set()
    for job_id, shown in TWINS.items():
        show = run_cli("show", job_id)
        assert show.rc == 0, show.stderr
        assert_inert(show.stdout, f"show {job_id!r}")
        titles.add(show.stdout.splitlines()[0])
        assert show.stdout.startswith(f"job {shown} / {OP}")
        assert "first line\\x0asecond line" in show.stdout  # every field whole, as stored

        missing = run_cli("show", f"{job_id}!")
        assert missing.rc != 0 and len(missing.stderr.strip().splitlines()) == 1
        assert_inert(missing.stderr, f"show {job_id!r}!")
        errors.add(missing.stderr)
    assert len(titles) == len(errors) == len(TWINS)


def test_a_submitted_id_with_a_newline_prints_apart_from_its_twin_with_a_space(
    config_path: Path, ledger_path: Path, run_cli: Callable[..., Any]
) -> None:
    said = {}
    for job_id in ("a\nb", "a b"):
        out = run_cli("submit", OP, "--payload", json.dumps({"input": job_id}), "--job-id", job_id)
        assert out.rc == 0, out.stderr
        assert_inert(out.stdout + out.stderr, "submit")
        said[job_id] = out.stdout
    assert "a\\x0ab" in said["a\nb"] and "a\\x0ab" not in said["a b"] and "a b" in said["a b"]
    assert said["a\nb"] != said["a b"]
    listed = run_cli("jobs", "submitted")
    assert listed.rc == 0, listed.stderr
    assert _first_cells(listed.stdout) == {"a\\x0ab", "a b"}
