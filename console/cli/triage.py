"""The held-job actions (query, finding, assign, release, reconcile, reject, remediate, ...), one command each,
built from the ledger's action table, `bulk-assign`, and `batch` (one finding or decision for many held jobs)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from console import output
from console.cli.common import (
    OperationOpt,
    Session,
    command,
)
from ledger import (
    ACTION_TABLE,
    BATCH_ACTIONS,
    EXIT_REFUSED,
    BadInput,
    Job,
    JobFilter,
    Preview,
    Refused,
    check_action_input,
    iso,
)
from ledger import ActionField as Field

PANEL = "Held jobs"
"""Where `reclaim --help` lists this module's commands."""

DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print what it would do and whether you may, and write nothing (exit 0 allowed, 6 refused).")]


def _field_option(field: Field) -> Any:
    """The typer annotation for one of the action table's fields: a text option, blank by default (a blank one
    is refused in one line naming the option, by the table's rule, not by click's usage error)."""
    return Annotated[str, typer.Option(field.option, help=field.help)]


def _triage_command(name: str) -> Callable[..., None]:
    """The `reclaim NAME JOB_ID` command of the job action `name`: its options are the table's required fields,
    its flags, --operation, --dry-run and (added by `command`) the common ones; every run goes through `_take`."""
    spec = ACTION_TABLE[name]
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("s", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Session),
              inspect.Parameter("job_id", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=Annotated[str, typer.Argument(help="The job id.")])]
    params += [inspect.Parameter(f.name, kw, default="", annotation=_field_option(f)) for f in spec.fields]
    params.append(inspect.Parameter("operation", kw, default=None, annotation=OperationOpt))
    params += [inspect.Parameter(flag, kw, default=False, annotation=Annotated[bool, typer.Option(option, help=what)])
               for flag, option, what in spec.flags]
    params.append(inspect.Parameter("dry_run", kw, default=False, annotation=DryRunOpt))

    def action(s: Session, **options: Any) -> None:
        _take(name, s, options)

    action.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    action.__name__ = name
    action.__doc__ = (f"{spec.help}\n\nIt {spec.summary}. With --dry-run it says that, and whether you may, and "
                      "writes nothing.")
    return action


def _take(name: str, s: Session, options: dict[str, Any]) -> None:
    """Run one job action from the CLI: the table's required fields first (one line naming the option), then the
    ledger function itself (or, with --dry-run, `triage.dry_run` on a read-only connection)."""
    from ledger import RemoteCache, parse_due

    spec = ACTION_TABLE[name]
    as_json, dry = s.as_json, options["dry_run"]
    unverified = bool(options.get("unverified", False))
    given: dict[str, Any] = {f.name: options[f.name] for f in spec.fields}
    check_action_input(name, given)
    opened = s.open_ledger(readonly=dry)
    cfg, clock = opened.config, opened.clock
    if "due" in given:
        given["due"] = parse_due(given["due"], clock.now(), cfg.timezone, name="--due")
    actor = s.actor(cfg)
    key = opened.key_of(options["job_id"], options["operation"])
    asks = (name == "reconcile" and not unverified) or (name == "query" and not dry)
    remote = RemoteCache(cfg).for_operation(key.operation) if asks else None
    if dry:
        would = opened.dry_run(key, name, given, actor=actor, remote=remote, unverified=unverified)
    else:
        result = opened.take(key, name, given, actor=actor, remote=remote, unverified=unverified)
    job = opened.job(key)
    left = opened.candidates(job) if name == "dismiss-candidate" and not dry else []
    doc: dict[str, Any] = {"job_id": key.job_id, "operation": key.operation, "state": job.state,
                           "attempt": job.attempt}
    if dry:
        shown = {**given, **({"due": iso(given["due"])} if "due" in given else {})}
        _print_dry_run(name, doc, would, spec.describe(shown), shown, as_json)
        raise typer.Exit(0 if would.allowed else EXIT_REFUSED)
    doc.update(_what_was_done(name, actor, given, result, job, unverified))
    if name == "dismiss-candidate":
        doc["candidates_left"] = [c.evidence_id for c in left]
    if name == "query" and remote is not None:
        doc["can_answer"] = remote.capabilities.explain()
    if as_json:
        output.emit_json(doc)
    else:
        from console.words import action_line

        output.line(action_line(name, {**doc, "due_at": given.get("due")}, now=clock.now(), tz=cfg.timezone))


