"""The environment a test gives a child process that runs reclaim."""

from __future__ import annotations

import os

KEEP = ("RECLAIM_SIGNING_KEY_FILE",)
"""The RECLAIM_* settings a child keeps: the test's own signing key file (tests/conftest.py `_own_signing_key`), so
a child never makes or uses a key in the home of the account running the tests."""


def inherited_env() -> dict[str, str]:
    """This process's environment without any RECLAIM_* setting but those in KEEP."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RECLAIM_") or k in KEEP}
