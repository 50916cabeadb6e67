"""An open ledger: the connection, the config acting under the ledger's own policy, and the clock its leases are
judged by. What a command, the console or an exporter holds while it works with one ledger.

`Ledger.open` is the one way to open a ledger with a config: the policy the ledger holds (identity source, roles,
four-eyes, kept with the ledger by its owner) takes precedence over the config the caller passes (`ledger.policy`),
so no caller chooses who it is through its own config. On PostgreSQL, when the caller runs on the host's wall
clock, leases are judged by the server's clock (`ledger.store.ledger_clock`). What it answers: the status document
and the live figures (`ledger.status`), the lists of jobs (`ledger.job_lists`: the overview, a page of a group, the
quotas), and a job's whole story as the triage screens read it (`ledger.job_detail`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ledger.clock import Clock, process_clock
from ledger.config import Config
from ledger.db import connect
from ledger.identity import Identity
from ledger.job_detail import JobDetail, read_job_detail
from ledger.job_lists import JobPage, OverviewData, QuotaData, read_overview, read_page, read_quotas
from ledger.model import JobKey
from ledger.policy import apply_to as apply_policy
from ledger.policy import read as read_policy
from ledger.status import LiveFigures, Status, read_live_figures, read_status
from ledger.store import Connection, ledger_clock

if TYPE_CHECKING:
    from ledger.worker import RemoteCache


@dataclass(frozen=True)
class Ledger:
    """One open ledger (see the module's docstring). Close it, or use it as a context manager."""

    name: str | Path
    """The ledger as it was named: a SQLite file's path, or a PostgreSQL URL."""
    conn: Connection
    config: Config
    """The caller's config under the ledger's own policy."""
    clock: Clock

    @classmethod
    def open(
        cls, ledger: str | Path, config: Config, *, readonly: bool = False, clock: Clock | None = None,
    ) -> Ledger:
        """Open `ledger` (read-only when `readonly`) with `config` governed by the policy the ledger holds, and the
        clock its leases are judged by (`clock`, else this process's). Raises the ledger's own errors when it cannot
        be opened (unusable, locked, corrupt, unavailable) and PolicyConflict (a config error) when `config` states a
        setting the held policy differs from; nothing is left open then."""
        conn = connect(ledger, readonly=readonly)
        try:
            governed = apply_policy(config, read_policy(conn))
        except BaseException:
            conn.close()
            raise
        return cls(ledger, conn, governed, ledger_clock(conn, clock if clock is not None else process_clock()))

    @classmethod
    def governed_config(cls, ledger: str | Path, config: Config) -> Config:
        """`config` governed by the policy `ledger` holds, the ledger closed again (for a process that opens it
        later, or on other threads). Raises as `open` does."""
        with cls.open(ledger, config, readonly=True) as opened:
            return opened.config

    def live_figures(self) -> LiveFigures:
        """The ledger's live figures now (`ledger.status.read_live_figures`)."""
        return read_live_figures(self.conn, self.config, self.clock.now())

    def status(self, identity: Identity, *, page_check_seconds: float) -> Status:
        """The status document as `identity` sees it now (`ledger.status.read_status`), the pages checked for damage
        for at most `page_check_seconds` first. Raises LedgerCorrupt when damage is found."""
        return read_status(self.conn, self.config, ledger=self.name, identity=identity, now=self.clock.now(),
                           page_check_seconds=page_check_seconds)

    def job_detail(
        self, key: JobKey, remotes: RemoteCache, *, operator: str, refused_because: str | None = None,
        with_previews: bool = False, with_remote: bool = True,
    ) -> JobDetail | None:
        """One job's whole story as the triage screens read it (`ledger.job_detail.read_job_detail`); None when the
        ledger has no such job."""
        return read_job_detail(self.conn, self.config, remotes, key, operator=operator, clock=self.clock,
                               refused_because=refused_because, with_previews=with_previews, with_remote=with_remote)

    def overview(self, held_limit: int = 50) -> OverviewData:
        """The oldest held jobs (at most `held_limit`) with their stages, and today's quotas
        (`ledger.job_lists.read_overview`)."""
        return read_overview(self.conn, self.config, self.clock.now(), held_limit)

    def page(
        self, group: str, *, offset: int, oldest_first: bool, filter_text: str, me: str, page_size: int,
    ) -> JobPage:
        """One page of a console group's jobs, filtered by the typed filter `filter_text` as `me` writes it, under
        the policy's four-eyes rule, in the config's time zone (`ledger.job_lists.read_page`)."""
        return read_page(self.conn, group, offset=offset, oldest_first=oldest_first, filter_text=filter_text, me=me,
                         page_size=page_size, four_eyes=self.config.policy.four_eyes, tz=self.config.timezone)

    def quotas(self, days: int = 14) -> QuotaData:
        """Each operation's quota use over the last `days` days and its held jobs (`ledger.job_lists`)."""
        return read_quotas(self.conn, self.config, self.clock.now(), days)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self.close()
