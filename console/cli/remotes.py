"""The remotes: `remotes` (what the ledger knows of each, read-only) and `remotes probe` (check an assumption)."""

from __future__ import annotations

from typing import Annotated

import typer

from console import output
from console.cli.common import (
    Session,
    app,
    command,
    with_session,
    within,
)
from ledger import (
    EXIT_PROBE_FAILED,
    PROBE_WAIT_SECONDS,
    iso,
)

PANEL = "Remotes"
"""Where `reclaim --help` lists this module's commands."""

remotes_app = typer.Typer(add_completion=False)
app.add_typer(remotes_app, name="remotes", rich_help_panel=PANEL)


@remotes_app.callback(invoke_without_command=True)
@with_session()
def remotes_cmd(ctx: typer.Context, s: Session) -> None:
    """What each remote can answer: lookup by key or by handle, idem key honoured, webhooks, record retention,
    paused or not, last probe, last answer (read-only; no remote is called). `remotes probe NAME` checks a
    gemini remote's assumptions against the live service."""
    if ctx.invoked_subcommand is not None:
        return

    with s.open_ledger(readonly=True) as opened:
        found = opened.remotes()
    if s.as_json:
        output.emit_json({"remotes": [a.to_dict() for a in found]})
        return

    def when(ts: float | None) -> str:
        return iso(ts) if ts is not None else "-"

    for a in found:
        output.table(f"remote {a.name} ({a.kind}): what it can answer", ["question", "answer"], [
            ["operations", ", ".join(a.operations) or "-"],
            ["look a job up", a.lookup],
            ["idem key honoured", "yes" if a.dedupes_by_key else "no (a repeat may run twice)"],
            ["webhooks", a.webhooks + (f", last {iso(a.last_webhook_at)}" if a.last_webhook_at else "")],
            ["keeps records", f"{a.keeps_records_days} days" if a.keeps_records_days else "not declared"],
            ["paused", f"since {iso(a.paused_at)}: {a.pause_reason}" if a.paused and a.paused_at else "no"],
            ["last probe / next", f"{when(a.last_probe_at)} / {when(a.next_probe_at)}"],
            ["last answer", f"{when(a.last_answer_at)} ({a.last_answer_source})" if a.last_answer_at else "-"],
        ])


PROBE_WAIT_LIMIT = 3600.0
"""The longest --wait `remotes probe` takes (seconds)."""


@command(name="probe", on=remotes_app, options=("ledger", "config", "json"))
def remotes_probe_cmd(
    s: Session,
    name: Annotated[str, typer.Argument(help="The gemini remote to probe, by its name in the config.")],
    wait: Annotated[float, typer.Option(
        "--wait", help="Seconds to wait for the webhook delivery to reach the ledger (a remote with "
        "webhook_secret_env; `reclaim receiver` must be running).")] = PROBE_WAIT_SECONDS,
) -> None:
    """Check against the live remote every assumption reclaim makes of it: costs one tiny interaction.

    One create (a tiny input, background, labelled with a fresh probe-... idem key that names no job; never
    retried), cancelled at once, a GET of it, a GET of an id that does not exist, and with a webhook configured
    the wait for its delivery through `reclaim receiver`. Prints each assumption (create accepted with labels,
    GET echoes labels, statuses, cancel, error body, delivery, envelope, signature) as holds / does not hold /
    unknown, and whether this config relies on it. Reserves nothing and writes nothing to the ledger.

    Exit 0 when every assumption this config relies on holds, 13 when one does not (or could not be seen),
    2 for a remote that is not declared or not a gemini one (nothing sent)."""
    from ledger import probe_remote

    within("--wait", wait, 0, PROBE_WAIT_LIMIT)
    # An undeclared or non-gemini remote, a missing key, or (with a webhook) an unreadable ledger is refused
    # before anything is sent.
    report = probe_remote(s.load(), name, ledger=s.ledger, wait_seconds=wait, notice=output.notice)
    failing = [a.name for a in report.failing]
    if s.as_json:
        output.emit_json(report.to_dict())
    else:
        output.table(f"remote {report.remote}: what reclaim assumes (probe {report.idem_key}, interaction "
                     f"{report.handle or '-'})", ["assumption", "verdict", "relied on", "seen"],
                     [[a.name, a.verdict, "yes" if a.relied_on else "no", a.seen] for a in report.assumptions])
        if failing:
            output.line(f"not holding, and this config relies on it: {'; '.join(failing)}")
        else:
            output.line("every assumption this config relies on holds")
    raise typer.Exit(EXIT_PROBE_FAILED if failing else 0)
