"""Figure 11 on PostgreSQL: the same commands as scripts/bench_commands.py on the same 1,000,000 jobs, in a
PostgreSQL ledger loaded from a SQLite big ledger (scripts/make_big_ledger.py), warm and cold.

The ledger is made by `create_ledger` (the real schema, triggers and roles' grants), then its rows are copied from
the SQLite file with COPY while the events' triggers are off (a fixture generator may use raw SQL: the chain was
computed by the generator, and the counters are then computed once the way the migration to schema 18 does), and
the triggers are switched back on before anything is measured. The server is a throwaway one
(tests/support/pg_server.py: fsync off, shared_buffers 32 MB), or the one at $RECLAIM_BENCH_PG (then cold is not
measured: this script cannot restart it).

  cold  the server is stopped (its shared buffers go with it), every file of its data folder is dropped from the
        OS page cache (fsync, posix_fadvise DONTNEED), and it is started again before the command.

    .venv/bin/python scripts/bench_commands_pg.py --from big.db --config big.toml [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import bench_commands  # noqa: E402

TABLES = ("jobs", "events", "quota_usage")
"""What is copied from the SQLite ledger (the rest of a big ledger is empty)."""
COUNTERS = """
DELETE FROM job_counts;
DELETE FROM event_tallies;
INSERT INTO job_counts (operation, state, n) SELECT operation, state, COUNT(*) FROM jobs GROUP BY operation, state;
INSERT INTO event_tallies (operation, kind, from_state, to_state, system, n, journaled, cancelled)
SELECT operation, kind, COALESCE(from_state, ''), COALESCE(to_state, ''),
       CASE WHEN actor = 'reclaim' THEN 1 ELSE 0 END, COUNT(*), SUM(reclaim_journaled(detail)),
       SUM(reclaim_cancelled(kind, detail))
FROM events GROUP BY 1, 2, 3, 4, 5;
"""


def load(source: Path, url: str) -> dict[str, Any]:
    """Create a ledger at `url` and copy the SQLite ledger `source`'s jobs, events and quota into it."""
    import psycopg

    from ledger.db import create_ledger

    create_ledger(url)
    lite = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    counts: dict[str, Any] = {}
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("ALTER TABLE events DISABLE TRIGGER USER")
        try:
            for table in TABLES:
                pg_cols = [r[0] for r in pg.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema() ORDER BY ordinal_position", (table,))]
                cols = [r[1] for r in lite.execute(f"PRAGMA table_info({table})") if r[1] in pg_cols]
                n = 0
                with pg.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                    for row in lite.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                        copy.write_row(row)
                        n += 1
                counts[table] = n
            pg.execute("SELECT setval(pg_get_serial_sequence('events', 'id'), (SELECT MAX(id) FROM events))")
            pg.execute(COUNTERS)
        finally:
            pg.execute("ALTER TABLE events ENABLE TRIGGER USER")
        pg.execute("VACUUM ANALYZE")
        counts["bytes"] = pg.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
    lite.close()
    counts["seconds"] = time.perf_counter() - started
    return counts


def dropper(server: Any) -> Callable[[], None]:
    """A cold start for `server`: stop it, drop its data folder's files from the OS page cache, start it again."""

    def drop() -> None:
        server.halt()
        bench_commands.drop_files(Path(folder, name) for folder, _, files in os.walk(server.data) for name in files)
        server.resume()

    return drop


def run(source: Path, config: Path, rounds: int = 3) -> list[dict[str, Any]]:
    """Load `source` into a throwaway server (or $RECLAIM_BENCH_PG) and measure the commands; rows for bench.py."""
    from pg_server import PgServer

    external = os.environ.get("RECLAIM_BENCH_PG")
    server = None if external else PgServer().start()
    try:
        url = external or server.new_database("big")  # type: ignore[union-attr]
        info = load(source, url)
        rows = [{"figure": f"PostgreSQL: {info['jobs']:,} jobs, {info['events']:,} events copied from {source.name}",
                 "value": f"{info['seconds']:.0f} s, {info['bytes'] / 1e6:,.0f} MB", "baseline": "-", "ratio": None,
                 "note": "COPY with the events' triggers off, then the counters computed once"}]
        commands = {k: v for k, v in bench_commands.COMMANDS.items()}
        if server is None:
            def drop() -> None:
                pass
        else:
            drop = dropper(server)
        rows += bench_commands.run(url, config, rounds, commands, drop=drop, backend="PostgreSQL ")
        if server is None:
            rows = [r for r in rows if "cold" not in r["figure"]]
        return rows
    finally:
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", type=Path, required=True, help="a SQLite big ledger")
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    for row in run(args.source.resolve(), args.config.resolve(), args.rounds):
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        print(f"{row['figure']}: {row['value']}  | {row['baseline']}{ratio}  ({row['note']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
