"""Every key binding of the console, in one place, each with an id so a keymap can remap it.

A `[keys]` table in the config TOML maps binding ids to keys, e.g. `"triage.release" = "ctrl+e"`;
`load_keymap()` reads it (the ledger's `Config` ignores it) and the app applies it with `set_keymap`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding

# Group keys, in the order the overview shows the groups.
GROUP_ORDER: tuple[str, ...] = ("reserving", "submitted", "done", "consumed", "held", "failed", "resolved")

APP: list[Binding] = [
    Binding("question_mark", "help", "Help", id="app.help"),
    Binding("o", "overview", "Overview", id="app.overview"),
    Binding("j", "jobs", "Jobs", id="app.jobs"),
    Binding("u", "quotas", "Quotas", id="app.quotas"),
    Binding("R", "report", "Report", id="app.report", show=False),
    Binding("n", "notifications", "Notifications", id="app.notifications"),
    Binding("v", "orphan_evidence", "Orphan evidence", id="app.orphan_evidence", show=False),
    Binding("p", "toggle_pause", "Pause live", id="app.pause"),
    Binding("L", "messages", "Messages", id="app.messages", show=False),
    Binding("ctrl+r", "refresh", "Refresh", id="app.refresh", show=False),
    Binding("colon", "command", "Command", id="app.command"),
    *[
        Binding(str(i), f"group('{group}')", f"{group.capitalize()} jobs", id=f"app.group.{group}", show=False)
        for i, group in enumerate(GROUP_ORDER, start=1)
    ],
]

OVERVIEW: list[Binding] = [
    Binding("t", "triage", "Triage", id="overview.triage"),
    Binding("R", "app.report", "Report", id="overview.report"),
    Binding("h", "focus_held", "Held jobs", id="overview.held", show=False),
    Binding("e", "focus_events", "Events", id="overview.events", show=False),
]

JOBS: list[Binding] = [
    Binding("t", "triage", "Triage", id="jobs.triage"),
    Binding("slash", "filter", "Filter", id="jobs.filter"),
    Binding("s", "toggle_sort", "Flip order", id="jobs.sort"),
    Binding("S", "next_sort", "Sort by next column", id="jobs.next_sort", show=False),
    Binding("w", "views", "Views", id="jobs.views"),
    Binding("W", "save_view", "Save view", id="jobs.save_view", show=False),
    Binding("b", "bulk_assign", "Bulk assign", id="jobs.bulk_assign"),
    Binding("space", "mark", "Mark", id="jobs.mark"),
    Binding("B", "batch", "Batch decide", id="jobs.batch"),
    Binding("right_square_bracket", "next_page", "Next page", id="jobs.next_page"),
    Binding("left_square_bracket", "prev_page", "Prev page", id="jobs.prev_page"),
    Binding("g", "go_matches", "Go to the matches", id="jobs.go_matches", show=False),
    Binding("escape", "back", "Back", id="jobs.back"),
]

JOB: list[Binding] = [
    Binding("t", "triage", "Triage", id="job.triage"),
    Binding("l", "copy_url", "Copy console URL", id="job.copy_url"),
    Binding("y", "copy_link", "Copy job link", id="job.copy_link"),
    Binding("i", "copy('id')", "Copy job id", id="job.copy_id"),
    Binding("k", "copy('idem')", "Copy idem key", id="job.copy_idem"),
    Binding("h", "copy('handle')", "Copy handle", id="job.copy_handle"),
    Binding("escape", "back", "Back", id="job.back"),
]

# Triage: each key only opens a preview whose confirmation defaults to Cancel; nothing acts on one key.
TRIAGE_ACTIONS: dict[str, tuple[str, str]] = {
    # action: (key, label)
    "query": ("r", "Query remote"),
    "finding": ("f", "Record finding"),
    "release": ("e", "Release"),
    "reconcile": ("c", "Reconcile"),
    "reject": ("x", "Reject"),
    "remediate": ("m", "Remediate"),
    "assign": ("a", "Assign"),
}
TRIAGE: list[Binding] = [
    *[
        Binding(key, f"act('{action}')", label, id=f"triage.{action}")
        for action, (key, label) in TRIAGE_ACTIONS.items()
    ],
    Binding("l", "copy_url", "Copy console URL", id="triage.copy_url"),
    Binding("escape", "back", "Back", id="triage.back"),
]

NOTIFICATIONS: list[Binding] = [
    Binding("c", "settle('confirmed')", "Confirmed received", id="notifications.confirmed"),
    Binding("s", "settle('resend')", "Sent by other route", id="notifications.resend"),
    Binding("escape", "back", "Back", id="notifications.back"),
]

QUOTAS: list[Binding] = [
    Binding("escape", "back", "Back", id="quotas.back"),
]

REPORT: list[Binding] = [
    Binding("escape", "back", "Back", id="report.back"),
]

EVIDENCE: list[Binding] = [
    Binding("escape", "back", "Back", id="evidence.back"),
]

CONFIRM: list[Binding] = [
    Binding("y", "confirm", "Confirm", id="confirm.yes"),
    Binding("n", "cancel", "Cancel (no)", id="confirm.no"),
    Binding("escape", "cancel", "Cancel", id="confirm.cancel"),
]

COMMAND: list[Binding] = [
    Binding("escape", "cancel", "Close", id="command.cancel"),
    Binding("tab", "complete", "Complete", id="command.complete", priority=True),
]

PICK: list[Binding] = [
    Binding("escape", "cancel", "Cancel", id="pick.cancel"),
]

FORM: list[Binding] = [
    Binding("escape", "cancel", "Cancel", id="form.cancel"),
]

MESSAGES: list[Binding] = [
    Binding("escape", "close", "Close", id="messages.close"),
]

HELP: list[Binding] = [
    Binding("escape,question_mark,q", "close", "Close", id="help.close"),
]

SCOPES: dict[str, list[Binding]] = {
    "Everywhere": APP,
    "Overview": OVERVIEW,
    "Job list": JOBS,
    "Job": JOB,
    "Triage": TRIAGE,
    "Notifications": NOTIFICATIONS,
    "Quotas": QUOTAS,
    "Report": REPORT,
    "Orphan evidence": EVIDENCE,
    "Confirmation": CONFIRM,
    "Command line": COMMAND,
    "Choose a job or view": PICK,
    "Save view, bulk, batch": FORM,
    "Message log": MESSAGES,
    "Help": HELP,
}

BINDING_IDS: frozenset[str] = frozenset(b.id for bs in SCOPES.values() for b in bs if b.id)


@dataclass(frozen=True)
class Keymap:
    """Key overrides by binding id, and what was wrong with the `[keys]` table (shown, never fatal)."""

    keys: dict[str, str]
    problems: tuple[str, ...] = ()
    source: Path | None = None


def config_file_for(base_dir: Path | None, explicit: str | Path | None = None) -> Path | None:
    """The TOML file to read `[keys]` from: explicit, else $RECLAIM_CONFIG, else reclaim.toml in base_dir."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("RECLAIM_CONFIG")
    if env:
        return Path(env)
    if base_dir is not None and (base_dir / "reclaim.toml").is_file():
        return base_dir / "reclaim.toml"
    return None


