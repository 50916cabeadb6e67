"""reclaim's ledger: reserve before sending, hold what is unknown, and record every change.

Plain functions over a SQLite file; no Textual import. See `reserve`, `worker.tick`, `triage`.
"""

from ledger.clock import Clock, ManualClock, SystemClock, process_clock
from ledger.config import Config, load_config, parse_config
from ledger.db import connect, create_ledger, write_tx
from ledger.errors import (
    BadInput,
    ConfigError,
    JobNotFound,
    LedgerError,
    LedgerLocked,
    LedgerUnusable,
    PayloadError,
    Refused,
    UnknownOperation,
)
from ledger.model import GROUPS, STATES, Event, Job, JobKey, idem_key
from ledger.reserve import ReserveResult, reserve

__all__ = [
    "GROUPS",
    "STATES",
    "BadInput",
    "Clock",
    "Config",
    "ConfigError",
    "Event",
    "Job",
    "JobKey",
    "JobNotFound",
    "LedgerError",
    "LedgerLocked",
    "LedgerUnusable",
    "ManualClock",
    "PayloadError",
    "Refused",
    "ReserveResult",
    "SystemClock",
    "UnknownOperation",
    "connect",
    "create_ledger",
    "idem_key",
    "load_config",
    "parse_config",
    "process_clock",
    "reserve",
    "write_tx",
]
