"""The remote's own console, read-only: interactions listed by label, as AI Studio's logs filter by label.

``GET /console/interactions?label=idem=<key>&label=attempt=<N>`` (labels ANDed) answers
``{"interactions": [{"id", "status", "created", "labels", "model"}, ...]}``, or a plain HTML table for
``Accept: text/html`` or ``?format=html``. It is the person's console, not the API: it needs no API
key, is never counted in ``calls()`` and no fault applies to it.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ledger.simulator.base import _SimBase

if TYPE_CHECKING:
    from ledger.simulator.server import _Handler

CONSOLE_PATH = "/console/interactions"


def _parse_labels(values: Sequence[str]) -> list[tuple[str, str]]:
    """``["idem=k", "attempt=2"]`` -> ``[("idem", "k"), ("attempt", "2")]``; ValueError for a bad one."""
    out: list[tuple[str, str]] = []
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"label filter must be NAME=VALUE, got {item!r}")
        out.append((name, value))
    return out


def _render_html(rows: list[dict[str, Any]], labels: list[tuple[str, str]]) -> str:
    esc = html.escape
    shown = ", ".join(f"{n}={v}" for n, v in labels) or "(none)"
    out = [
        "<!doctype html>",
        '<html><head><meta charset="utf-8"><title>Interactions by label</title></head><body>',
        "<h1>Interactions</h1>",
        f"<p>Label filter: {esc(shown)}</p>",
    ]
    if not rows:
        out.append("<p>No interaction has these labels.</p>")
    else:
        out.append("<table border=\"1\"><thead><tr><th>id</th><th>status</th><th>created</th><th>model</th>"
                   "<th>labels</th></tr></thead><tbody>")
        for r in rows:
            labels_text = ", ".join(f"{k}={v}" for k, v in sorted(r["labels"].items()))
            cells = [r["id"], r["status"], r["created"], r["model"] or "", labels_text]
            out.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>")
        out.append("</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


class RemoteConsoleMixin(_SimBase):
    """The read-only listing by label a person opens in a browser."""

    def console_url(self, idem: str) -> str:
        """The URL a person opens to see the remote's interactions labelled ``idem=<idem>``."""
        return f"{self.url}{CONSOLE_PATH}?{urlencode({'label': f'idem={idem}'})}"

    def console_interactions(self, labels: Sequence[tuple[str, str]] = ()) -> list[dict[str, Any]]:
        """Interactions carrying every ``(name, value)`` label, oldest first, as the console lists them."""
        now = time.monotonic()
        with self._lock:
            return [
                rec.console_json(now)
                for rec in self._interactions.values()
                if all(rec.labels.get(name) == value for name, value in labels)
            ]

    def _console_route(self, h: _Handler, verb: str, path: str, query: dict[str, list[str]]) -> bool:
        """Serve ``/console/...``; False if ``path`` is not under it. Not counted, no key, no fault."""
        if path != "/console" and not path.startswith("/console/"):
            return False
        if path.rstrip("/") != CONSOLE_PATH:
            h.send_error_json(404, f"no such console page: {path}")
            return True
        if verb != "GET":
            h.send_error_json(405, f"{verb} not supported on {path}")
            return True
        try:
            labels = _parse_labels(query.get("label", []))
        except ValueError as exc:
            h.send_error_json(400, str(exc))
            return True
        rows = self.console_interactions(labels)
        fmt = (query.get("format") or [""])[-1].lower()
        wants_html = fmt == "html" or (fmt != "json" and "text/html" in (h.headers.get("Accept") or ""))
        if wants_html:
            h.send_body(200, "text/html; charset=utf-8", _render_html(rows, labels).encode())
        else:
            h.send_json(200, {"interactions": rows})
        return True