def parse_keymap(raw: object, source: Path | None = None) -> Keymap:
    """Validate a `[keys]` table: known binding ids mapping to non-empty key strings."""
    if raw is None:
        return Keymap({}, (), source)
    if not isinstance(raw, dict):
        return Keymap({}, ("config key keys: must be a table of binding id = key",), source)
    keys: dict[str, str] = {}
    problems: list[str] = []
    for bid, key in raw.items():
        if bid not in BINDING_IDS:
            problems.append(f"config key keys.{bid}: unknown binding id (see '?' for the ids)")
        elif not isinstance(key, str) or not key.strip():
            problems.append(f"config key keys.{bid}: expected a key such as \"ctrl+e\"")
        else:
            keys[bid] = key.strip()
    return Keymap(keys, tuple(problems), source)


def load_keymap(path: Path | None) -> Keymap:
    """Read the `[keys]` table from the raw TOML file at `path` (missing file or table: no overrides)."""
    if path is None:
        return Keymap({})
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Keymap({}, (), path)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        return Keymap({}, (f"config file {path}: keys not loaded ({e})",), path)
    return parse_keymap(raw.get("keys"), path)


def key_for(binding: Binding, keymap: dict[str, str]) -> str:
    """The key(s) a binding answers to once `keymap` is applied, for display."""
    return keymap.get(binding.id or "", binding.key)
