"""Write screenshots/browser-seat.png: the browser seat (`reclaim serve`) in Debian's chromium, as bob.

    python scripts/export_browser_seat.py [--out screenshots]

Builds the demo ledger (tests/support/console_demo.py, build_demo) against a loopback simulator, switches its config to
`[identity] source = "proxy"`, starts `reclaim serve` on a free loopback port that trusts 127.0.0.1, and lets
chromium (driven by Playwright, sending the proxy's header itself) open bob's console at its overview. Needs /usr/bin/chromium (`make screenshots` installs it as root).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from console_demo import build_demo  # noqa: E402

from ledger.identity import os_account  # noqa: E402
from ledger.simulator import Simulator  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SCREEN_JS = """() => {
  const seat = window.reclaimSeat;
  if (!seat) return "";
  const b = seat.terminal.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) { const l = b.getLine(i); out.push(l ? l.translateToString(true) : ""); }
  return out.join("\\n");
}"""


def _wait_screen(page: object, text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in page.evaluate(SCREEN_JS):  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise SystemExit(f"export_browser_seat: the seat never showed {text!r}")
        page.wait_for_timeout(50)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    """Serve the demo ledger, open it in chromium as bob, save the PNG."""
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots", help="folder for browser-seat.png")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Simulator().start() as sim:
        folder = Path(tmp)
        demo = build_demo(folder, sim)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        origin = f"http://127.0.0.1:{port}"
        config = demo.config_path.read_text(encoding="utf-8").replace(
            '[identity]\nsource = "declared"\n',
            f'[identity]\nsource = "proxy"\n\n[serve]\naccount = "{os_account()}"\n'
            f'trusted_proxies = ["127.0.0.1"]\nallowed_origins = ["{origin}"]\n', 1)
        demo.config_path.write_text(config, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECLAIM_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        serve = subprocess.Popen(
            [sys.executable, "-m", "console", "serve", "--ledger", "ledger.db", "--config", "reclaim.toml",
             "--listen", f"127.0.0.1:{port}"], cwd=folder, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert serve.stdout is not None
            if not re.search(r"listening on", serve.stdout.readline()):
                raise SystemExit("export_browser_seat: reclaim serve did not start")
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 760},
                                        extra_http_headers={"X-Forwarded-User": "bob"})
                page.goto(origin + "/")
                page.locator(".xterm-helper-textarea").focus()
                _wait_screen(page, "bob · approver, triage")
                _wait_screen(page, "Held jobs")
                page.wait_for_timeout(800)  # let the first paint's fade-in finish before the picture
                target = out / "browser-seat.png"
                page.screenshot(path=str(target))
                browser.close()
            print(f"wrote {target}")
        finally:
            serve.terminate()
            serve.wait(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