def _what_was_done(name: str, actor: str, given: dict[str, Any], result: Any, job: Job,
                   unverified: bool) -> dict[str, Any]:
    """The facts a triage command reports after writing (its `--json` document beyond the job's key and state):
    the action, who took it, the event it wrote, and what was recorded (a query: what the remote said)."""
    doc: dict[str, Any] = {"action": name, "actor": actor}
    if name == "query":
        return {**doc, "remote_state": result.state, "handle": result.handle, "error": result.error,
                "asked": result.snapshot.get("asked", True) is not False}
    doc["event_id"] = result.event_id
    if name == "finding":
        doc.update(category=given["category"], note=given["note"])
    elif name == "assign":
        doc.update(owner=given["owner"], due=iso(given["due"]), reason=given["reason"])
    elif name == "reconcile":
        doc.update(handle=job.handle, verified=not unverified, reason=given["reason"])
    elif name == "remediate":
        doc.update(note=given["note"])
    elif name == "dismiss-candidate":
        doc.update(evidence_id=int(str(given["evidence"]).strip().removeprefix("evidence:")), reason=given["reason"])
    else:
        doc.update(reason=given["reason"])
    return doc


def _print_dry_run(name: str, doc: dict[str, Any], would: Preview, words: list[str], given: dict[str, Any],
                   as_json: bool) -> None:
    """A dry run's answer: what the action would do (the console's preview text), the input, and whether it
    would be allowed or why not."""
    if as_json:
        output.emit_json({**doc, "action": name, "dry_run": True, "would": would.summary, "allowed": would.allowed,
                          "refusal": would.reason, "input": given})
        return
    output.line(f"dry run: {name} {doc['job_id']} / {doc['operation']} ({doc['state']}); nothing was written")
    output.line(f"would: {would.summary}")
    for said in words:
        output.line(f"  {said}")
    output.line("allowed" if would.allowed else f"refused: {would.reason}")


for _name in ("query", "finding", "dismiss-candidate", "assign"):
    command(PANEL, name=_name)(_triage_command(_name))

_BULK = {f.name: f for f in ACTION_TABLE["bulk-assign"].fields}
BulkOwnerOpt = _field_option(_BULK["owner"])
BulkDueOpt = _field_option(_BULK["due"])
BulkReasonOpt = _field_option(_BULK["reason"])


@command(PANEL, name="bulk-assign", help=ACTION_TABLE["bulk-assign"].help + "\n\nWithout --yes it only says how many "
         "jobs would change, and writes nothing.")
def bulk_assign(
    s: Session,
    owner: BulkOwnerOpt = "",
    due: BulkDueOpt = "",
    filter_text: Annotated[str, typer.Option("--filter", help="Which held jobs, e.g. 'op:storage.* bucket-a'.")] = "",
    yes: Annotated[bool, typer.Option("--yes", help="Do it; without --yes only the count is shown.")] = False,
    reason: BulkReasonOpt = "",
) -> None:
    from ledger import parse_due

    check_action_input("bulk-assign", {"reason": reason, "owner": owner, "due": due})
    opened = s.open_ledger(readonly=not yes)
    due_at = parse_due(due, opened.clock.now(), opened.config.timezone, name="--due")
    me = s.actor(opened.config)
    flt = JobFilter.parse(filter_text, me=me, now=opened.clock.now())
    done = opened.bulk_assign(flt, owner, due_at, actor=me, reason=reason, apply=yes)
    doc = {"matched": len(done.matched), "assigned": done.assigned, "owner": owner, "due": iso(due_at)}
    if s.as_json:
        output.emit_json(doc)
    elif yes:
        output.line(f"assigned {done.assigned} held jobs to {owner}, due {iso(due_at)}")
    else:
        output.line(f"would assign {len(done.matched)} held jobs to {owner}, due {iso(due_at)}; run again with --yes")


