"""reclaim's ledger: reserve before sending, hold what is unknown, and record every change.

This package is the ledger's public surface: `Ledger` (an open ledger: its jobs, the live view, triage,
sending, the report; `ledger.service`), the model's types, the errors and exit codes, and the functions a
command needs beside an open ledger (the config, the clock, creating a ledger, the audit key, the metrics
server, a job's own steps for scripts). The console (and any other caller) imports from `ledger` itself, never
from its modules (an import-linter contract in pyproject.toml holds the console to it; the bundled simulator,
`ledger.simulator`, is a separate tool). Names load on first use (PEP 562), so a command that only reads does
not import every module and starts fast: `import ledger` loads this module alone. Each public name stands in
`_EXPORTS`, the `TYPE_CHECKING` imports and `__all__`; tests/ledger/test_public_surface.py holds the three to
the same names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, tuple[str, str]] = {
    # ledger.actions
    "ACTION_TABLE": ("ledger.actions", "ACTIONS"), "ActionField": ("ledger.actions", "Field"),
    "get_action": ("ledger.actions", "action"), "JOB_ACTIONS": ("ledger.actions", "JOB_ACTIONS"),
    # ledger.batch
    "BATCH_ACTIONS": ("ledger.batch", "BATCH_ACTIONS"), "BatchPlan": ("ledger.batch", "BatchPlan"),
    "BatchResult": ("ledger.batch", "BatchResult"), "MAX_BATCH": ("ledger.batch", "MAX_BATCH"),
    # ledger.candidates
    "Candidate": ("ledger.candidates", "Candidate"),
    "candidate_choices": ("ledger.candidates", "decide_words"),
    # ledger.clock
    "Clock": ("ledger.clock", "Clock"), "day_of": ("ledger.clock", "day_of"), "INVALID": ("ledger.clock", "INVALID"),
    "clock_time": ("ledger.clock", "clock_time"),
    "iso": ("ledger.clock", "iso"), "ManualClock": ("ledger.clock", "ManualClock"),
    "parse_due": ("ledger.clock", "parse_due"), "parse_time": ("ledger.clock", "parse_time"),
    "parse_when": ("ledger.clock", "parse_when"), "process_clock": ("ledger.clock", "process_clock"),
    "span": ("ledger.clock", "span"), "SystemClock": ("ledger.clock", "SystemClock"),
    "valid_time": ("ledger.clock", "valid_time"),
    # ledger.config
    "Config": ("ledger.config", "Config"), "load_config": ("ledger.config", "load_config"),
    "parse_config": ("ledger.config", "parse_config"), "Policy": ("ledger.config", "Policy"),
    # ledger.db
    "close_quietly": ("ledger.db", "close_quietly"), "connect": ("ledger.db", "connect"),
    "Connection": ("ledger.db", "Connection"), "create_ledger": ("ledger.db", "create_ledger"),
    "write_tx": ("ledger.db", "write_tx"),
    # ledger.errors
    "BadInput": ("ledger.errors", "BadInput"), "ConfigError": ("ledger.errors", "ConfigError"),
    "EXIT_BLOCKED_BY_HOLD": ("ledger.errors", "EXIT_BLOCKED_BY_HOLD"), "EXIT_HELD": ("ledger.errors", "EXIT_HELD"),
    "EXIT_QUOTA_EXCEEDED": ("ledger.errors", "EXIT_QUOTA_EXCEEDED"),
    "EXIT_NOT_YET": ("ledger.errors", "EXIT_NOT_YET"), "EXIT_REFUSED": ("ledger.errors", "EXIT_REFUSED"),
    "EXIT_PROBE_FAILED": ("ledger.errors", "EXIT_PROBE_FAILED"),
    "EXIT_UNDECIDED_CANDIDATES": ("ledger.errors", "EXIT_UNDECIDED_CANDIDATES"),
    "EXIT_RESERVED_NOT_SENT": ("ledger.errors", "EXIT_RESERVED_NOT_SENT"),
    "EXIT_SEND_TAKEN_OVER": ("ledger.errors", "EXIT_SEND_TAKEN_OVER"),
    "EXIT_VERIFY_FAILED": ("ledger.errors", "EXIT_VERIFY_FAILED"), "JobNotFound": ("ledger.errors", "JobNotFound"),
    "LedgerCorrupt": ("ledger.errors", "LedgerCorrupt"), "LedgerError": ("ledger.errors", "LedgerError"),
    "LedgerLocked": ("ledger.errors", "LedgerLocked"), "LedgerUnusable": ("ledger.errors", "LedgerUnusable"),
    "NotYet": ("ledger.errors", "NotYet"), "UndecidedCandidates": ("ledger.errors", "UndecidedCandidates"),
    "PayloadError": ("ledger.errors", "PayloadError"), "Refused": ("ledger.errors", "Refused"),
    "UnknownOperation": ("ledger.errors", "UnknownOperation"),
    # ledger.export
    "check_export_filter": ("ledger.export", "check_filter"), "export_redacted": ("ledger.export", "redacted"),
    "EXPORT_TABLES": ("ledger.export", "TABLES"),
    "parse_export_states": ("ledger.export", "parse_states"),
    # ledger.files
    "fsync_dir": ("ledger.files", "fsync_dir"), "place_new": ("ledger.files", "place_new"),
    # ledger.follow
    "EventCursor": ("ledger.follow", "EventCursor"),
    # ledger.policy and ledger.seal
    "POLICY_SETTINGS": ("ledger.policy", "SETTINGS"),
    "read_policy": ("ledger.policy", "read"),
    "apply_policy": ("ledger.policy", "apply_to"),
    "policy_owner": ("ledger.policy", "owner"),
    "record_policy": ("ledger.policy", "record"),
    "require_policy_owner": ("ledger.policy", "require_owner"),
    "create_audit_key": ("ledger.seal", "create_key"),
    "current_audit_key": ("ledger.seal", "current_key"),
    "audit_key_path": ("ledger.seal", "key_path"),
    "read_audit_key": ("ledger.seal", "read_key"),
    "use_audit_key": ("ledger.seal", "use_key"),
    # ledger.signing
    "Signer": ("ledger.signing", "Signer"), "signing_key_path": ("ledger.signing", "key_path"),
    "read_signing_key": ("ledger.signing", "read_key"), "new_signing_key": ("ledger.signing", "new_key"),
    "use_signer": ("ledger.signing", "use_signer"), "current_signer": ("ledger.signing", "current_signer"),
    "key_fingerprint": ("ledger.signing", "fingerprint"),
    "parse_audit_head": ("ledger.audit", "parse_head"), "Verdict": ("ledger.audit", "Verdict"),
    # ledger.journal
    "JOURNAL_BYTES": ("ledger.journal", "JOURNAL_BYTES"),
    "REPORT_CSV_COLUMNS": ("ledger.report", "CSV_COLUMNS"),
    "REPORT_ENDINGS": ("ledger.report", "ENDINGS"),
    "RELEASE_OUTCOMES": ("ledger.report", "RELEASE_OUTCOMES"),
    "ReportFigures": ("ledger.report", "Figures"),
    "Report": ("ledger.report", "Report"),
    "history_destination": ("ledger.history", "check_destination"),
    # ledger.metrics
    "LedgerCollector": ("ledger.metrics", "LedgerCollector"),
    "metrics_exposition": ("ledger.metrics", "exposition"),
    "metrics_listen_address": ("ledger.metrics", "loopback_listen"),
    "metrics_registry": ("ledger.metrics", "registry_for"), "metrics_samples": ("ledger.metrics", "samples"),
    "metrics_server": ("ledger.metrics", "make_server"),
    # ledger.stages
    "Stage": ("ledger.stages", "Stage"),
    "RemoteAnswers": ("ledger.remote_answers", "RemoteAnswers"),
    # ledger.heartbeat
    "duration_text": ("ledger.heartbeat", "duration"), "Liveness": ("ledger.heartbeat", "Liveness"),
"WorkerBeat": ("ledger.heartbeat", "WorkerBeat"),
    "WorkerBoard": ("ledger.heartbeat", "WorkerBoard"),
    # ledger.identity
    "check_seat_name": ("ledger.identity", "check_seat_name"), "Identity": ("ledger.identity", "Identity"),
    "os_account": ("ledger.identity", "os_account"), "require_role": ("ledger.identity", "require_role"),
    "resolve_identity": ("ledger.identity", "resolve"), "SEAT_ENV": ("ledger.identity", "SEAT_ENV"),
    # ledger.opening, ledger.store
    "check_opening": ("ledger.opening", "check"), "loose_permissions": ("ledger.store", "loose_permissions"),
    # ledger.status
    "Status": ("ledger.status", "Status"),
    "Ledger": ("ledger.service", "Ledger"),
    "OverviewData": ("ledger.job_lists", "OverviewData"), "JobPage": ("ledger.job_lists", "JobPage"),
    "QuotaData": ("ledger.job_lists", "QuotaData"),
    "Coping": ("ledger.coping", "Coping"),
    "JobDetail": ("ledger.job_detail", "JobDetail"), "HELD_CASES": ("ledger.job_detail", "HELD_CASES"),
    "read_job_detail": ("ledger.job_detail", "read_job_detail"),
    "LiveFigures": ("ledger.status", "LiveFigures"),
    "JournalReport": ("ledger.status", "JournalReport"),
    # ledger.leases
    "claim_for_send": ("ledger.leases", "claim_for_send"),
    # ledger.model
    "Event": ("ledger.model", "Event"), "GROUPS": ("ledger.model", "GROUPS"),
    "idem_key": ("ledger.model", "idem_key"), "Job": ("ledger.model", "Job"), "JobKey": ("ledger.model", "JobKey"),
    "STATES": ("ledger.model", "STATES"), "Evidence": ("ledger.model", "Evidence"),
    "JobFilter": ("ledger.model", "JobFilter"), "STAGES": ("ledger.model", "STAGES"),
    "SORTS": ("ledger.model", "SORTS"),
    # ledger.probe
    "probe_remote": ("ledger.probe", "probe_remote"), "ProbeReport": ("ledger.probe", "ProbeReport"),
    "PROBE_WAIT_SECONDS": ("ledger.probe", "DEFAULT_WAIT_SECONDS"),
"QuotaDay": ("ledger.queries", "QuotaDay"),
    # ledger.receiver
    "make_webhook_server": ("ledger.receiver", "make_server"),
    # ledger.redaction
    "Redactor": ("ledger.redaction", "Redactor"),
    # ledger.remotes
    "console_url_for": ("ledger.remotes", "console_url_for"),
    # ledger.remotes.base
    "RemoteStatus": ("ledger.remotes.base", "RemoteStatus"),
    # ledger.store
    "is_url": ("ledger.store", "is_url"),
    "shown_ledger": ("ledger.store", "shown_ledger"),
    # ledger.store.export
    "ExportFilter": ("ledger.store.export", "ExportFilter"),
    "ForeignTally": ("ledger.store.evidence", "ForeignTally"),
    # ledger.store.views
"SavedView": ("ledger.store.views", "SavedView"),
    # ledger.triage
    "assign": ("ledger.triage", "assign"),
    "check_action_input": ("ledger.triage", "check_input"),
    "FINDING_CATEGORIES": ("ledger.triage", "FINDING_CATEGORIES"), "get_job": ("ledger.triage", "get_job"),
    "Preview": ("ledger.triage", "Preview"),
    "query_job": ("ledger.triage", "query_job"), "record_finding": ("ledger.triage", "record_finding"),
    "reject": ("ledger.triage", "reject"),
    "arrival_words": ("ledger.triage", "arrival_words"),
    # ledger.worker
    "poll_submitted": ("ledger.worker", "poll_submitted"), "RemoteCache": ("ledger.worker", "RemoteCache"),
"send_one": ("ledger.worker", "send_one"),
"tick": ("ledger.worker", "tick"),
    "TickReport": ("ledger.worker", "TickReport"), "worker_id": ("ledger.worker", "worker_id"),
    # ledger.reservation (`reserve_job` is another name for `reserve`)
    "reserve": ("ledger.reservation", "reserve"), "reserve_job": ("ledger.reservation", "reserve"),
    "ReserveResult": ("ledger.reservation", "ReserveResult"),
}
"""Every public name: (the module it lives in, its name there)."""


if TYPE_CHECKING:
    from ledger.actions import ACTIONS as ACTION_TABLE
    from ledger.actions import JOB_ACTIONS
    from ledger.actions import Field as ActionField
    from ledger.actions import action as get_action
    from ledger.audit import Verdict
    from ledger.audit import parse_head as parse_audit_head
    from ledger.batch import BATCH_ACTIONS, MAX_BATCH, BatchPlan, BatchResult
    from ledger.candidates import Candidate
    from ledger.candidates import decide_words as candidate_choices
    from ledger.clock import (
        INVALID,
        Clock,
        ManualClock,
        SystemClock,
        clock_time,
        day_of,
        iso,
        parse_due,
        parse_time,
        parse_when,
        process_clock,
        span,
        valid_time,
    )
    from ledger.config import Config, Policy, load_config, parse_config
    from ledger.coping import Coping
    from ledger.db import Connection, close_quietly, connect, create_ledger, write_tx
    from ledger.errors import (
        EXIT_BLOCKED_BY_HOLD,
        EXIT_HELD,
        EXIT_NOT_YET,
        EXIT_PROBE_FAILED,
        EXIT_QUOTA_EXCEEDED,
        EXIT_REFUSED,
        EXIT_RESERVED_NOT_SENT,
        EXIT_SEND_TAKEN_OVER,
        EXIT_UNDECIDED_CANDIDATES,
        EXIT_VERIFY_FAILED,
        BadInput,
        ConfigError,
        JobNotFound,
        LedgerCorrupt,
        LedgerError,
        LedgerLocked,
        LedgerUnusable,
        NotYet,
        PayloadError,
        Refused,
        UndecidedCandidates,
        UnknownOperation,
    )
    from ledger.export import (
        TABLES as EXPORT_TABLES,
    )
    from ledger.export import (
        check_filter as check_export_filter,
    )
    from ledger.export import (
        parse_states as parse_export_states,
    )
    from ledger.export import (
        redacted as export_redacted,
    )
    from ledger.files import fsync_dir, place_new
    from ledger.follow import EventCursor
    from ledger.heartbeat import Liveness, WorkerBeat, WorkerBoard
    from ledger.heartbeat import duration as duration_text
    from ledger.history import check_destination as history_destination
    from ledger.identity import (
        SEAT_ENV,
        Identity,
        check_seat_name,
        os_account,
        require_role,
    )
    from ledger.identity import (
        resolve as resolve_identity,
    )
    from ledger.job_detail import HELD_CASES, JobDetail, read_job_detail
    from ledger.job_lists import JobPage, OverviewData, QuotaData
    from ledger.journal import JOURNAL_BYTES
    from ledger.leases import claim_for_send
    from ledger.metrics import LedgerCollector
    from ledger.metrics import exposition as metrics_exposition
    from ledger.metrics import loopback_listen as metrics_listen_address
    from ledger.metrics import make_server as metrics_server
    from ledger.metrics import registry_for as metrics_registry
    from ledger.metrics import samples as metrics_samples
    from ledger.model import GROUPS, SORTS, STAGES, STATES, Event, Evidence, Job, JobFilter, JobKey, idem_key
    from ledger.opening import check as check_opening
    from ledger.policy import SETTINGS as POLICY_SETTINGS
    from ledger.policy import apply_to as apply_policy
    from ledger.policy import owner as policy_owner
    from ledger.policy import read as read_policy
    from ledger.policy import record as record_policy
    from ledger.policy import require_owner as require_policy_owner
    from ledger.probe import DEFAULT_WAIT_SECONDS as PROBE_WAIT_SECONDS
    from ledger.probe import ProbeReport, probe_remote
    from ledger.queries import QuotaDay
    from ledger.receiver import make_server as make_webhook_server
    from ledger.redaction import Redactor
    from ledger.remote_answers import RemoteAnswers
    from ledger.remotes import console_url_for
    from ledger.remotes.base import RemoteStatus
    from ledger.report import CSV_COLUMNS as REPORT_CSV_COLUMNS
    from ledger.report import ENDINGS as REPORT_ENDINGS
    from ledger.report import RELEASE_OUTCOMES, Report
    from ledger.report import Figures as ReportFigures
    from ledger.reservation import ReserveResult, reserve
    from ledger.reservation import reserve as reserve_job
    from ledger.seal import create_key as create_audit_key
    from ledger.seal import current_key as current_audit_key
    from ledger.seal import key_path as audit_key_path
    from ledger.seal import read_key as read_audit_key
    from ledger.seal import use_key as use_audit_key
    from ledger.service import Ledger
    from ledger.signing import Signer, current_signer, use_signer
    from ledger.signing import fingerprint as key_fingerprint
    from ledger.signing import key_path as signing_key_path
    from ledger.signing import new_key as new_signing_key
    from ledger.signing import read_key as read_signing_key
    from ledger.stages import Stage
    from ledger.status import JournalReport, LiveFigures, Status
    from ledger.store import is_url, loose_permissions, shown_ledger
    from ledger.store.evidence import ForeignTally
    from ledger.store.export import ExportFilter
    from ledger.store.views import SavedView
    from ledger.triage import (
        FINDING_CATEGORIES,
        Preview,
        arrival_words,
        assign,
        get_job,
        query_job,
        record_finding,
        reject,
    )
    from ledger.triage import (
        check_input as check_action_input,
    )
    from ledger.worker import RemoteCache, TickReport, poll_submitted, send_one, tick, worker_id


def __getattr__(name: str) -> Any:
    """Load an exported name from its module the first time it is asked for."""
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


__all__ = [
    "ACTION_TABLE",
    "BATCH_ACTIONS",
    "EXIT_BLOCKED_BY_HOLD",
    "EXIT_HELD",
    "EXIT_NOT_YET",
    "EXIT_PROBE_FAILED",
    "EXIT_QUOTA_EXCEEDED",
    "EXIT_REFUSED",
    "EXIT_RESERVED_NOT_SENT",
    "EXIT_SEND_TAKEN_OVER",
    "EXIT_UNDECIDED_CANDIDATES",
    "EXIT_VERIFY_FAILED",
    "EXPORT_TABLES",
    "FINDING_CATEGORIES",
    "GROUPS",
    "HELD_CASES",
    "INVALID",
    "JOB_ACTIONS",
    "JOURNAL_BYTES",
    "MAX_BATCH",
    "POLICY_SETTINGS",
    "PROBE_WAIT_SECONDS",
    "RELEASE_OUTCOMES",
    "REPORT_CSV_COLUMNS",
    "REPORT_ENDINGS",
    "SEAT_ENV",
    "SORTS",
    "STAGES",
    "STATES",
    "ActionField",
    "BadInput",
    "BatchPlan",
    "BatchResult",
    "Candidate",
    "Clock",
    "Config",
    "ConfigError",
    "Connection",
    "Coping",
    "Event",
    "EventCursor",
    "Evidence",
    "ExportFilter",
    "ForeignTally",
    "Identity",
    "Job",
    "JobDetail",
    "JobFilter",
    "JobKey",
    "JobNotFound",
    "JobPage",
    "JournalReport",
    "Ledger",
    "LedgerCollector",
    "LedgerCorrupt",
    "LedgerError",
    "LedgerLocked",
    "LedgerUnusable",
    "LiveFigures",
    "Liveness",
    "ManualClock",
    "NotYet",
    "OverviewData",
    "PayloadError",
    "Policy",
    "Preview",
    "ProbeReport",
    "QuotaData",
    "QuotaDay",
    "Redactor",
    "Refused",
    "RemoteAnswers",
    "RemoteCache",
    "RemoteStatus",
    "Report",
    "ReportFigures",
    "ReserveResult",
    "SavedView",
    "Signer",
    "Stage",
    "Status",
    "SystemClock",
    "TickReport",
    "UndecidedCandidates",
    "UnknownOperation",
    "Verdict",
    "WorkerBeat",
    "WorkerBoard",
    "apply_policy",
    "arrival_words",
    "assign",
    "audit_key_path",
    "candidate_choices",
    "check_action_input",
    "check_export_filter",
    "check_opening",
    "check_seat_name",
    "claim_for_send",
    "clock_time",
    "close_quietly",
    "connect",
    "console_url_for",
    "create_audit_key",
    "create_ledger",
    "current_audit_key",
    "current_signer",
    "day_of",
    "duration_text",
    "export_redacted",
    "fsync_dir",
    "get_action",
    "get_job",
    "history_destination",
    "idem_key",
    "is_url",
    "iso",
    "key_fingerprint",
    "load_config",
    "loose_permissions",
    "make_webhook_server",
    "metrics_exposition",
    "metrics_listen_address",
    "metrics_registry",
    "metrics_samples",
    "metrics_server",
    "new_signing_key",
    "os_account",
    "parse_audit_head",
    "parse_config",
    "parse_due",
    "parse_export_states",
    "parse_time",
    "parse_when",
    "place_new",
    "policy_owner",
    "poll_submitted",
    "probe_remote",
    "process_clock",
    "query_job",
    "read_audit_key",
    "read_job_detail",
    "read_policy",
    "read_signing_key",
    "record_finding",
    "record_policy",
    "reject",
    "require_policy_owner",
    "require_role",
    "reserve",
    "reserve_job",
    "resolve_identity",
    "send_one",
    "shown_ledger",
    "signing_key_path",
    "span",
    "tick",
    "use_audit_key",
    "use_signer",
    "valid_time",
    "worker_id",
    "write_tx",
]
