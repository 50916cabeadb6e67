"""Delivering a result to its sink: one file per idem key, written atomically, so redelivery is harmless."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from ledger.model import Job
from ledger.redaction import Redactor

PARTIAL_PREFIX = ".deliver-"
PARTIAL_MAX_AGE_SECONDS = 600.0


def deliver_to_folder(folder: Path, job: Job, redactor: Redactor | None = None) -> Path:
    """Write the job's result to `folder/<idem_key>.json` atomically (fsync, rename); return the path.

    With `redactor`, every secret it knows is replaced in what is written (`[redacted:NAME]`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    sweep_partial_writes(folder)
    dest = folder / f"{job.idem_key}.json"
    body = {
        "job_id": job.job_id,
        "operation": job.operation,
        "idem_key": job.idem_key,
        "target": job.target,
        "attempt": job.attempt,
        "handle": job.handle,
        "result": job.result,
    }
    if redactor is not None:
        body = redactor.redact_value(body)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=PARTIAL_PREFIX, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(body, f, ensure_ascii=False, sort_keys=True, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return dest


def sweep_partial_writes(folder: Path, older_than: float = PARTIAL_MAX_AGE_SECONDS) -> int:
    """Remove temp files a killed delivery left behind (older than `older_than` seconds); return how many."""
    cutoff = time.time() - older_than
    removed = 0
    for tmp in folder.glob(f"{PARTIAL_PREFIX}*.tmp"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
