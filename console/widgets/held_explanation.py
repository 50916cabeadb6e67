"""Why a job is held, in the words of the three cases: not delivered, delivered and running, reply lost."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from console.sanitize import safe_text
from console.times import full_time
from ledger import HELD_CASES, JobDetail


def candidate_lines(detail: JobDetail, tz: str = "UTC") -> Text:
    """The orphan deliveries that could be the held job's own, one line each, and how to decide them."""
    found = detail.candidates
    text = Text()
    text.append(f"\nCandidates: {len(found)} orphan deliver{'y' if len(found) == 1 else 'ies'} could be this job's own "
                "(same remote, within its send window); release waits until each is decided:", style="bold yellow")
    for c in found:
        text.append(f"\n  evidence:{c.evidence_id} ", style="bold")
        text.append_text(safe_text(c.handle or "?", 80))
        text.append(f" {c.remote_state}")
        if c.created is not None:
            text.append(f" · created {full_time(c.created, tz)}")
            if c.model:
                text.append(" · ")
                text.append_text(safe_text(c.model, 60))
        else:
            text.append(f" · arrived {full_time(c.arrived, tz)} (its record could not be read)")
    text.append("\n  Reconcile from it if it is this job's (handle evidence:ID), or dismiss it: "
                "reclaim dismiss-candidate JOB --evidence ID --reason TEXT", style="italic")
    return text


class HeldExplanation(Static):
    """The held reason, the three possible cases (the one the evidence points to marked), and what to do next."""

    DEFAULT_CSS = """
    HeldExplanation { height: auto; padding: 0 1; }
    """

    def show(self, detail: JobDetail, tz: str = "UTC") -> None:
        """Explain `detail.job`'s state (times in `tz`)."""
        job = detail.job
        text = Text()
        if job.state == "held":
            text.append("Held: ", style="bold red")
            text.append_text(safe_text(job.held_reason or "outcome unknown", 300, prose=True))
            if detail.arrival:
                text.append(f"\n{detail.arrival[0].upper()}{detail.arrival[1:]}", style="bold yellow")
                text.append(": release, reject and remediate wait until then (reconcile need not).")
            if detail.candidates:
                text.append_text(candidate_lines(detail, tz))
            text.append("\nThe outcome is unknown, so nothing is re-sent automatically. One of three things happened:\n",
                        style="dim")
            suspected = detail.suspected_case()
            for i, (category, title, meaning) in enumerate(HELD_CASES, start=1):
                mark = "▶ " if category == suspected else "  "
                text.append(f"{mark}{i}. {title}", style="bold" if category == suspected else "")
                text.append(f" — {meaning}\n", style="" if category == suspected else "dim")
            blocked = detail.blocked_new_jobs
            if blocked:
                text.append(f"Blocking: {len(blocked)} new job{'s' if len(blocked) != 1 else ''} on target ",
                            style="bold red")
                text.append_text(safe_text(job.target, 120, style="bold"))
                text.append(f" {'were' if len(blocked) != 1 else 'was'} refused while this job is held (latest: ")
                text.append_text(safe_text(blocked[-1].detail.get("job_id"), 120))
                text.append(").\n")
            finding = detail.latest_finding
            if finding is not None:
                text.append("Latest finding: ", style="bold")
                text.append_text(safe_text(finding.detail.get("category"), 40))
                text.append(" by ")
                text.append_text(safe_text(finding.actor, 40))
                text.append(" — ")
                text.append_text(safe_text(finding.detail.get("note"), 200, prose=True))
            elif detail.latest_query is not None:
                text.append("Queried, no finding yet: record what you found (step 2).", style="italic")
            elif detail.query_helps:
                text.append("Nobody has looked yet: query the remote (step 1), then record a finding.", style="italic")
            else:
                text.append("A query cannot help (nothing to ask the remote about): look where step 1 says, then "
                            "record what you found (step 2).", style="italic")
        elif job.state == "failed":
            text.append("Failed: ", style="bold red")
            text.append_text(safe_text(job.last_error or "the remote rejected or failed it", 300, prose=True))
            text.append("\nThe remote definitely did not do it; an approver may release it once a finding is recorded.")
        else:
            text.append(f"Not held: the job is {job.state}.", style="dim")
        self.update(text)
