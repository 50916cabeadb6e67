"""The one table of operator actions: who may take each, on which states, what must be typed, what it does.

Each `Action` names its role, the event it writes (whose entry in the event table, ledger.event_table, says the job
states it applies to), its required `Field`s in the order a person is asked for them (every write records why:
a finding its note, assign / release / reconcile / reject a reason, remediate its note), the preview text, and
the words of its refusals. The ledger's triage functions refuse
with these words, the CLI builds its triage commands (options, help, `--dry-run`) from this table, and the
console's form asks for the same fields with the same rules. No SQL here, and nothing but plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ledger.errors import BadInput
from ledger.event_table import KINDS, starts_of

FINDING_CATEGORIES = ("not_received", "in_progress", "completed_reply_lost", "cannot_determine", "changed_by_other")
ASK_REASON = "write a reason first: every decision records why"


@dataclass(frozen=True)
class Field:
    """One thing a person must type for an action: its name, its CLI option, and what to say when it is missing."""

    name: str
    """The input's key (`category`, `note`, `reason`, `handle`, `owner`, `due`)."""
    option: str
    """The CLI option that carries it, e.g. `--reason`."""
    ask: str
    """What the console says when it is missing (a prompt)."""
    why: str
    """What the refusal advises writing."""
    help: str
    """The CLI option's help."""
    choices: tuple[str, ...] = ()
    """The only values it may take, when it is a choice (the finding's category)."""

    def missing_text(self) -> str:
        """The one-line refusal for a blank value, naming the field and its option."""
        return f"{self.name} ({self.option}): required; {self.why}"

    def problem(self, value: object) -> str | None:
        """The refusal for `value` (blank, holding a NUL character, or not one of `choices`), or None when it
        will do."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return self.missing_text()
        if isinstance(value, str) and "\x00" in value:
            return f"{self.name} ({self.option}): holds a NUL character (\\x00), which a ledger cannot store; remove it"
        if self.choices and value not in self.choices:
            return f"{self.name} ({self.option}) {value!r}: unknown; use one of {', '.join(self.choices)}"
        return None


@dataclass(frozen=True)
class Action:
    """One operator action: role, states, required fields, preview text, and its refusals' words."""

    name: str
    role: str
    verb: str
    """Completes "... lacks the approver role needed to <verb>"."""
    fields: tuple[Field, ...]
    """Required, in the order they are asked for."""
    summary: str
    """What it does, as every preview shows it."""
    help: str
    """The CLI command's help."""
    event: str
    """The event it writes on the job."""
    flags: tuple[tuple[str, str, str], ...] = ()
    """Extra CLI switches: (parameter, option, help)."""
    detailed: str = ""
    """The summary with the job's own figures, when they are known (a format string)."""
    waits_for_arrival: bool = False
    """Refused (for now) while the held job's last request could still reach the remote (ledger.triage)."""
    only: tuple[str, ...] | None = None
    """Narrower than its event allows: only jobs in these states."""
    unverified: str = ""
    """The summary when taken with --unverified (the one path that then runs), for an action with that flag."""

    @property
    def states(self) -> tuple[str, ...] | None:
        """The job states it applies to (None: any): those its event may start from (ledger.event_table), or `only`."""
        return self.only if self.only is not None else starts_of(self.event)

    def role_refusal(self, actor: str) -> str:
        """Why `actor`, lacking the role, may not take this action."""
        return (f"{actor} lacks the {self.role} role needed to {self.verb} "
                "(roles come from [operators] in the config)")

    def state_refusal(self, state: str) -> str | None:
        """Why the action does not apply to a job in `state`, or None when it does."""
        if self.states is None or state in self.states:
            return None
        return f"the job is {state}; {self.name} applies to {' or '.join(self.states)} jobs"

    def missing(self, given: Mapping[str, object]) -> Field | None:
        """The first required field `given` lacks (or gives a value it may not take), or None."""
        for f in self.fields:
            if f.problem(given.get(f.name)) is not None:
                return f
        return None

    def require(self, given: Mapping[str, object]) -> None:
        """Raise BadInput naming the first required field `given` lacks (or has wrong); return when all are there."""
        for f in self.fields:
            problem = f.problem(given.get(f.name))
            if problem is not None:
                raise BadInput(f"{self.name}: {problem}")

    def describe(self, given: Mapping[str, object]) -> list[str]:
        """The person's own words for a confirmation or a dry run: one `name: value` line per required field."""
        return [f"{f.name}: {given.get(f.name, '')}" for f in self.fields]

    def preview_text(self, **facts: object) -> str:
        """The summary, with the job's figures filled in when they are all given."""
        if self.detailed and facts:
            try:
                return self.detailed.format(**facts)
            except KeyError:
                pass
        return self.summary


def _reason(why: str) -> Field:
    return Field("reason", "--reason", ASK_REASON, why, "Why (recorded with the action; required).")


_CATEGORY = Field("category", "--category", "choose a finding category first",
                  f"choose one of {', '.join(FINDING_CATEGORIES)}",
                  "What you found (required): " + ", ".join(FINDING_CATEGORIES) + ".", FINDING_CATEGORIES)
