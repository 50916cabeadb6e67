"""The README and docs/ as a newcomer meets them: every link resolves, every `reclaim` command shown exists.

A relative link (to a file, a picture, or a heading anchor in another document) must name something that
is there. Every `reclaim ...` line in a shell block, and every inline `reclaim ...` span, must name a real command (or command group and
command), and every `--option` it uses must be one that command takes (read from its own `--help`, run
in-process through typer's runner). The quick start itself is run literally by test_readme_and_demo.py.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from console.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SHELL_BLOCK = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.S)
INLINE = re.compile(r"(?<!`)`(reclaim [^`\n]+)`(?!`)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), re.M)}


def _links() -> list[tuple[Path, str]]:
    return [(doc, m.group(1)) for doc in DOCS for m in LINK.finditer(doc.read_text(encoding="utf-8"))
            if not re.match(r"[a-z]+://|mailto:", m.group(1))]


@pytest.mark.parametrize(("doc", "link"), _links(), ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_every_relative_link_resolves(doc: Path, link: str) -> None:
    target, _, anchor = link.partition("#")
    path = (doc.parent / target).resolve() if target else doc
    assert path.exists(), f"{doc.relative_to(ROOT)} links to {link}, which is not there"
    if anchor and path.suffix == ".md":
        assert anchor in _anchors(path), f"{doc.relative_to(ROOT)} links to #{anchor}, no such heading in {path.name}"


def _commands() -> list[tuple[Path, str]]:
    found = []
    for doc in DOCS:
        for block in SHELL_BLOCK.findall(doc.read_text(encoding="utf-8")):
            for line in block.splitlines():
                line = line.split(" #", 1)[0].strip().rstrip("&").strip()
                words = line.split()
                if words[:1] == ["sudo"]:
                    words = words[words.index("reclaim"):] if "reclaim" in words else []
                if words and Path(words[0]).name == "reclaim":
                    found.append((doc, " ".join(words)))
        found += [(doc, m.group(1)) for m in INLINE.finditer(doc.read_text(encoding="utf-8"))]
    return found


@cache
def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "300", "NO_COLOR": "1"})
    assert result.exit_code == 0, f"reclaim {' '.join(path)} --help: {result.output}"
    return result.output


def test_the_documents_show_some_commands() -> None:
    assert len(_commands()) >= 80


@pytest.mark.parametrize(("doc", "line"), _commands(), ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_every_command_shown_is_real_and_takes_the_options_it_is_shown_with(doc: Path, line: str) -> None:
    words = shlex.split(line)[1:]
    path: list[str] = []
    top = _help(())
    if words and not words[0].startswith("-"):
        assert re.search(rf"^\s*│?\s*{re.escape(words[0])}\b", top, re.M), \
            f"{doc.relative_to(ROOT)}: `{line}`: reclaim has no command {words[0]!r}"
        path.append(words[0])
        sub = _help(tuple(path))
        if len(words) > 1 and re.search(r"Commands", sub) and re.search(rf"^\s*│?\s*{re.escape(words[1])}\b", sub, re.M):
            path.append(words[1])
    text = _help(tuple(path))
    for word in words:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            assert option in text, f"{doc.relative_to(ROOT)}: `{line}`: reclaim {' '.join(path)} has no {option}"
