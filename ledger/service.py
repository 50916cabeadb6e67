"""An open ledger: the connection, the config acting under the ledger's own policy, and the clock its leases are
judged by. What a command, the console or an exporter holds while it works with one ledger.

`Ledger.open` is the one way to open a ledger with a config: the policy the ledger holds (identity source, roles,
four-eyes, kept with the ledger by its owner) takes precedence over the config the caller passes (`ledger.policy`),
so no caller chooses who it is through its own config. On PostgreSQL, when the caller runs on the host's wall
clock, leases are judged by the server's clock (`ledger.store.ledger_clock`). `Ledger.read` opens one for reading only,
with no policy applied (nobody acts).

`Ledger` is what the CLI and the console reach the ledger through: a job and its history, the lists of jobs
(`ledger.job_lists`) and a job's whole story (`ledger.job_detail`); the live figures, the status document
(`ledger.status`) and the events as they are committed; the ledger's verdict, policy and export; the triage
actions (`ledger.triage`), saved views, sending and worker passes (`ledger.worker`), the notification outbox,
orphan evidence and the hold report. Each method is one call of the module that owns the rule, on this ledger's
connection, config and clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ledger.clock import Clock, process_clock
from ledger.config import Config, parse_config
from ledger.db import connect
from ledger.errors import BadInput
from ledger.follow import EventCursor
from ledger.identity import Identity
from ledger.model import Event, Evidence, Job, JobFilter, JobKey, check_group, check_sort
from ledger.opening import check as check_opening
from ledger.policy import apply_to as apply_policy
from ledger.policy import read as read_policy
from ledger.status import LiveFigures, Status, read_live_figures, read_status
from ledger.store import Connection, ledger_clock, wait_for_change
from ledger.store.events import job_events, last_event_id
from ledger.store.evidence import for_job as evidence_for_job
from ledger.store.evidence import orphans as orphan_evidence
from ledger.store.jobs import find_job, jobs_matching_id, list_jobs, operations_of

if TYPE_CHECKING:  # the rest loads with the method that needs it: a status or a show starts without them
    from ledger.audit import Verdict
    from ledger.batch import BatchPlan, BatchResult
    from ledger.candidates import Candidate
    from ledger.export import Anchor
    from ledger.history import Written
    from ledger.job_detail import JobDetail
    from ledger.job_lists import JobPage, OverviewData, QuotaData
    from ledger.policy import LedgerPolicy
    from ledger.remote_answers import RemoteAnswers
    from ledger.remotes.base import Remote, RemoteStatus
    from ledger.report import Report
    from ledger.store.export import ExportFilter
    from ledger.store.views import SavedView
    from ledger.transitions import Applied
    from ledger.triage import BulkAssigned, Preview
    from ledger.worker import Progress, RemoteCache, SubmitResult, TickReport


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
            return cls(ledger, conn, apply_policy(config, read_policy(conn)),
                       ledger_clock(conn, clock if clock is not None else process_clock()))
        except BaseException:
            conn.close()
            raise

    @classmethod
    def read(cls, ledger: str | Path, config: Config | None = None, *, clock: Clock | None = None) -> Ledger:
        """Open `ledger` read-only for reading only: with `config` as given (no policy applied: nobody acts), or,
        without one, a config that declares nothing (no operations, no remotes, UTC), and the clock leases are
        judged by. Raises as `open` does, less PolicyConflict."""
        conn = connect(ledger, readonly=True)
        try:
            return cls(ledger, conn, config if config is not None else parse_config({}, base_dir=Path.cwd()),
                       ledger_clock(conn, clock if clock is not None else process_clock()))
        except BaseException:
            conn.close()
            raise

    @classmethod
    def governed_config(cls, ledger: str | Path, config: Config) -> Config:
        """`config` governed by the policy `ledger` holds, the ledger closed again (for a process that opens it
        later, or on other threads). Raises as `open` does."""
        with cls.open(ledger, config, readonly=True) as opened:
            return opened.config

    # -- jobs and their history ----------------------------------------------------------------------------------------

    def job(self, key: JobKey) -> Job:
        """The job `key`, every field; JobNotFound when the ledger has none."""
        from ledger.triage import get_job

        return get_job(self.conn, key)

    def key_of(self, job_id: str, operation: str | None = None) -> JobKey:
        """The key of the job `job_id` (under `operation` when given, else the one operation it exists under).
        Raises BadInput when the id is not in the ledger, or exists under several operations and none is given."""
        from ledger.job_lists import key_of

        return key_of(self.conn, job_id, operation)

    def jobs_named(self, job_id: str, operation: str | None = None) -> list[Job]:
        """The jobs with the id `job_id`: the one under `operation`, or, without it, one per operation the id exists
        under (sorted by operation); [] when the ledger has none."""
        operations = [operation] if operation is not None else operations_of(self.conn, job_id)
        return [job for op in operations if (job := find_job(self.conn, JobKey(job_id, op))) is not None]

    def jobs_matching(self, text: str, limit: int = 20) -> list[Job]:
        """At most `limit` jobs of any group whose id begins with `text` (as typed), then those whose id holds it
        elsewhere (ignoring ASCII case), each kind by id (`ledger.store.jobs.jobs_matching_id`); [] for no text."""
        return jobs_matching_id(self.conn, text.strip(), limit)

    def jobs(
        self, group: str, *, limit: int = 100, offset: int = 0, oldest_first: bool = True, flt: JobFilter | None = None,
        sort: str = "age",
    ) -> list[Job]:
        """One page of a group's jobs (`ledger.GROUPS`) ordered by `sort` (`ledger.SORTS`; ascending when
        `oldest_first`), filtered by `flt`; BadInput for an unknown group or sort."""
        check_group(group)
        check_sort(sort)
        return list_jobs(self.conn, group, limit=limit, offset=offset, oldest_first=oldest_first, flt=flt, sort=sort)

    def history_of(self, key: JobKey) -> list[Event]:
        """The job's events in its order ([] when it has none)."""
        return job_events(self.conn, key)

    def evidence_of(self, job: Job) -> list[Evidence]:
        """What the remote said about `job`: query answers, signed webhooks, fenced accepted sends, oldest first."""
        return evidence_for_job(self.conn, job)

    def may_arrive_until(self, job: Job) -> float | None:
        """Until when the held job's last request could still reach the remote (`ledger.triage.may_arrive_until`),
        or None when nothing of it can any more: no such moment, or it has passed by the ledger's clock."""
        from ledger.triage import may_arrive_until

        until = may_arrive_until(self.conn, job)
        return until if until is not None and until > self.clock.now() else None

    def candidates(self, job: Job) -> list[Candidate]:
        """The orphan deliveries that could be `job`'s own and nobody dismissed for it, oldest first
        (`ledger.candidates`); [] for a job with no send window."""
        from ledger.candidates import candidates as held_candidates

        return held_candidates(self.conn, self.config, job)

    def job_detail(
        self, key: JobKey, *, operator: str, refused_because: str | None = None,
        with_previews: bool = False, with_remote: bool = True,
    ) -> JobDetail | None:
        """One job's whole story as the triage screens read it (`ledger.job_detail.read_job_detail`); None when the
        ledger has no such job."""
        from ledger.job_detail import read_job_detail

        return read_job_detail(self.conn, self.config, key, operator=operator, clock=self.clock,
                               refused_because=refused_because, with_previews=with_previews, with_remote=with_remote)

    def remote_lines(self, job: Job) -> list[str]:
        """What `job`'s remote is and what it can answer, in the console's words, without building its adapter
        (`ledger.job_detail.remote_lines`)."""
        from ledger.job_detail import remote_lines

        return remote_lines(self.config, job, self.conn)

    def overview(self, held_limit: int = 50) -> OverviewData:
        """The oldest held jobs (at most `held_limit`) with their stages, and today's quotas
        (`ledger.job_lists.read_overview`)."""
        from ledger.job_lists import read_overview

        return read_overview(self.conn, self.config, self.clock.now(), held_limit)

    def page(
        self, group: str, *, offset: int, oldest_first: bool, filter_text: str, me: str, page_size: int,
        sort: str = "age",
    ) -> JobPage:
        """One page of a console group's jobs ordered by `sort` (`ledger.SORTS`; ascending when `oldest_first`),
        filtered by the typed filter `filter_text` as `me` writes it, under the policy's four-eyes rule, in the
        config's time zone (`ledger.job_lists.read_page`). Raises BadInput for an unknown sort."""
        from ledger.job_lists import read_page

        check_sort(sort)
        return read_page(self.conn, group, offset=offset, oldest_first=oldest_first, filter_text=filter_text, me=me,
                         page_size=page_size, now=self.clock.now(), four_eyes=self.config.policy.four_eyes,
                         tz=self.config.timezone, sort=sort)

    def match_counts(self, filter_text: str, *, me: str, cap: int = 100) -> dict[str, int]:
        """How many jobs of each group the typed filter matches (each up to `cap` + 1; only the groups with a
        match), as `me` writes it under the policy's four-eyes rule (`ledger.job_lists.match_counts`)."""
        from ledger.job_lists import match_counts

        return match_counts(self.conn, filter_text, me=me, now=self.clock.now(), four_eyes=self.config.policy.four_eyes,
                            cap=cap)

    def quotas(self, days: int = 14) -> QuotaData:
        """Each operation's quota use over the last `days` days and its held jobs (`ledger.job_lists`)."""
        from ledger.job_lists import read_quotas

        return read_quotas(self.conn, self.config, self.clock.now(), days)

    # -- the live view, following the events ---------------------------------------------------------------------------

    def live_figures(self) -> LiveFigures:
        """The ledger's live figures now (`ledger.status.read_live_figures`)."""
        return read_live_figures(self.conn, self.config, self.clock.now())

    def status(self, identity: Identity) -> Status:
        """The status document as `identity` sees it now (`ledger.status.read_status`), after the checks of opening
        (`ledger.opening`). Raises LedgerCorrupt when damage is found."""
        return read_status(self.conn, self.config, ledger=self.name, identity=identity, now=self.clock.now())

    def awaiting_count(self, me: str) -> int | None:
        """How many held jobs await `me`'s approval under the policy's four-eyes rule (None: `me` is no approver)."""
        from ledger.stages import awaiting_count

        return awaiting_count(self.conn, self.config, me)

    def last_event_id(self) -> int:
        """The id of the newest event (0 when there is none)."""
        return last_event_id(self.conn)

    def events(self, after: int = 0) -> EventCursor:
        """A cursor over the events committed after the id `after`, oldest first (`ledger.follow.EventCursor`)."""
        return EventCursor(self.conn, after=after)

    def wait_for_change(self, seconds: float, wake: threading.Event | None = None) -> bool:
        """Wait until another connection commits: at most `seconds`, less when `wake` is set; PostgreSQL is woken
        at once by the commit's NOTIFY (`ledger.store.wait_for_change`)."""
        return wait_for_change(self.conn, seconds, wake)

    # -- the ledger itself: its pages, its verdict, its policy, its export ---------------------------------------------

    def check_opening(self) -> None:
        """Check what is cheap and certain on the way in: the header, the schema, the newest event against its hash
        (`ledger.opening.check`; never a walk of the whole file: that is `verify`). Raises LedgerCorrupt naming the
        damage."""
        check_opening(self.conn)

    def record_verify_pass(self, verdict: Verdict, *, scope: str, actor: str) -> None:
        """Record that `verify` over `scope` ("full", or "since" an earlier head) found nothing wrong, through the
        verdict's head, run by `actor` (`status` and `metrics` say when the last one passed). Raises ValueError for a
        verdict that is not ok, and the ledger's own errors (LedgerUnusable on a ledger opened read-only)."""
        from ledger.audit import record_pass

        record_pass(self.conn, verdict, scope=scope, actor=actor, at=self.clock.now())

    def verify(self, *, key: bytes | None = None, expect_head: tuple[int, str] | None = None,
               since: tuple[int, str] | None = None) -> Verdict:
        """Check the whole ledger in one snapshot (`ledger.audit.verify`: the chain, with `key` every event's MAC,
        each step against the event table, the jobs against their replay, the counts, the triggers, the head
        against `expect_head`, the database's integrity), the quota days in the config's time zone; with `since`
        (count, hash: a head an earlier verify printed), only what was appended after that head, and not the
        file's pages. Never raises for a damaged file: what cannot be read is reported in the verdict. Raises
        BadInput when `since` names an event number this ledger does not reach (nothing checked)."""
        from ledger.audit import HeadNotInLedger
        from ledger.audit import verify as verify_ledger

        try:
            return verify_ledger(self.conn, key=key, expect_head=expect_head, timezone=self.config.timezone,
                                 since=since)
        except HeadNotInLedger as e:
            raise BadInput(str(e)) from None

    def policy(self) -> LedgerPolicy:
        """The policy the ledger holds (`ledger.policy.read`): its newest valid policy event, and those ignored."""
        return read_policy(self.conn)

    def owner(self) -> tuple[str, bool]:
        """Who owns the ledger, and whether this process may act as its owner (the owner, root, a superuser)."""
        from ledger.policy import owner as policy_owner

        return policy_owner(self.conn, str(self.name))

    @contextmanager
    def export_snapshot(self) -> Iterator[Anchor]:
        """Run the block in one read transaction and yield the audit head it sees; `export_rows` inside read that
        snapshot (`ledger.export.snapshot`)."""
        from ledger.export import snapshot as export_snapshot

        with export_snapshot(self.conn) as anchor:
            yield anchor

    def export_rows(self, table: str, flt: ExportFilter | None = None) -> Iterator[dict[str, Any]]:
        """The rows of `table` ('jobs' or 'events') `flt` selects, as exported (`ledger.export.rows`); BadInput for
        another table or a filter it cannot take."""
        from ledger.export import rows as export_rows

        return export_rows(self.conn, table, flt)

    # -- triage --------------------------------------------------------------------------------------------------------

    def preview(self, key: JobKey, action: str, actor: str) -> Preview:
        """What `action` on the job `key` would do now and whether `actor` may take it (`ledger.triage.preview`);
        writes nothing. Raises JobNotFound for a job the ledger does not have."""
        from ledger.triage import preview as preview_action

        return preview_action(self.conn, self.config, key, action, actor, self.clock)

    def take(
        self, key: JobKey, action: str, given: Mapping[str, Any], *, actor: str, remote: Remote | None = None,
        unverified: bool = False,
    ) -> Applied | RemoteStatus:
        """Take one job action as `actor` with the input under the action table's field names (`due` in epoch
        seconds): `ledger.triage.take`, the same checks and refusals as the action's own function. A query
        returns the remote's reply, every other action what it applied; `remote` is needed by a query and a
        verified reconcile (`unverified`: a reconcile the remote is not asked about). Raises Refused / BadInput /
        JobNotFound, writing nothing."""
        from ledger.triage import take

        return take(self.conn, self.config, key, action, given, actor=actor, clock=self.clock, remote=remote,
                    unverified=unverified)

    def dry_run(
        self, key: JobKey, action: str, given: Mapping[str, Any], *, actor: str, remote: Remote | None = None,
        unverified: bool = False,
    ) -> Preview:
        """What `take` with this input would do now, and whether it would be allowed, writing nothing
        (`ledger.triage.dry_run`: a reconcile still asks the remote). Raises BadInput for input the action refuses."""
        from ledger.triage import dry_run

        return dry_run(self.conn, self.config, key, action, given, actor=actor, clock=self.clock, remote=remote,
                       unverified=unverified)

    def bulk_assign(
        self, flt: JobFilter | None, owner: str, due_at: float, *, actor: str, reason: str, apply: bool,
        only: Collection[JobKey] | None = None,
    ) -> BulkAssigned:
        """Assign every held job `flt` matches (only those of `only`, when given) to `owner`, due at `due_at`, as
        `actor`, each its own assign event; with `apply` false, count them and write nothing
        (`ledger.triage.bulk_assign`). Raises Refused when `actor` lacks the role, BadInput for bad input."""
        from ledger.triage import bulk_assign

        return bulk_assign(self.conn, self.config, flt, owner, due_at, actor=actor, clock=self.clock, reason=reason,
                           apply=apply, only=only)

    def batch_select(self, flt: JobFilter | None, keys: Sequence[JobKey] = ()) -> list[Job]:
        """The jobs a batch decision acts on: `keys` (marked, in order), else the held jobs `flt` matches
        (`ledger.batch.select`). Raises BadInput for more than `ledger.batch.MAX_BATCH`, JobNotFound for a key."""
        from ledger.batch import select

        return select(self.conn, flt, keys)

    def batch_plan(self, action: str, jobs: Sequence[Job], given: Mapping[str, Any], *, actor: str) -> BatchPlan:
        """Each job's verdict for `action` by `actor` now, and a release's quota cost (`ledger.batch.plan`); writes
        nothing. Raises BadInput for an action a batch does not take or input the action refuses."""
        from ledger.batch import plan

        return plan(self.conn, self.config, action, jobs, given, actor=actor, clock=self.clock)

    def batch_apply(self, action: str, planned: BatchPlan, given: Mapping[str, Any], *, actor: str) -> BatchResult:
        """Take `action` on the jobs `planned` allowed, each its own transaction and event (`ledger.batch.apply`);
        a job refused at its turn is listed, the rest go on."""
        from ledger.batch import apply

        return apply(self.conn, self.config, action, planned, given, actor=actor, clock=self.clock)

    # -- saved views ---------------------------------------------------------------------------------------------------

    def saved_views(self, operator: str) -> list[SavedView]:
        """The views `operator` saved, by name ([] when none)."""
        from ledger.store.views import list_views

        return list_views(self.conn, operator)

    def views(self, operator: str) -> list[SavedView]:
        """The views `operator` can open: the built-in ones their roles give, then those they saved."""
        from ledger.views import builtin_views

        return builtin_views(self.config, operator) + self.saved_views(operator)

    def view(self, operator: str, name: str) -> SavedView:
        """`operator`'s view called `name`, built-in or saved; BadInput when there is none."""
        from ledger.views import builtin_views, get_view

        for view in builtin_views(self.config, operator):
            if view.name == name:
                return view
        return get_view(self.conn, operator, name)

    def save_view(self, operator: str, name: str, group: str, filter_text: str) -> SavedView:
        """Save (or replace) `operator`'s view `name` of `group` under `filter_text`; BadInput for a bad name, group
        or filter."""
        from ledger.views import save_view

        return save_view(self.conn, operator, name, group, filter_text, clock=self.clock)

    def delete_view(self, operator: str, name: str) -> None:
        """Delete `operator`'s saved view `name`; BadInput when there is none."""
        from ledger.views import delete_view

        delete_view(self.conn, operator, name)

    # -- sending (the remotes' SDKs load only when one of these runs) --------------------------------------------------

    def submit(
        self, operation: str, payload: str | dict[str, object], *, actor: str, job_id: str | None = None,
        target: str | None = None, remotes: RemoteCache | None = None,
    ) -> SubmitResult:
        """Reserve the job (committed first), then send it once at once; a duplicate or a refusal sends nothing
        (`ledger.worker.submit_now`)."""
        from ledger.worker import submit_now

        return submit_now(self.conn, self.config, operation, payload, clock=self.clock, job_id=job_id, target=target,
                          actor=actor, remotes=remotes)

    def tick(self, *, progress: Progress | None = None) -> TickReport:
        """One worker pass: recover stale sends, send due jobs, poll, deliver, notify (`ledger.worker.tick`)."""
        from ledger.worker import tick

        return tick(self.conn, self.config, clock=self.clock, progress=progress)

    def run_worker(
        self, stop: threading.Event, *, interval: float = 1.0, on_pass: Callable[[TickReport], None] | None = None,
        on_outage: Callable[[BaseException, float], None] | None = None,
    ) -> int:
        """Run worker passes until `stop` is set, waiting out outages (`ledger.worker.run_worker`); the passes
        run."""
        from ledger.worker import run_worker

        return run_worker(self.conn, self.config, clock=self.clock, stop=stop, interval=interval, on_pass=on_pass,
                          on_outage=on_outage)

    def remotes(self) -> list[RemoteAnswers]:
        """Every declared remote's answers now, by name (`ledger.remote_answers`; no remote is called)."""
        from ledger.remote_answers import answers as remote_answers

        return remote_answers(self.conn, self.config, self.clock.now())

    def resume_remote(self, remote: str, *, actor: str, reason: str) -> None:
        """Lift `remote`'s pause as `actor` (`ledger.remote_health.resume`). Raises BadInput (unknown remote, no
        reason) or Refused (no approver role, not paused), writing nothing."""
        from ledger.remote_health import resume as resume_remote

        resume_remote(self.conn, self.config, remote, actor=actor, reason=reason, now=self.clock.now())

    # -- notifications, evidence, the report ---------------------------------------------------------------------------

    def outbox(self, limit: int = 100) -> list[dict[str, object]]:
        """The notifications, uncertain ones first, then newest (`ledger.dispatch.list_outbox`)."""
        from ledger.dispatch import list_outbox

        return list_outbox(self.conn, limit=limit)

    def settle_notification(self, event_id: str, decision: str, *, actor: str, note: str = "") -> None:
        """Settle the uncertain notification of `event_id` by hand as `actor` (`ledger.dispatch.resolve_uncertain`).
        Raises Refused (no role, not uncertain) or BadInput, writing nothing."""
        from ledger.dispatch import resolve_uncertain

        resolve_uncertain(self.conn, self.config, event_id, decision, actor=actor, clock=self.clock, note=note)

    def orphan_evidence(self, limit: int = 200) -> list[Evidence]:
        """Evidence that names no job of this ledger, the newest `limit`, newest first (`ledger.store`)."""
        return orphan_evidence(self.conn, limit)

    def report(self, since: float, until: float) -> Report:
        """The hold report over [since, until) (`ledger.report.build`); BadInput for a window it refuses."""
        from ledger.report import build as build_report

        return build_report(self.conn, self.config, since, until)

    def write_history(
        self, dest: Path, *, since: float | None = None, until: float | None = None, replace: bool = False,
    ) -> Written:
        """Write the history of [since, until) (all of it without a window) to the new SQLite file `dest`, every
        secret the config names redacted (`ledger.history.write`). Raises BadInput when `dest` exists (and not
        `replace`) or cannot be written; the ledger is only read."""
        from ledger.history import write as write_history
        from ledger.redaction import Redactor

        return write_history(self.conn, self.config, dest, since=since, until=until,
                             redactor=Redactor.from_config(self.config), replace=replace)

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self.close()
