"""The PostgreSQL backend's pure parts, checked without a server (so `make test-fast` reaches the module too):
its SQL files (PostgreSQL's own placeholders, nothing left to rewrite), the lock key of an operation, and the ledger's own error each database error becomes.
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
from ledger.store import postgres, queries

URL = "postgresql://reclaim:s3cret@db.example/ledger"


def test_its_statements_are_postgresqls_own_and_nothing_rewrites_sqlites() -> None:
    assert not hasattr(postgres, "translate")
    sql = queries.load("postgres")["jobs.find_job"]
    assert sql.count("%s") == 2 and "?" not in sql
    assert postgres.PgConnection.PARAM == "%s" and postgres.PgConnection.LIKE == "ILIKE"


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
    (pgerr.QueryCanceled("canceling statement due to statement timeout"), LedgerUnavailable,
     "RECLAIM_PG_STATEMENT_TIMEOUT"),
    (pgerr.QueryCanceled("canceling statement due to user request"), LedgerUnavailable, "cancelled the statement"),
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
