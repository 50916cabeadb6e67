"""The PostgreSQL backend's pure parts, checked without a server (so `make test-fast` reaches the module too):
how the rules' SQL is translated, the lock key of an operation, and the ledger's own error each database error becomes.
The backend against a real server is checked by every BACKENDS module's postgresql run and tests/system/."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerr

from ledger.errors import (
    BadInput,
    LedgerConflict,
    LedgerLocked,
    LedgerUnavailable,
    LedgerUnusable,
    SerializationFailure,
)
from ledger.store import postgres

URL = "postgresql://reclaim:s3cret@db.example/ledger"


@pytest.mark.parametrize(("sqlite_sql", "pg_sql"), [
    ("SELECT * FROM jobs WHERE job_id = ? AND operation = ?",
     "SELECT * FROM jobs WHERE job_id = %s AND operation = %s"),
    ("SELECT * FROM jobs WHERE owner LIKE ?", "SELECT * FROM jobs WHERE owner ILIKE %s"),
    ("SELECT * FROM jobs WHERE reason like '%?%'", "SELECT * FROM jobs WHERE reason ILIKE '%%?%%'"),
    ("SELECT 'it''s ? LIKE' AS x, \"LIKE\" FROM t WHERE a % 2 = ?",
     "SELECT 'it''s ? LIKE' AS x, \"LIKE\" FROM t WHERE a %% 2 = %s"),
    ("SELECT likes FROM t", "SELECT likes FROM t"),
])
def test_the_rules_sql_is_translated_outside_quoted_strings_and_names(sqlite_sql: str, pg_sql: str) -> None:
    assert postgres.translate(sqlite_sql) == pg_sql


def test_an_operation_lock_is_stable_distinct_and_never_the_chain_or_migration_lock() -> None:
    keys = {op: postgres.operation_lock(op) for op in ("article.generate", "bucket.cleanup", "notify.page")}
    assert keys["article.generate"] == postgres.operation_lock("article.generate")
    assert len(set(keys.values())) == len(keys)
    for key in keys.values():
        assert key >> 32 == 0x52434C4D and 0 <= key < 2**63  # an advisory lock key is a signed 64-bit integer
        assert key not in (postgres.CHAIN_LOCK, postgres.MIGRATE_LOCK)


@pytest.mark.parametrize(("error", "becomes", "says"), [
    (pgerr.LockNotAvailable("lock timeout"), LedgerLocked, "locked by another transaction"),
    (pgerr.QueryCanceled("canceling statement due to lock timeout"), LedgerLocked, "retry later"),
    (pgerr.UniqueViolation("duplicate key value violates unique constraint\nDETAIL: x"), LedgerConflict,
     "duplicate key value violates unique constraint"),
    (pgerr.NumericValueOutOfRange("bigint out of range"), BadInput, "64-bit integers"),
    (pgerr.SerializationFailure("could not serialize access"), SerializationFailure, "could not serialize"),
    (pgerr.DeadlockDetected("deadlock detected"), SerializationFailure, "deadlock detected"),
    (pgerr.InsufficientPrivilege("permission denied for table jobs"), LedgerUnusable, "permission denied"),
    (pgerr.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), LedgerUnusable, "read-only"),
    (pgerr.AdminShutdown("terminating connection due to administrator command"), LedgerUnavailable,
     "the server refused or dropped the connection"),
    (pgerr.UndefinedTable('relation "jobz" does not exist'), LedgerUnusable, "jobz"),
])
def test_each_database_error_becomes_the_ledgers_own_without_the_password(
    error: psycopg.Error, becomes: type[Exception], says: str,
) -> None:
    mapped = postgres._as_ledger_error(error, URL)
    assert type(mapped) is becomes
    assert says in str(mapped)
    assert "s3cret" not in str(mapped)
    assert "\n" not in str(mapped)
