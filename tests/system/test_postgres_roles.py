"""PostgreSQL separates the ledger's owner from the people and processes that use it.

`reclaim init`, run by the owner, makes the operators' and workers' roles (`DATABASE_operators`,
`DATABASE_workers`). A login role made a member of one can do what the product does (submit, send, query, record a
finding, release, verify) and nothing around it: it cannot insert an event, delete one, disable or drop a trigger,
edit the schema's version, or run `reclaim policy set`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from ledger.db import create_ledger
from ledger.errors import EXIT_REFUSED
from ledger.simulator import Simulator
from ledger.store.postgres import role_names

OP = "article.generate"


def _as(url: str, role: str) -> str:
    """`url` with `role` as its user (no password: the test server trusts its socket)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname or ''}"))


@pytest.fixture
def roles(pg_url: str) -> Iterator[dict[str, str]]:
    """A fresh ledger made by its owner (the server's superuser), and two login roles: one member of the operators'
    role, one of the workers'. Their URLs, by ROLES entry, and the owner's."""
    import psycopg

    assert create_ledger(pg_url) is True
    tag = secrets.token_hex(3)
    made: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as c:
        groups = role_names(c)
        for role, group in groups.items():
            login = f"rc_{role}_{tag}"
            c.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE "{group}"')
            made.append(login)
    try:
        yield {"operators": _as(pg_url, made[0]), "workers": _as(pg_url, made[1]), "owner": pg_url}
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            for login in made:
                c.execute(f'DROP ROLE IF EXISTS "{login}"')


@pytest.mark.parametrize("who", ["operators", "workers"])
def test_neither_role_can_insert_an_event_touch_a_trigger_or_edit_around_the_product(
    roles: dict[str, str], who: str,
) -> None:
    import psycopg

    refused = [
        "INSERT INTO events (at, job_id, operation, seq, actor, kind, detail) VALUES (1, 'x', 'y', 1, 'a', 'reserve', '{}')",
        "DELETE FROM events",
        "ALTER TABLE events DISABLE TRIGGER USER",
        "DROP TRIGGER events_chain ON events",
        "ALTER TABLE events DISABLE TRIGGER events_count",
        "UPDATE job_counts SET n = 0",
        "UPDATE event_tallies SET n = 0",
        "DELETE FROM verify_passes",
        "UPDATE reclaim_meta SET value = '99' WHERE key = 'schema_version'",
        "DELETE FROM jobs",
        "DELETE FROM evidence",
        "CREATE TABLE intruder (x int)",
    ]
    with psycopg.connect(roles[who], autocommit=True) as c:
        for statement in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(statement)
        # What it may do: read the ledger.
        assert c.execute("SELECT count(*) FROM events").fetchone() is not None


def test_the_product_runs_as_the_two_roles_and_only_the_owner_sets_the_policy(
    roles: dict[str, str], sim: Simulator, run_cli: Callable[..., Any], config_path: Path,
) -> None:
    sim.add_fault("status", status=503)
    r = run_cli("submit", OP, "--payload", '{"input": "x"}', "--job-id", "roles-1", "--json", ledger=roles["workers"])
    assert r.rc == 4 and json.loads(r.stdout)["state"] == "held", r
    operators = roles["operators"]
    r = run_cli("query", "roles-1", ledger=operators, operator="alice")
    assert r.rc == 0, r
    r = run_cli("finding", "roles-1", "--category", "not_received", "--note", "absent", ledger=operators,
                operator="alice")
    assert r.rc == 0, r
    r = run_cli("release", "roles-1", "--reason", "alice found nothing", ledger=operators, operator="bob")
    assert r.rc == 0, r
    r = run_cli("tick", "--json", ledger=roles["workers"])
    assert r.rc == 0, r
    assert sim.count("create") == 2
    checked = run_cli("verify", ledger=operators)
    assert checked.rc == 0 and "not recorded" not in checked.stdout, checked  # the operators record its pass
    assert json.loads(run_cli("status", "--json", ledger=operators).stdout)["verified"]["full"]["by"]
    for who in ("operators", "workers"):
        r = run_cli("policy", "set", "--from-config", ledger=roles[who])
        assert r.rc == EXIT_REFUSED and "only the ledger's owner" in r.stderr, r
    r = run_cli("init", ledger=roles["owner"])
    assert r.rc == 0, r
    r = run_cli("policy", "set", "--from-config", ledger=roles["owner"])
    assert r.rc == 0, r
