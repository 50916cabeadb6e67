"""`make demo-pg`: the demo with its ledger on a throwaway PostgreSQL server and two worker processes.

Starts a server the way the tests do (tests/support/pg_server.py: initdb + pg_ctl on a unix socket in a temporary
folder, as the `postgres` user when root), runs `reclaim demo --pg URL --workers 2 [ARGS...]`, and stops
and removes the server when the demo ends. Extra arguments go to `reclaim demo` (e.g. --no-ui --seconds 20).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from pg_server import PgServer, unavailable  # noqa: E402


def main(argv: list[str]) -> int:
    why = unavailable()
    if why:
        print(f"demo-pg: {why}", file=sys.stderr)
        return 1
    server = PgServer().start()
    try:
        url = server.new_database("demo")
        print(f"demo-pg: PostgreSQL ledger at {url} (a throwaway server, removed when the demo ends)", flush=True)
        return subprocess.call([sys.executable, "-m", "console", "demo", "--pg", url, "--workers", "2", *argv])
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
