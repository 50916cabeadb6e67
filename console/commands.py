"""The console's command mode (`:`): what an operator may type there, parsed without Textual or the ledger.

    :held                    the held jobs
    :job <id> [operation]    open any job by id (when several operations share the id, pick one); a part of an id
                             finds the jobs of any group whose id begins with it, then those that hold it
    :view <name>             a saved view (`reclaim views --save NAME ...`); `:view` alone lists yours
    :owner me | <name>       the job list filtered to one owner

`parse_command()` turns the typed line into a `Command` or raises `CommandError` with a one-line message the
console shows as it is. `job_candidates()` lists the (job id, operation) readings of `:job`'s argument, the
whole argument as an id first, for the app to look up in the ledger.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

COMMANDS: dict[str, str] = {
    "held": ":held — the held jobs",
    "job": ":job <id> [operation] — open any job by id or a part of it (Tab completes)",
    "view": ":view <name> — one of your saved views (:view alone lists them)",
    "owner": ":owner me|<name> — jobs owned by you or by someone",
}
"""Every command, with its one-line help (the command line's hint and suggestions use these)."""

MATCHES = 20
"""At most this many jobs are offered for a part of an id typed after `:job` (a picker, Tab's completions)."""

USAGE = "commands: :held, :job <id> [operation], :view <name>, :owner me"


class CommandError(ValueError):
    """The typed line is not a command the console knows, or lacks what the command needs."""


@dataclass(frozen=True)
class Command:
    """One parsed command: its name and the rest of the line (stripped)."""

    name: str
    rest: str = ""


def parse_command(text: str) -> Command:
    """Parse ':job article today #07' (the leading ':' is optional) into a Command."""
    line = text.strip()
    if line.startswith(":"):
        line = line[1:].lstrip()
    if not line:
        raise CommandError(f"type a command after ':' ({USAGE})")
    name, _, rest = line.partition(" ")
    name, rest = name.lower(), rest.strip()
    if name not in COMMANDS:
        raise CommandError(f"unknown command ':{name}' ({USAGE})")
    if name == "held" and rest:
        raise CommandError(f"':held' takes nothing after it (to filter, use / in the job list): {rest!r}")
    if name == "job" and not rest:
        raise CommandError("':job' needs a job id: :job <id> [operation]")
    if name == "owner":
        if not rest or len(rest.split()) != 1:
            raise CommandError("':owner' needs one name: :owner me, or :owner alice")
    return Command(name, rest)


def job_candidates(rest: str, operations: Iterable[str]) -> list[tuple[str, str | None]]:
    """The readings of `:job`'s argument, most literal first: (job id, operation or None for any operation).

    Job ids may hold spaces, so `article today #07` is first read as one id; when its last word is a declared
    operation, `id operation` is the next reading. A quoted id (`"a b" article.generate`) is read as written.
    """
    known = set(operations)
    if rest[:1] in ("'", '"'):
        try:
            words = shlex.split(rest)
        except ValueError:
            words = []
        if len(words) == 1:
            return [(words[0], None)]
        if len(words) == 2:
            return [(words[0], words[1])]
    out: list[tuple[str, str | None]] = [(rest, None)]
    head, _, last = rest.rpartition(" ")
    if head.strip() and last in known:
        out.append((head.strip(), last))
    return out


def common_prefix(ids: Iterable[str]) -> str:
    """The longest text every one of `ids` begins with ('' for none)."""
    ids = list(ids)
    if not ids:
        return ""
    first, last = min(ids), max(ids)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def completion(typed: str, ids: list[str]) -> str:
    """What Tab turns `typed` (a part of a job id) into, given the ids that match it (those that begin with it
    first): the longest common beginning of those that begin with it, when that is longer than `typed`; else the
    next id after `typed` among `ids` (cycling; the first when `typed` is none of them); `typed` when none match."""
    if not ids:
        return typed
    starting = [i for i in ids if i.startswith(typed)]
    common = common_prefix(starting)
    if len(common) > len(typed):
        return common
    if typed in ids:
        return ids[(ids.index(typed) + 1) % len(ids)]
    return ids[0]
