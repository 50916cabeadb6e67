"""How the job and triage screens read their job: the ledger first (drawn as soon as it lands), then what the job's
remote can answer (from the config and the ledger: no adapter is built and no SDK imported; only an action that
asks the remote builds one, in its own worker)."""

from __future__ import annotations

from textual.message import Message
from textual.worker import get_current_worker

from console.live import READ_ONLY_REASON
from console.screens.base import ReclaimScreen
from ledger import JobDetail, JobKey


class JobRead(Message):
    """The job's detail arrived (None when it is not in the ledger). Each screen subclasses it (its own handler)."""

    def __init__(self, detail: JobDetail | None) -> None:
        self.detail = detail
        super().__init__()


class RemoteAnswer(Message):
    """What the job's remote can answer, in sentences (it follows `JobRead`). Each screen subclasses it."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__()


def read_job_then_remote(
    screen: ReclaimScreen, key: JobKey, loaded: type[JobRead], answered: type[RemoteAnswer], *,
    with_previews: bool = False,
) -> None:
    """From a thread worker of `screen`: read `key` (and, `with_previews`, a preview of every triage action for the
    operator) and post `loaded(detail)`; then post `answered(lines)`: what the job's remote can answer, ending with what
    `reclaim remotes` says beyond it (each thing once), read from the config and the ledger without building the adapter (no SDK imported).
    Nothing is posted once the worker is cancelled, nor a remote for a job not in the ledger."""
    app = screen.reclaim
    worker = get_current_worker()
    with app.ledger() as ledger:  # one connection for both reads
        detail = ledger.job_detail(key, operator=app.operator,
                                   refused_because=READ_ONLY_REASON if app.source.read_only else None,
                                   with_previews=with_previews, with_remote=False)
        if worker.is_cancelled:
            return
        screen.post_message(loaded(detail))
        if detail is None:
            return
        lines = ledger.remote_lines(detail.job)
    if detail.answers is not None:
        lines.append(detail.answers.beyond_capabilities())  # the rest of `reclaim remotes`' line is said above
    if not worker.is_cancelled:
        screen.post_message(answered(lines))
