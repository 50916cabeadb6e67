"""Saved views: a named group + typed filter per operator, kept in the ledger so every seat shares them."""

from __future__ import annotations

from ledger.clock import Clock
from ledger.config import Config
from ledger.db import write_tx
from ledger.errors import BadInput
from ledger.model import JobFilter, check_group
from ledger.store import Connection
from ledger.store import views as views_store
from ledger.store.views import SavedView, list_views


def save_view(conn: Connection, operator: str, name: str, group: str, flt: str, *, clock: Clock) -> SavedView:
    """Save (or replace) `operator`'s view `name`: a group and a filter such as 'owner:me op:article.*'; a filter
    with a key `JobFilter.parse` does not know is refused (BadInput), as every use of it would be."""
    if not name.strip() or len(name) > 80:
        raise BadInput("view name: must be 1 to 80 characters and not blank")
    check_group(group)
    if len(flt) > 500:
        raise BadInput("filter: at most 500 characters")
    JobFilter.parse(flt, me=operator, now=clock.now())
    view = SavedView(operator, name, group, flt, clock.now())
    with write_tx(conn):
        views_store.save(conn, view)
    return view


def get_view(conn: Connection, operator: str, name: str) -> SavedView:
    """One saved view; BadInput naming it when missing."""
    for view in list_views(conn, operator):
        if view.name == name:
            return view
    raise BadInput(f"view {name!r}: no such saved view for {operator} (see 'reclaim views')")


def delete_view(conn: Connection, operator: str, name: str) -> None:
    """Delete `operator`'s view `name`; BadInput when missing."""
    with write_tx(conn):
        if not views_store.delete(conn, operator, name):
            raise BadInput(f"view {name!r}: no such saved view for {operator} (see 'reclaim views')")


AWAITING_MY_APPROVAL = "awaiting my approval"


def builtin_views(config: Config, operator: str) -> list[SavedView]:
    """The views every seat has without saving them: for an approver, "awaiting my approval" (held jobs with a
    finding, leaving out under four-eyes those the approver queried or wrote a finding for)."""
    if "approver" not in config.roles_of(operator):
        return []
    return [SavedView(operator, AWAITING_MY_APPROVAL, "held", "stage:awaiting-my-approval", 0.0)]
