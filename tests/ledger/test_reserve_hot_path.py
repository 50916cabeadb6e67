"""What reserve()'s hot path skips is only what cannot change the answer: a text-only Gemini payload is
one the SDK's request model takes whatever the text, a Job read fast equals one built field by field, and
the Job reserve() builds from what it wrote equals the row read back."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from ledger.errors import PayloadError
from ledger.model import Job
from ledger.remotes import gemini

# Valid Unicode text (no lone surrogates: reserve refuses those before the SDK is asked).
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200)


def sdk_accepts(payload: dict[str, Any]) -> bool:
    """The SDK's own check, the slow way, whatever the payload."""
    body = gemini.create_kwargs(payload, model=gemini._CHECK_MODEL, idem_key="0" * 32, attempt=1)
    try:
        gemini._request_adapter().validate_python({"body": gemini._normalize_create_body(body)})
    except Exception:
        return False
    return True


@settings(max_examples=examples(200), deadline=None)
@given(input_text=text, system=st.none() | text)
def test_a_text_only_payload_is_one_the_sdk_takes(input_text: str, system: str | None) -> None:
    payload: dict[str, Any] = {"input": input_text}
    if system is not None:
        payload["system_instruction"] = system
    assert gemini._text_only(payload)
    assert sdk_accepts(payload)
    gemini.validate_payload(payload)  # the fast path agrees


@pytest.mark.parametrize(
    "payload",
    [
        {"input": ["not", "text"]},
        {"input": "x", "system_instruction": 5},
        {"input": "x", "generation_config": {"temperature": 0.5}},
        {"input": "x", "generation_config": {"temperature": "hot"}},
        {"input": "x", "extra": 1},
        {"input": 5},
    ],
)
def test_anything_else_goes_through_the_sdk(payload: dict[str, Any]) -> None:
    assert not gemini._text_only(payload)
    try:
        gemini.validate_payload(payload)
        ours = True
    except PayloadError:
        ours = False
    assert ours == sdk_accepts(payload)


def test_a_job_read_fast_equals_one_built_field_by_field() -> None:
    from ledger.store.sqlite import MIGRATIONS

    c = sqlite3.connect(":memory:")
    c.row_factory = sqlite3.Row
    c.executescript(MIGRATIONS[0])
    c.execute(
        "INSERT INTO jobs (job_id, operation, idem_key, target, payload, state, quota_day, created_at, updated_at, "
        "result) VALUES ('j', 'op', 'k', 't', ?, 'done', '2026-12-01', 1.5, 2.5, ?)",
        (json.dumps({"input": "x"}), json.dumps({"ok": True})),
    )
    row = c.execute("SELECT * FROM jobs").fetchone()
    fields = {k: row[k] for k in row.keys()}
    slow = Job(**{**fields, "payload": {"input": "x"}, "result": {"ok": True}})
    fast = Job.from_row(row)
    assert fast == slow and fast.to_dict() == slow.to_dict() and hash(fast.key) == hash(slow.key)
    with pytest.raises(dataclasses.FrozenInstanceError):  # still frozen
        fast.state = "held"  # type: ignore[misc]


BACKENDS = ("sqlite", "postgresql")
OP = "article.generate"  # the standard config's operation (conftest.py)


@pytest.mark.parametrize(
    ("payload", "job_id", "target"),
    [
        ({"input": "plain"}, "job-plain", "t-1"),
        ('{"input": "as text", "system_instruction": "é \\u2028 ✓"}', "job-text", None),
        ({"input": [{"type": "text", "text": "blocks"}], "generation_config": {"temperature": 0.5}}, None, "t-2"),
        ({"input": "ünïcödé ✓", "system_instruction": "x"}, "jöb ✓", "tärget"),
    ],
)
def test_the_job_reserve_returns_is_the_row_read_back(
    ledger_path: Any, cfg: Any, clock: Any, payload: Any, job_id: str | None, target: str | None
) -> None:
    """reserve() builds the new Job from what it wrote, not by reading the row back: every field, payload
    included, equals the row a fresh connection reads, on both backends."""
    from ledger.db import connect
    from ledger.reservation import reserve
    from ledger.store.jobs import find_job

    conn = connect(ledger_path)
    res = reserve(conn, cfg, OP, payload, clock=clock, job_id=job_id, target=target)
    conn.close()
    assert res.outcome == "reserved" and res.job is not None
    fresh = connect(ledger_path, readonly=True)
    try:
        stored = find_job(fresh, res.key)
    finally:
        fresh.close()
    assert stored is not None
    assert res.job.to_dict() == stored.to_dict()
    assert res.job == stored
