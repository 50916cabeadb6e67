"""The command line's parser: what `:` accepts, and how `:job` reads an id that holds spaces."""

from __future__ import annotations

import pytest

from console.commands import Command, CommandError, job_candidates, parse_command

OPS = ("article.generate", "summary.generate")


def test_parse_known_commands() -> None:
    assert parse_command(":held") == Command("held")
    assert parse_command("  held ") == Command("held")
    assert parse_command(":job article today #07") == Command("job", "article today #07")
    assert parse_command(":VIEW mine") == Command("view", "mine")
    assert parse_command(":view") == Command("view")
    assert parse_command(":owner me") == Command("owner", "me")


@pytest.mark.parametrize(("line", "said"), [
    (":", "type a command after ':'"),
    (":frobnicate", "unknown command ':frobnicate'"),
    (":job", "':job' needs a job id"),
    (":owner", "':owner' needs one name"),
    (":owner a b", "':owner' needs one name"),
    (":held owner:me", "':held' takes nothing after it"),
])
def test_parse_refuses_with_one_line(line: str, said: str) -> None:
    with pytest.raises(CommandError, match=said) as refused:
        parse_command(line)
    assert "\n" not in str(refused.value)


def test_job_candidates_read_the_whole_text_first() -> None:
    assert job_candidates("article today #07", OPS) == [("article today #07", None)]
    assert job_candidates("shared 2026-12-01 summary.generate", OPS) == [
        ("shared 2026-12-01 summary.generate", None), ("shared 2026-12-01", "summary.generate")]
    assert job_candidates('"a b" article.generate', OPS) == [("a b", "article.generate")]
    assert job_candidates("'a b'", OPS) == [("a b", None)]
    assert job_candidates("plain", OPS) == [("plain", None)]


def test_tab_completes_the_common_beginning_then_cycles_through_the_matches() -> None:
    from console.commands import common_prefix, completion

    ids = ["summary d-03", "summary d-06", "old summary"]
    assert common_prefix(["summary d-03", "summary d-06"]) == "summary d-0" and common_prefix([]) == ""
    assert completion("summ", ids) == "summary d-0"
    assert completion("summary d-0", ids) == "summary d-03"
    assert completion("summary d-03", ids) == "summary d-06"
    assert completion("summary d-06", ids) == "old summary"
    assert completion("old summary", ids) == "summary d-03"
    assert completion("d-0", ids) == "summary d-03"  # held, not at the beginning: the first match
    assert completion("nothing", []) == "nothing"
