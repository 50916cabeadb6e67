"""`reclaim submit --payload @FILE` and `--payload -`: a large payload read from a file or stdin reaches the
ledger intact, through the same checks as a payload given on the command line (the refusals, with their exit
code and message, are in test_bad_input.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.simulator import Simulator

OP = "article.generate"
ROOMY = {"min_send_rate": 10_000_000}
"""A policy whose size rule (send_margin_seconds 2 s * min_send_rate) lets a payload of up to 20 MB through."""


def big_payload(min_bytes: int) -> dict[str, Any]:
    """A gemini payload of at least `min_bytes` as UTF-8 JSON, of many distinct lines and multi-byte characters."""
    lines: list[str] = []
    size = 0
    while size < min_bytes:
        line = f"line {len(lines)}: tides é 🌊 \"quoted\" \\ tab\t\n"
        lines.append(line)
        size += len(line.encode("utf-8")) + 4  # and more once escaped as JSON
    return {"input": "".join(lines), "generation_config": {"seed": 7}}


def test_a_3_mb_payload_file_is_reserved_intact(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], read_job: Callable[..., Any], tmp_path: Path,
) -> None:
    write_config(make_config(policy=ROOMY))
    payload = big_payload(3_000_000)
    file = tmp_path / "payload.json"
    file.write_text(json.dumps(payload, ensure_ascii=False, indent=2), encoding="utf-8")
    assert file.stat().st_size > 3_000_000

    r = run_cli("submit", OP, "--payload", f"@{file}", "--job-id", "big-1")
    assert r.rc == 0, r
    assert "Traceback" not in r.stderr
    job = read_job(ledger_path, "big-1")  # a fresh connection
    assert job is not None and job.payload == payload
    assert sim.count("create", job.idem_key) == 1


def test_a_payload_on_stdin_is_reserved_intact(
    sim: Simulator, ledger_path: Path, make_config: Callable[..., dict[str, Any]], write_config: Callable[..., Path],
    run_cli: Callable[..., Any], read_job: Callable[..., Any],
) -> None:
    write_config(make_config(policy=ROOMY))
    payload = big_payload(3_000_000)
    r = run_cli("submit", OP, "--payload", "-", "--job-id", "piped-1", "--json", stdin=json.dumps(payload))
    assert r.rc == 0, r
    assert json.loads(r.stdout)["outcome"] == "reserved"
    job = read_job(ledger_path, "piped-1")
    assert job is not None and job.payload == payload
    assert sim.count("create", job.idem_key) == 1


def test_a_small_payload_file_is_the_same_job_as_the_same_payload_typed(
    sim: Simulator, ledger_path: Path, config_path: Path, run_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    # A relative @FILE is from the current folder (the CLI runs in tmp_path). No --job-id: the id is the hash of
    # the spec, so the file's text (spaces, newlines) must not matter: the same payload typed is a duplicate.
    (tmp_path / "p.json").write_text('\n  {"input" :  "hello"}\n\n', encoding="utf-8")
    first = run_cli("submit", OP, "--payload", "@p.json", "--json")
    assert first.rc == 0, first
    again = run_cli("submit", OP, "--payload", '{"input": "hello"}', "--json")
    assert again.rc == 0, again
    assert json.loads(again.stdout)["outcome"] == "duplicate"
    assert json.loads(again.stdout)["job_id"] == json.loads(first.stdout)["job_id"]
    assert sim.count("create") == 1
