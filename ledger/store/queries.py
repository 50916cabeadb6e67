"""Each backend's SQL, by name.

The statements a backend runs live in its own folder of `.sql` files, `ledger/store/sql/sqlite/` and
`ledger/store/sql/postgres/`, one file per area of the store (`jobs.sql`, `events.sql`, ...), in the manner of
procrastinate's `queries.sql`. A statement starts at a `-- name: NAME` line (comment lines right after it say what
it does) and runs to the next one; it is run as `conn.run("AREA.NAME", parameters)`, AREA being the file's stem.
Both folders name the same statements (tests/store/test_store_queries.py). Placeholders are the backend's own:
`?` on SQLite, `%s` on PostgreSQL, where a literal `%` is written `%%`. Nothing translates one into the other.

A statement whose shape depends on its input (a page's filter, the columns a step sets) is composed by its store
module from the differences each connection class declares (`PARAM`, `LIKE`), never by branching on the backend.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

BACKENDS = ("sqlite", "postgres")

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")


def parse(text: str, area: str) -> dict[str, str]:
    """The statements of one `.sql` file, by `AREA.NAME`: each one's text without the comments that open it and
    without its closing `;`. Raises ValueError for text before the first name, a statement without text, or a
    name given twice."""
    out: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if not sql:
            raise ValueError(f"{area}.sql: the statement {name} has no text")
        key = f"{area}.{name}"
        if key in out:
            raise ValueError(f"{area}.sql: the name {name} is given twice")
        out[key] = sql

    for line in text.splitlines():
        m = _NAME.match(line.strip())
        if m:
            close()
            name, lines = m.group(1), []
        elif name is None:
            if line.strip() and not line.strip().startswith("--"):
                raise ValueError(f"{area}.sql: SQL before the first '-- name:' line: {line.strip()[:60]}")
        elif lines or not line.strip().startswith("--"):
            lines.append(line)
    close()
    return out


@functools.cache
def load(backend: str) -> Mapping[str, str]:
    """Every statement of `backend` ("sqlite" or "postgres"), by `AREA.NAME`, read once per process. Raises
    ValueError for a backend that is not one, or a file `parse` refuses."""
    if backend not in BACKENDS:
        raise ValueError(f"no such backend: {backend!r}")
    folder = resources.files("ledger.store").joinpath("sql", backend)
    out: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            out.update(parse(entry.read_text(encoding="utf-8"), entry.name[: -len(".sql")]))
    return MappingProxyType(out)
