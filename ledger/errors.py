"""Errors the ledger raises for bad input or an unusable ledger.

The database's own errors never leave `ledger.store`: each backend maps them into these (locked, corrupt,
unavailable, unusable, conflict), so the rules and the console handle one small tree whatever the backend.

Expected outcomes (duplicate, quota exceeded, blocked by a hold) are typed results, not exceptions.
Each error carries the process exit code the CLI uses, so every refusal has a distinct, documented code.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_QUOTA_EXCEEDED = 3
EXIT_HELD = 4
EXIT_BLOCKED_BY_HOLD = 5
EXIT_REFUSED = 6
EXIT_LEDGER_UNUSABLE = 7
EXIT_LEDGER_LOCKED = 8
EXIT_RESERVED_NOT_SENT = 9  # reserved (committed), but this process did not send it: a worker will
EXIT_SEND_TAKEN_OVER = 10  # this process's send was fenced: another worker or a person moved the job on
EXIT_VERIFY_FAILED = 11  # `reclaim verify` found a break in the audit chain, a job its events disagree with, or damage
EXIT_NOT_YET = 12  # a decision refused for now: the held job's last request could still arrive; try after the time given
EXIT_PROBE_FAILED = 13  # `reclaim remotes probe`: an assumption this config relies on does not hold (or could not be seen)
EXIT_UNDECIDED_CANDIDATES = 14  # a release refused: orphan deliveries could be the held job's own; reconcile or dismiss each


class LedgerError(Exception):
    """Base class: a one-line message naming the thing and what to do."""

    exit_code = EXIT_BAD_INPUT


class BadInput(LedgerError):
    """An argument, payload or operator name that cannot be accepted."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(BadInput):
    """The configuration file is missing, unreadable or invalid; the message names the key."""


class UnknownOperation(BadInput):
    """The operation is not declared in the configuration."""


class PayloadError(BadInput):
    """The payload is not valid JSON or not the shape the operation's remote expects."""


class JobNotFound(BadInput):
    """No job with that (job_id, operation) exists in the ledger."""


class LedgerUnusable(LedgerError):
    """The ledger file cannot be used: missing, not SQLite, not a ledger, too new, read-only."""

    exit_code = EXIT_LEDGER_UNUSABLE


class LedgerUnavailable(LedgerUnusable):
    """The ledger's server cannot be reached or dropped the connection (a restart, a killed backend).

    The same exit code as LedgerUnusable for a one-shot command; a looping worker waits and tries again.
    """


class LedgerCorrupt(LedgerUnusable):
    """SQLite found damaged pages or schema in the ledger file: restore it from a backup."""

    def __init__(self, message: str, damage: str = "") -> None:
        super().__init__(message)
        self.damage = damage  # SQLite's own words


class LedgerLocked(LedgerError):
    """Another process held the write lock longer than the busy timeout."""

    exit_code = EXIT_LEDGER_LOCKED


class LedgerConflict(LedgerError):
    """The ledger's own rules refused a write: a constraint or a trigger (events are append-only, the audit chain
    must chain, a key is unique). The transaction was rolled back; running it again gives the same refusal."""

    exit_code = EXIT_LEDGER_UNUSABLE


class SerializationFailure(LedgerLocked):
    """PostgreSQL rolled a transaction back for a serialization failure or a deadlock: it may be run again
    (`ledger.store.retrying` does, a few times); past that it is a lock held too long (exit 8)."""


class ReservedNotSent(LedgerError):
    """The job is reserved and committed, but this process could not send it; a worker pass will."""

    exit_code = EXIT_RESERVED_NOT_SENT


class Refused(LedgerError):
    """An operator action refused by role, policy or the job's state; nothing was written."""

    exit_code = EXIT_REFUSED

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotYet(Refused):
    """A decision refused for now, allowed from `until` (epoch seconds): the held job's last request could still
    reach the remote until then. Nothing was written; the same command succeeds once the time has passed."""

    exit_code = EXIT_NOT_YET

    def __init__(self, reason: str, until: float) -> None:
        super().__init__(reason)
        self.until = until


class UndecidedCandidates(Refused):
    """A release refused while orphan deliveries that could be the held job's own are undecided (ledger.candidates):
    each must be reconciled from or dismissed first. Nothing was written. `evidence_ids` names them."""

    exit_code = EXIT_UNDECIDED_CANDIDATES

    def __init__(self, reason: str, evidence_ids: tuple[int, ...]) -> None:
        super().__init__(reason)
        self.evidence_ids = evidence_ids


class RowDisagrees(LedgerError):
    """A job's row says something its own events do not: it was changed outside reclaim. Nothing is sent."""

    exit_code = EXIT_VERIFY_FAILED