for _name in ("release", "reconcile", "reject", "remediate"):
    command(PANEL, name=_name)(_triage_command(_name))


_BATCH_FIELDS = {name: {f.name: f for f in ACTION_TABLE[name].fields} for name in BATCH_ACTIONS}
_BATCH_OPTIONS = {"reason": "--reason", "note": "--note", "category": "--category"}


@command(PANEL, name="batch", help=(
    "Record one finding for many held jobs, or release, reject or remediate them, in one reviewed plan.\n\n"
    "The jobs are the held jobs --filter matches (e.g. 'reason:503 op:gemini.* since:1h'), or those named by --job. "
    "Without --yes it prints the plan and writes nothing: every job, allowed or refused and why (four-eyes, "
    "evidence, a request that could still arrive), and what the releases cost each quota today. With --yes each "
    "allowed job gets its own action and event, with the same checks as one job's command; a job that changed since "
    "is refused and listed. Exit 0 when every job was (or would be) acted on, 6 when any was refused."))
def batch(
    s: Session,
    action: Annotated[str, typer.Argument(help=f"What to do: {', '.join(BATCH_ACTIONS)}.")],
    filter_text: Annotated[str, typer.Option("--filter", help="Which held jobs (the typed filter of 'reclaim jobs').")] = "",
    jobs: Annotated[list[str] | None, typer.Option("--job", help="A job id (repeat it); instead of --filter.")] = None,
    operation: OperationOpt = None,
    reason: Annotated[str, typer.Option("--reason", help="Why (release, reject): recorded with each job's event.")] = "",
    note: Annotated[str, typer.Option("--note", help="What was found (finding) or done instead (remediate).")] = "",
    category: Annotated[str, typer.Option("--category", help="The finding's category (finding).")] = "",
    dry_run: DryRunOpt = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do it; without --yes only the plan is printed.")] = False,
) -> None:
    given = _batch_input(action, {"reason": reason, "note": note, "category": category})
    if dry_run and yes:
        raise BadInput("--dry-run and --yes: give one (--dry-run prints the plan, --yes acts on it)")
    if jobs and filter_text.strip():
        raise BadInput("--job and --filter: give one (the named jobs, or the held jobs the filter matches)")
    check_action_input(action, given)
    opened = s.open_ledger(readonly=not yes)
    me = s.actor(opened.config)
    keys = [opened.key_of(j, operation) for j in jobs or []]
    flt = JobFilter.parse(filter_text, me=me, now=opened.clock.now()) if filter_text.strip() else None
    if operation and flt is None and not keys:
        flt = JobFilter(operation=operation)
    selected = opened.batch_select(flt, keys)
    if not selected:
        raise Refused("no held job matches" + (f" the filter {filter_text!r}" if filter_text.strip() else "")
                       + "; nothing was written")
    planned = opened.batch_plan(action, selected, given, actor=me)
    result = opened.batch_apply(action, planned, given, actor=me) if yes else None
    from console.words import batch_doc, batch_done_line, batch_plan_lines

    doc = batch_doc(action, me, planned, result)
    if s.as_json:
        output.emit_json(doc)
    else:
        for said in batch_plan_lines(doc)[:-1] if yes else batch_plan_lines(doc):
            output.line(said)
        output.line(batch_done_line(doc) if yes else "nothing was written; run again with --yes to do it")
    if not all(j["allowed"] for j in doc["jobs"]):
        raise typer.Exit(EXIT_REFUSED)


def _batch_input(action: str, typed: dict[str, str]) -> dict[str, str]:
    """The input `action` takes, from the options typed; an option it does not take is refused (BadInput naming
    it and the ones it takes), as is an action a batch does not take."""
    if action not in BATCH_ACTIONS:
        raise BadInput(f"batch {action!r}: not a batch action; give one of {', '.join(BATCH_ACTIONS)}")
    takes = _BATCH_FIELDS[action]
    for name, value in typed.items():
        if value and name not in takes:
            wanted = " and ".join(_BATCH_OPTIONS[n] for n in takes)
            raise BadInput(f"{_BATCH_OPTIONS[name]}: batch {action} does not take it; it takes {wanted}")
    return {name: typed[name] for name in takes}