_OWNER = Field("owner", "--owner", "type an owner first", "name the person who will see this through",
               "Who sees it through (required).")
_DUE = Field("due", "--due", "type a due time first (e.g. 4h)",
             "give a time such as 2h, 30m, tomorrow 09:00 or 2026-12-03T09:00Z",
             "When (required): 2h, 30m, 2d, 'tomorrow 09:00' (the config's time zone), or an ISO time such as "
             "2026-12-03T09:00Z.")

ACTIONS: dict[str, Action] = {a.name: a for a in (
    Action(
        "query", "triage", "query the remote", (),
        "asks the remote about this job (a read; nothing is sent) and records the reply",
        "Ask the remote side about a job (a read) and record its reply as an event (triage).",
        "remote_query",
    ),
    Action(
        "finding", "triage", "record a finding",
        (_CATEGORY, Field("note", "--note", "write a note: what you saw and where", "say what you saw and where",
                          "What you saw, and where (required).")),
        "records what you found; nothing is sent",
        "Record what you found about a held job (triage).",
        "finding",
    ),
    Action(
        "assign", "triage", "assign an owner",
        (_reason("say why this owner and due time"), _OWNER, _DUE),
        "sets the owner and due time; nothing is sent",
        "Give a held job an owner and a due time (triage).",
        "assign",
    ),
    Action(
        "release", "approver", "release",
        (_reason("say why it may be sent again (what the finding showed)"),),
        "sends 1 new request",
        "Re-submit a held job: a new attempt with the same idem key, sent by the next pass (approver).",
        "release",
        detailed="sends 1 new request to {remote} (attempt {attempt}, same idem key); "
                 "{operation} quota today {used}/{limit} -> {after}/{limit}",
        waits_for_arrival=True,
    ),
    Action(
        "reconcile", "approver", "reconcile",
        (_reason("say where you saw that the remote ran it"),
         Field("handle", "--handle", "type the remote's handle for this job first",
               "the remote's id for this job (from 'reclaim query' or the remote's console), or evidence:ID "
               "to take it from an evidence record ('reclaim evidence --orphans')",
               "The remote's id for this job (required).")),
        "asks the remote whether the handle carries this job's idem key, then attaches it and marks the job "
        "submitted; nothing is sent",
        "The remote did run it: verify the handle carries this job's idem key, attach it, move to submitted; "
        "nothing is sent (approver).",
        "reconcile",
        flags=(("unverified", "--unverified", "Attach without asking the remote (it cannot be asked)."),),
        unverified="attaches the handle without asking the remote (recorded as unverified) and marks the job "
                   "submitted; nothing is sent",
    ),
    Action(
        "reject", "approver", "reject",
        (_reason("say why the job is closed without re-sending"),),
        "closes the job as rejected; nothing is sent",
        "Close a held job without re-sending (approver).",
        "reject",
        waits_for_arrival=True,
    ),
    Action(
        "remediate", "approver", "remediate",
        (Field("note", "--note", "write a note first: what was done instead and where it is recorded",
               "say what was done instead and where it is recorded",
               "What was done instead, and where it is recorded (required)."),),
        "closes the job as remediated by other means; nothing is sent",
        "Close a held job as done by another allowed means (approver).",
        "remediate",
        waits_for_arrival=True,
    ),
    Action(
        "dismiss-candidate", "triage", "dismiss a candidate",
        (Field("evidence", "--evidence", "type the candidate's evidence id first",
               "the id of the orphan evidence that is not this job's (listed by 'reclaim show JOB')",
               "The candidate's evidence id, as 'reclaim show JOB' lists it (required)."),
         _reason("say how you know it is not this job's (e.g. another model or time in the remote's console)")),
        "records that this orphan delivery is not this job's (it is no longer a candidate); nothing is sent",
        "Record that an orphan delivery listed as a candidate is not this held job's own, so a release need not wait "
        "for it (triage).",
        "candidate_dismissed",
    ),
    Action(
        "bulk-assign", "triage", "assign owners",
        (_reason("say why these jobs go to this owner"), _OWNER, _DUE),
        "sets the owner and due time of every matching held job; nothing is sent (never a release)",
        "Assign an owner and due time to every held job matching a filter (a safe bulk action; never a release).",
        "assign",
        only=("held",),
    ),
)}

JOB_ACTIONS = ("query", "finding", "dismiss-candidate", "assign", "release", "reconcile", "reject", "remediate")
"""The actions on one job, in the order triage takes them (bulk-assign acts on many)."""
DECISIONS = frozenset(a.name for a in ACTIONS.values() if KINDS[a.event].bumps_epoch)
"""The actions that decide a held job's fate: each fences whatever was in flight for the old state (its event bumps
the epoch)."""


def action(name: str) -> Action:
    """The action called `name`; BadInput listing the actions for any other name."""
    try:
        return ACTIONS[name]
    except KeyError:
        raise BadInput(f"action {name!r}: unknown (actions: {', '.join(ACTIONS)})") from None
