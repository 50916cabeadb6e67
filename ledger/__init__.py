"""reclaim's ledger: reserve before sending, hold what is unknown, and record every change.

Plain functions over a SQLite file; no Textual import. See `reserve`, `worker.tick`, `triage`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names are imported on first use (PEP 562), so `import ledger.db` does not load every module: a
# command that only reads starts fast.
_EXPORTS = {
    "Clock": "ledger.clock", "ManualClock": "ledger.clock", "SystemClock": "ledger.clock",
    "process_clock": "ledger.clock",
    "Config": "ledger.config", "load_config": "ledger.config", "parse_config": "ledger.config",
    "connect": "ledger.db", "create_ledger": "ledger.db", "write_tx": "ledger.db",
    "BadInput": "ledger.errors", "ConfigError": "ledger.errors", "JobNotFound": "ledger.errors",
    "LedgerError": "ledger.errors", "LedgerLocked": "ledger.errors", "LedgerUnusable": "ledger.errors",
    "PayloadError": "ledger.errors", "Refused": "ledger.errors", "UnknownOperation": "ledger.errors",
    "GROUPS": "ledger.model", "STATES": "ledger.model", "Event": "ledger.model", "Job": "ledger.model",
    "JobKey": "ledger.model", "idem_key": "ledger.model",
}
# `reserve` is both a function and its module's name: bind the function now, or importing the module
# `ledger.reserve` first would leave `from ledger import reserve` holding the module.
from ledger.reserve import ReserveResult, reserve  # noqa: E402

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    """Load an exported name from its module the first time it is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

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
