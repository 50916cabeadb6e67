"""The named read queries behind `reclaim remotes` (ledger.remote_answers): when each remote last answered.

The same SQL on both backends except where evidence's JSON detail is read (`_remote_of`). Only reads.
"""

from __future__ import annotations

from ledger import store
from ledger.store import Connection


def _remote_of(conn: Connection) -> str:
    """The SQL expression for the remote named in an evidence row's detail (set by the webhook receiver)."""
    if store.is_pg(conn):
        return "(e.detail::jsonb ->> 'remote')"
    return "json_extract(e.detail, '$.remote')"


def last_verified_webhooks(conn: Connection) -> dict[str, float]:
    """Per remote, when its newest verified webhook delivery that became evidence was received."""
    remote = _remote_of(conn)
    rows = conn.execute(
        f"SELECT {remote}, MAX(w.received_at) FROM webhook_deliveries w JOIN evidence e ON e.id = w.evidence_id "
        f"WHERE {remote} IS NOT NULL GROUP BY {remote}"
    ).fetchall()
    return {str(r[0]): float(r[1]) for r in rows}


def last_evidence(conn: Connection) -> dict[str, tuple[float, str]]:
    """Per operation, when the remote last said something about one of its jobs (a query's answer, a webhook, a
    fenced outcome) and which source it was."""
    rows = conn.execute(
        "SELECT e.operation, e.at, e.source FROM evidence e JOIN (SELECT operation, MAX(id) AS id FROM evidence "
        "WHERE operation IS NOT NULL GROUP BY operation) newest ON newest.id = e.id"
    ).fetchall()
    return {str(r[0]): (float(r[1]), str(r[2])) for r in rows}
