"""The SQL behind saved views (ledger.views): the table `saved_views`, one row per operator and view name.

The statements are each backend's own (`ledger/store/sql/BACKEND/views.sql`, run by name). `ledger.views` decides
what a view may hold (its name, group and filter) and which views every seat has without saving them; these
operations only read and write rows. A write runs inside the caller's transaction (`ledger.db.write_tx`). Every
operation raises the ledger's own errors only: LedgerUnavailable, LedgerLocked, LedgerCorrupt, LedgerConflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.store import Connection


@dataclass(frozen=True)
class SavedView:
    """One saved view."""

    operator: str
    name: str
    group: str
    filter: str
    created_at: float


def save(conn: Connection, view: SavedView) -> None:
    """Write `view` (inserted, or the operator's view of that name replaced: its group, filter and time), inside the
    caller's write transaction."""
    conn.run("views.save", (view.operator, view.name, view.group, view.filter, view.created_at))


def list_views(conn: Connection, operator: str) -> list[SavedView]:
    """`operator`'s saved views, by name ([] when none)."""
    rows = conn.run("views.list_views", (operator,))
    return [SavedView(str(r[0]), str(r[1]), str(r[2]), str(r[3]), float(r[4])) for r in rows]


def delete(conn: Connection, operator: str, name: str) -> bool:
    """Delete `operator`'s view `name` inside the caller's write transaction; False when there is none (nothing is
    written)."""
    return conn.run("views.delete", (operator, name)).rowcount > 0
