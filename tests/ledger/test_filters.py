"""Typed filters: an unknown key is refused (naming it and the known keys) everywhere a filter is typed, and
`reason:` and plain words find a job by why it is held or its last error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.errors import BadInput
from ledger.model import FILTER_KEYS, JobFilter
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store
from ledger.worker import RemoteCache, submit_now

NOW = 1_796_115_600.0  # 2026-12-01T09:00:00Z: what a since:/until: span in a filter counts back from

OP = "article.generate"


def _two_holds(sim: Simulator, conn: Any, cfg: Config, clock: ManualClock) -> None:
    """'five' held by a 503 (HTTP 503 UNAVAILABLE), 'reset' by a connection dropped after the request went out."""
    sim.add_fault("status", status=503)
    assert submit_now(conn, cfg, OP, {"input": "a"}, clock=clock, job_id="five", remotes=RemoteCache(cfg)).state == "held"
    sim.add_fault("drop_before_accept")
    assert submit_now(conn, cfg, OP, {"input": "b"}, clock=clock, job_id="reset", remotes=RemoteCache(cfg)).state == "held"


def _ids(conn: Any, text: str) -> list[str]:
    return [j.job_id for j in jobs_store.list_jobs(conn, "held", flt=JobFilter.parse(text, me="bob", now=NOW))]


@pytest.mark.parametrize("text", ["foo:bar", "owner:me Op:x", "https://example.org", "state:held"])
def test_an_unknown_key_is_refused_naming_it_and_the_known_keys(text: str) -> None:
    with pytest.raises(BadInput) as refused:
        JobFilter.parse(text, me="bob", now=NOW)
    message = str(refused.value)
    key = next(t for t in text.split() if ":" in t and t.split(":")[0] not in FILTER_KEYS).split(":")[0]
    assert f"filter key '{key}:': unknown" in message
    for known in FILTER_KEYS:
        assert f"{known}:" in message
    assert "\n" not in message


def test_known_keys_and_words_with_a_colon() -> None:
    flt = JobFilter.parse("owner:me op:article.* target:bucket-* reason:timeout text:a:b words", me="bob", now=NOW)
    assert flt == JobFilter(text="a:b words", owner="bob", operation="article.*", target="bucket-*",
                            reason="timeout")
    assert JobFilter.parse("09:00", now=NOW).text == "09:00"  # not a key: keys start with a letter


def test_reason_and_plain_words_match_why_a_job_is_held(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock,
) -> None:
    _two_holds(sim, conn, cfg, clock)
    assert _ids(conn, "reason:503") == ["five"]
    assert _ids(conn, "reason:reset") == ["reset"]
    assert _ids(conn, "reason:unavailable") == ["five"]  # case does not matter
    assert _ids(conn, "disconnected") == ["reset"]  # a plain word: the last error too
    assert _ids(conn, "reason:outcome") == ["five", "reset"]
    assert _ids(conn, "reason:nothing-like-this") == []


def test_cli_refuses_an_unknown_key_and_filters_by_reason(
    sim: Simulator, conn: Any, cfg: Config, clock: ManualClock, ledger_path: Path, config_path: Path,
    run_cli: Callable[..., Any], fingerprint: Callable[[Path], str],
) -> None:
    _two_holds(sim, conn, cfg, clock)
    before = fingerprint(ledger_path)
    for args in (["jobs", "--filter", "foo:bar"],
                 ["bulk-assign", "--owner", "alice", "--due", "2h", "--reason", "r", "--filter", "foo:bar", "--yes"],
                 ["views", "--save", "mine", "--filter", "foo:bar"]):
        r = run_cli(*args, operator="bob", now=clock.now())
        lines = r.stderr.strip().splitlines()
        assert r.rc == 2 and len(lines) == 1, (args, r)
        assert "filter key 'foo:': unknown" in lines[0] and "reason:" in lines[0]
    assert fingerprint(ledger_path) == before
    r = run_cli("jobs", "held", "--filter", "reason:503", "--json", operator="bob")
    assert r.rc == 0 and [j["job_id"] for j in __import__("json").loads(r.stdout)["jobs"]] == ["five"]
    r = run_cli("bulk-assign", "--owner", "alice", "--due", "2h", "--reason", "the resets are alice's",
                "--filter", "reason:reset", "--json", operator="bob", now=clock.now())
    assert r.rc == 0 and '"matched": 1' in r.stdout, r


def test_a_window_counts_back_from_the_clock_it_is_given() -> None:
    flt = JobFilter.parse("since:1h until:10m", me="bob", now=NOW)
    assert (flt.held_since, flt.held_until) == (NOW - 3600, NOW - 600)
    assert JobFilter.parse("since:2026-12-01T08:00Z", me="bob", now=NOW).held_since == NOW - 3600
