"""The browser seat (`reclaim serve`) in a real browser (Debian's chromium driven by Playwright) behind real nginx
running docs/browser-seat.md's own example and started by its own command: bob logs in with basic auth, sees his name and roles, queries a held job and
records a finding, and the ledger read afresh says bob did it. Refusals (no header, a header from an untrusted
address, a foreign Origin) start no process; closing a tab, or the browser vanishing, ends that tab's console
within 5 s, counted in /proc.

chromium, nginx and openssl come from Debian (`make test` installs them as root). They are not optional: a
missing one fails these tests rather than skipping them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
import queue
import re
import secrets
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from child_env import inherited_env
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from console.job_link import job_link
from console.serve import HEARTBEAT_SECONDS
from ledger.clock import SystemClock
from ledger.config import parse_config
from ledger.db import connect, create_ledger
from ledger.identity import os_account
from ledger.model import JobKey
from ledger.simulator import Simulator
from ledger.store import events as events_store
from ledger.worker import RemoteCache, submit_now

ROOT = Path(__file__).resolve().parents[2]
OP = "article.generate"
_SCRIPT = Path(sys.executable).with_name("reclaim")
RECLAIM = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "console"]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions"]
SCREEN_JS = """() => {
  const seat = window.reclaimSeat;
  if (!seat) return "";
  const buffer = seat.terminal.buffer.active, lines = [];
  for (let i = 0; i < buffer.length; i++) { const l = buffer.getLine(i); lines.push(l ? l.translateToString(true) : ""); }
  return lines.join("\\n");
}"""


STARTING_JS = """document.addEventListener("DOMContentLoaded", () => {
  const el = document.querySelector(".starting");
  window.reclaimStartingShown = el && getComputedStyle(el).display !== "none" && el.getBoundingClientRect().height > 0
    ? el.textContent : null;
});"""


def _wait_for(pred: Callable[[], Any], timeout: float, step: float = 0.02, what: str = "condition") -> Any:
    """Poll `pred` until truthy (returned), else fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} not met within {timeout}s")
        time.sleep(step)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _need(path: str) -> str:
    found = shutil.which(path) or (path if Path(path).exists() else None)
    if found is None:
        pytest.fail(f"{path} is missing: `make test` installs chromium, nginx and openssl from Debian (as root)")
    return found


# -- processes -------------------------------------------------------------------------------------------------
def children(pid: int) -> set[int]:
    """The live (not zombie) processes whose parent is `pid`, read from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def exec_environ(pid: int, timeout: float = 10) -> list[bytes]:
    """The environment `pid` was exec'd with. A console is a child of the seat from its fork on; until
    it has exec'd the console's command line, /proc still shows the seat's own environment."""
    def execd() -> bool:
        return b"\0console\0console\0" in Path(f"/proc/{pid}/cmdline").read_bytes()

    _wait_for(execd, timeout=timeout, step=0.01, what=f"process {pid} to exec the console")
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


# -- the seat --------------------------------------------------------------------------------------------------
@dataclass
class Served:
    proc: subprocess.Popen[str]
    address: str  # "unix:/path" or "http://127.0.0.1:PORT"
    ledger: Path
    key: JobKey
    log: list[str]

    @property
    def consoles(self) -> set[int]:
        return children(self.proc.pid)


def held_ledger(folder: Path, sim: Simulator) -> tuple[Path, dict[str, Any], JobKey]:
    """A ledger with one held job (the send was dropped after it went out) and its config dict."""
    doc: dict[str, Any] = {
        "timezone": "UTC",
        "identity": {"source": "proxy"},
        "operators": {"alice": ["triage"], "bob": ["triage", "approver"], "scheduler": ["sender"]},
        "remotes": {"gemini": {"kind": "gemini", "base_url": sim.url, "model": "gemini-sim", "timeout_seconds": 5}},
        "operations": {OP: {"remote": "gemini", "daily_quota": 100, "sink": str(folder / "results")}},
        "serve": {"account": os_account()},
    }
    cfg = parse_config(doc, base_dir=folder)
    ledger = folder / "reclaim.db"
    create_ledger(ledger)
    sim.add_fault("drop_before_accept")
    conn = connect(ledger)
    res = submit_now(conn, cfg, OP, {"input": "the seat's held job"}, job_id="seat-held", target="blog/seat",
                     clock=SystemClock(), remotes=RemoteCache(cfg))
    conn.close()
    assert res.state == "held", res
    return ledger, doc, res.key


@pytest.fixture
def serve_seat(tmp_path: Path, write_config: Callable[..., Path]) -> Iterator[Callable[..., Served]]:
    """`serve_seat(ledger, doc, key, trusted=[...], origins=[...], listen=None|sock=None)`: `reclaim serve`
    started and listening; stopped (SIGTERM) at teardown, which must leave no console behind."""
    started: list[Served] = []

    def start(ledger: Path, doc: dict[str, Any], key: JobKey, *, trusted: list[str], origins: list[str],
              listen: str | None = None, sock: Path | None = None) -> Served:
        doc = {**doc, "serve": {**doc["serve"], "trusted_proxies": trusted, "allowed_origins": origins}}
        config = write_config(doc, tmp_path / "seat.toml")
        if sock is not None:
            args = readme_serve_command({"--socket": sock, "--ledger": ledger, "--config": config})
        else:
            args = ["serve", "--ledger", str(ledger), "--config", str(config), "--listen", str(listen)]
        env = inherited_env()
        proc = subprocess.Popen([*RECLAIM, *args],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)
        lines: queue.Queue[str] = queue.Queue()
        log: list[str] = []

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.append(line)
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + 30
        while True:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                proc.kill()
                pytest.fail(f"reclaim serve did not start within 30 s: {''.join(log)}")
            m = re.search(r"listening on (\S+)", line)
            if m:
                break
        served = Served(proc, m.group(1), ledger, key, log)
        started.append(served)
        return served

    yield start
    for s in started:
        consoles = s.consoles
        s.proc.send_signal(signal.SIGTERM)
        try:
            s.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()
            pytest.fail(f"reclaim serve ignored SIGTERM: {''.join(s.log)}")
        left = [pid for pid in consoles if alive(pid)]
        assert not left, f"consoles left running after reclaim serve stopped: {left}"


# -- nginx, from docs/browser-seat.md ---------------------------------------------------------------------------
SEAT_DOC = ROOT / "docs" / "browser-seat.md"


def readme_block(name: str, lang: str) -> str:
    text = SEAT_DOC.read_text(encoding="utf-8")
    block = re.search(rf"<!-- {name} -->\s*```{lang}\n(.*?)```\s*<!-- /{name} -->", text, re.S)
    assert block, f"{SEAT_DOC.name} lost its {name} block"
    return block.group(1)


def readme_serve_command(paths: dict[str, Path]) -> list[str]:
    """The seat document's one command that runs the seat, as `reclaim` arguments, with its paths replaced by `paths`
    (the tests run as the seat account already, so its `sudo -u reclaim-seat` is dropped)."""
    words = shlex.split(readme_block("seat-command", "sh").strip())
    assert words[:5] == ["sudo", "-u", "reclaim-seat", "reclaim", "serve"], words
    args = words[4:]
    for option, path in paths.items():
        i = args.index(option)
        args[i + 1] = str(path)
    assert len(args) == 1 + 2 * len(paths), args  # nothing else in the command
    return args


@dataclass
class Nginx:
    origin: str
    password: str
    proc: subprocess.Popen[str]


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Callable[[Path], Nginx]]:
    """`nginx(sock)`: the nginx example of docs/browser-seat.md with basic auth for bob, in front of the unix socket `sock`,
    on a free loopback port with a throwaway certificate."""
    procs: list[subprocess.Popen[str]] = []

    def start(sock: Path) -> Nginx:
        binary = _need("/usr/sbin/nginx")
        openssl = _need("openssl")
        prefix = tmp_path / "nginx"
        (prefix / "tmp").mkdir(parents=True)
        subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", str(prefix / "key.pem"),
                        "-out", str(prefix / "cert.pem")], check=True, capture_output=True)
        password = secrets.token_urlsafe(12)
        salt = secrets.token_bytes(8)
        ssha = base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()
        (prefix / "htpasswd").write_text(f"bob:{{SSHA}}{ssha}\n", encoding="utf-8")
        port = _free_port()
        site = readme_block("seat-nginx", "nginx")
        for old, new in {
            "listen 443 ssl;": f"listen 127.0.0.1:{port} ssl;",
            "/etc/ssl/reclaim/fullchain.pem": str(prefix / "cert.pem"),
            "/etc/ssl/reclaim/privkey.pem": str(prefix / "key.pem"),
            "/etc/nginx/reclaim.htpasswd": str(prefix / "htpasswd"),
            "/run/reclaim-seat/seat.sock": str(sock),
        }.items():
            assert old in site, f"the nginx example in {SEAT_DOC.name} lost {old!r}"
            site = site.replace(old, new)
        temp = "\n".join(f"    {k}_temp_path {prefix / 'tmp' / k};" for k in ("client_body", "proxy", "fastcgi",
                                                                               "uwsgi", "scgi"))
        (prefix / "nginx.conf").write_text(
            f"daemon off;\nworker_processes 1;\nuser {os_account()};\npid {prefix / 'nginx.pid'};\n"
            f"error_log stderr warn;\nevents {{ worker_connections 64; }}\n"
            f"http {{\n    access_log off;\n{temp}\n{site}\n}}\n", encoding="utf-8")
        proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(proc)

        def listening() -> bool:
            assert proc.poll() is None, proc.communicate()[0]
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=1,
                                               context=ssl._create_unverified_context())  # the throwaway certificate
            try:
                conn.request("GET", "/")
                return conn.getresponse().status == 401
            except OSError:
                return False
            finally:
                conn.close()

        _wait_for(listening, timeout=20, step=0.05, what="nginx listening")
        return Nginx(f"https://127.0.0.1:{port}", password, proc)

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# -- the browser -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    b = playwright.chromium.launch(executable_path=_need(str(CHROMIUM)), args=CHROMIUM_ARGS)
    try:
        yield b
    finally:
        b.close()


def screen(page: Page) -> str:
    """The terminal's text as the browser holds it (xterm's buffer)."""
    return str(page.evaluate(SCREEN_JS))


def wait_screen(page: Page, what: str | re.Pattern[str], timeout: float = 30.0) -> str:
    """Wait until the browser's terminal shows `what`; fail with the screen as it is."""
    deadline = time.monotonic() + timeout
    while True:
        text = screen(page)
        if (what.search(text) if isinstance(what, re.Pattern) else what in text):
            return text
        if time.monotonic() >= deadline:
            pytest.fail(f"the browser never showed {what!r} within {timeout}s; it shows:\n{text}")
        page.wait_for_timeout(50)


def press(page: Page, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def ledger_events(ledger: Path, key: JobKey) -> list[tuple[str, str]]:
    conn = connect(ledger, readonly=True)
    try:
        return [(e.kind, e.actor) for e in events_store.job_events(conn, key)]
    finally:
        conn.close()


# -- tests -----------------------------------------------------------------------------------------------------
def test_bob_through_nginx_records_the_preset_finding_as_himself(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served], nginx: Callable[[Path], Nginx],
    browser: Browser,
) -> None:
    """The held job's send was dropped before the remote took it: no handle, no evidence, and Gemini cannot be
    searched by key, so triage offers no query; step 2 is pre-set and `f`, a note, Enter, `y` record it as bob."""
    ledger, doc, key = held_ledger(tmp_path, sim)
    calls_before = sim.calls()["total"]
    sock = tmp_path / "run" / "seat.sock"
    sock.parent.mkdir()
    front = nginx(sock)
    seat = serve_seat(ledger, doc, key, trusted=[f"unix:{sock}"], origins=[front.origin], sock=sock)
    assert not seat.consoles

    # The client also sends its own X-Forwarded-User: nginx replaces it with the authenticated user.
    context = browser.new_context(http_credentials={"username": "bob", "password": front.password},
                                  ignore_https_errors=True, viewport={"width": 1280, "height": 800},
                                  extra_http_headers={"X-Forwarded-User": "alice"})
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    # What the page shows once parsed, before textual-serve's script runs (on load) and opens the websocket.
    page.add_init_script(STARTING_JS)
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        page.goto(front.origin + "/")
        assert page.title() == "reclaim — bob"
        page.locator(".xterm-helper-textarea").focus()
        wait_screen(page, "bob · approver, triage")
        # Not a black page until the console paints: it said so, and says it no longer.
        assert page.evaluate("window.reclaimStartingShown") == "starting the console…"
        assert page.locator(".starting").is_hidden()
        assert "alice" not in screen(page)
        assert len(seat.consoles) == 1
        wait_screen(page, "seat-held")  # the held job, first in the held table

        press(page, "Enter")  # opens the held job
        wait_screen(page, "Job seat-held  ·  article.generate  ·  held")
        press(page, "t")  # its triage screen: step 1 says what is known, step 2 is pre-set
        text = wait_screen(page, "step 2 is set to cannot_determine (a query cannot help); f records it")
        assert "Step 1 · What is known (a query cannot help" in text
        press(page, "f")  # the category is set: the cursor goes to the note
        wait_screen(page, "Enter records it")
        page.keyboard.type("Nothing labelled with this idem key in AI Studio; checked from the browser seat.")
        press(page, "Enter")  # a preview whose default is Cancel
        wait_screen(page, "Record finding? seat-held")
        press(page, "y")
        wait_screen(page, "Latest finding: cannot_determine by bob")
        console = next(iter(seat.consoles))
    finally:
        page.close()
    # Closing the tab ends its console (and nothing else is left) within 5 s.
    _wait_for(lambda: not seat.consoles and not alive(console), timeout=5, step=0.05, what="the console reaped")
    context.close()

    # The ledger, read afresh, says bob found (not alice, whom the client claimed to be); the remote was not asked.
    conn = connect(ledger, readonly=True)
    try:
        events = events_store.job_events(conn, key)
    finally:
        conn.close()
    by_kind = {e.kind: e for e in events}
    assert "remote_query" not in by_kind
    assert sim.calls()["total"] == calls_before
    assert by_kind["finding"].actor == "bob" and by_kind["finding"].detail["category"] == "cannot_determine"
    assert "checked from the browser seat" in by_kind["finding"].detail["note"]
    assert "alice" not in {e.actor for e in events}

    # Nothing was asked of any other host: the page, its script, stylesheet and fonts all came from the seat.
    assert requests and all(url.startswith(front.origin + "/") for url in requests), requests
    assert any("/static/fonts/RobotoMono" in url for url in requests), requests
    assert len(sockets) == 1 and sockets[0].startswith(front.origin.replace("https://", "wss://") + "/ws?"), sockets


# -- job links ---------------------------------------------------------------------------------------------------
def test_a_job_link_opens_that_jobs_screen_in_chromium_through_nginx(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served], nginx: Callable[[Path], Nginx],
    browser: Browser,
) -> None:
    """`/?job=ID&op=OPERATION` (what the job screen's `y` copies) opens that job's screen; the console is started
    with exactly `--job=ID --operation=OP`; a link to a job not in the ledger shows the overview and says so."""
    ledger, doc, key = held_ledger(tmp_path, sim)
    sock = tmp_path / "run" / "seat.sock"
    sock.parent.mkdir()
    front = nginx(sock)
    seat = serve_seat(ledger, doc, key, trusted=[f"unix:{sock}"], origins=[front.origin], sock=sock)
    context = browser.new_context(http_credentials={"username": "bob", "password": front.password},
                                  ignore_https_errors=True, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        page.goto(job_link(front.origin + "/", key))
        page.locator(".xterm-helper-textarea").focus()
        wait_screen(page, "Job seat-held  ·  article.generate  ·  held")
        (console,) = _wait_for(lambda: seat.consoles, timeout=10, what="the linked console")
        argv = Path(f"/proc/{console}/cmdline").read_bytes().split(b"\0")
        assert argv[-3:] == [b"--job=seat-held", b"--operation=article.generate", b""], argv
        assert "/ws/open/" in sockets[0], sockets
        press(page, "Escape")  # the overview is underneath, as if the job had been opened from it
        wait_screen(page, "bob · approver, triage")
        page.goto(front.origin + "/?job=nobody%27s%20job")
        page.locator(".xterm-helper-textarea").focus()
        wait_screen(page, "the linked job \"nobody's job\" is not in this ledger")
    finally:
        page.close()
        context.close()
    _wait_for(lambda: not seat.consoles, timeout=5, step=0.05, what="the consoles reaped")
    assert all(actor != "bob" for _, actor in ledger_events(ledger, key))  # opening a job by link writes nothing


# -- refusals ----------------------------------------------------------------------------------------------------
def _get(address: str, path: str, headers: dict[str, str], source: str = "127.0.0.1") -> tuple[int, str]:
    host, port = address.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(source, 0))
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": base64.b64encode(b"0123456789abcdef").decode()}


def test_no_header_an_untrusted_peer_or_a_foreign_origin_is_refused_and_starts_nothing(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served],
) -> None:
    ledger, doc, key = held_ledger(tmp_path, sim)
    origin = "https://reclaim.example.org"
    seat = serve_seat(ledger, doc, key, trusted=["127.0.0.1"], origins=[origin], listen="127.0.0.1:0")
    bob = {"X-Forwarded-User": "bob"}
    refused = [
        ("/", {}, "127.0.0.1", "no X-Forwarded-User header"),
        ("/ws", {**UPGRADE, "Origin": origin}, "127.0.0.1", "no X-Forwarded-User header"),
        # 127.0.0.2 is loopback too, but not the trusted proxy's address.
        ("/", bob, "127.0.0.2", "not a trusted proxy"),
        ("/ws", {**UPGRADE, **bob, "Origin": origin}, "127.0.0.2", "not a trusted proxy"),
        ("/ws", {**UPGRADE, **bob, "Origin": "https://evil.example"}, "127.0.0.1", "is not in [serve] allowed_origins"),
        ("/ws", {**UPGRADE, **bob}, "127.0.0.1", "Origin '(none)'"),
        ("/ws", {**UPGRADE, "X-Forwarded-User": "bob\tsmith", "Origin": origin}, "127.0.0.1", "printable"),
        ("/static/js/textual.js", {}, "127.0.0.1", "no X-Forwarded-User header"),
    ]
    for path, headers, source, why in refused:
        status, body = _get(seat.address, path, headers, source)
        assert status == 403 and why in body, (path, headers, source, status, body)
        assert not seat.consoles, f"a console started for a refused request: {path} {headers} from {source}"
    _wait_for(lambda: sum("refused" in line for line in seat.log) == len(refused), timeout=5,
              what="every refusal logged")

    # The same request from the trusted peer with the allowed Origin is admitted: one console, for bob.
    status, body = _get(seat.address, "/", bob)
    assert status == 200 and "<title>reclaim — bob</title>" in body
    host, port = seat.address.removeprefix("http://").rsplit(":", 1)
    clients = []
    for _ in range(2):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/ws?width=100&height=30", headers={**UPGRADE, **bob, "Origin": origin})
        assert conn.getresponse().status == 101
        clients.append(conn)
    consoles = _wait_for(lambda: len(seat.consoles) == 2 and seat.consoles, timeout=10, step=0.02,
                         what="a console for each admitted websocket")
    for pid in consoles:
        environ = exec_environ(pid)
        assert b"RECLAIM_SEAT_OPERATOR=bob" in environ and not any(v.startswith(b"RECLAIM_OPERATOR=") for v in environ)
        assert os.getpgid(pid) == pid  # its own process group, so reaping takes everything it started
    # One client goes away without a websocket close: its console ends within 5 s.
    clients[0].close()
    gone = _wait_for(lambda: len(seat.consoles) == 1 and consoles - seat.consoles, timeout=5, step=0.05,
                     what="the console reaped after its client went away")
    (silent,) = consoles - gone
    # The other keeps its connection open but stops answering (a laptop lid closed, a network gone): the
    # heartbeat's unanswered ping drops it, and its console ends.
    _wait_for(lambda: not alive(silent), timeout=HEARTBEAT_SECONDS * 2 + 5, step=0.05,
              what="the console reaped after its client stopped answering pings")
    assert all(not alive(pid) for pid in consoles)
    clients[1].close()

    # Stopping the seat (SIGTERM) with a console open ends that console too.
    last = http.client.HTTPConnection(host, int(port), timeout=10)
    last.request("GET", "/ws", headers={**UPGRADE, **bob, "Origin": origin})
    assert last.getresponse().status == 101
    (pid,) = _wait_for(lambda: seat.consoles, timeout=10, step=0.02, what="a console")
    seat.proc.send_signal(signal.SIGTERM)
    assert seat.proc.wait(timeout=15) == 0
    assert not alive(pid) and not seat.consoles
    last.close()


# -- reaping -----------------------------------------------------------------------------------------------------
def _open_seat_tab(context: Any, address: str) -> Page:
    page: Page = context.new_page()
    page.goto(address + "/")
    wait_screen(page, "bob · approver, triage")
    return page


def test_each_tab_has_its_own_console_and_closing_it_or_killing_the_browser_ends_it(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served], browser: Browser, playwright: Playwright,
) -> None:
    ledger, doc, key = held_ledger(tmp_path, sim)
    port = _free_port()
    address = f"http://127.0.0.1:{port}"
    # Loopback with 127.0.0.1 trusted: the browser itself plays the proxy by sending the header.
    seat = serve_seat(ledger, doc, key, trusted=["127.0.0.1"], origins=[address], listen=f"127.0.0.1:{port}")
    context = browser.new_context(extra_http_headers={"X-Forwarded-User": "bob"})
    first = _open_seat_tab(context, address)
    (one,) = _wait_for(lambda: len(seat.consoles) == 1 and seat.consoles, timeout=10, what="one console")
    second = _open_seat_tab(context, address)
    both = _wait_for(lambda: len(seat.consoles) == 2 and seat.consoles, timeout=10, what="a console per tab")
    (two,) = both - {one}
    first.close()
    _wait_for(lambda: not alive(one), timeout=5, step=0.05, what="the closed tab's console ended")
    assert seat.consoles == {two} and alive(two)  # the other tab's console is untouched
    second.close()
    _wait_for(lambda: not alive(two), timeout=5, step=0.05, what="the second tab's console ended")
    context.close()

    # The browser vanishes (SIGKILL, no goodbye): its console still ends within 5 s.
    profile = tmp_path / "profile"
    persistent = playwright.chromium.launch_persistent_context(
        str(profile), executable_path=_need(str(CHROMIUM)), args=CHROMIUM_ARGS,
        extra_http_headers={"X-Forwarded-User": "bob"})
    _open_seat_tab(persistent, address)
    (three,) = _wait_for(lambda: len(seat.consoles) == 1 and seat.consoles, timeout=10, what="a console")
    chromium = [int(p) for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(int(p), str(profile))]
    assert chromium
    for pid in chromium:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not alive(three), timeout=5, step=0.05, what="the vanished browser's console ended")
    with contextlib.suppress(Exception):
        persistent.close()
    assert not seat.consoles


def _cmdline_has(pid: int, text: str) -> bool:
    try:
        return text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _ws_request(address: str, headers: list[tuple[str, str]]) -> http.client.HTTPConnection:
    """Send the seat a websocket upgrade with these headers (a header may repeat); its answer is not read yet."""
    host, port = address.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("GET", "/ws")
    for name, value in [*UPGRADE.items(), *headers]:
        conn.putheader(name, value)
    conn.endheaders()
    return conn


def _ws(address: str, headers: list[tuple[str, str]]) -> tuple[http.client.HTTPConnection, int]:
    """Open the seat's websocket with these headers (a header may repeat); (connection, status)."""
    conn = _ws_request(address, headers)
    return conn, conn.getresponse().status


def test_two_identity_headers_are_refused_and_a_user_may_not_open_more_consoles_than_the_limit(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served],
) -> None:
    ledger, doc, key = held_ledger(tmp_path, sim)
    origin = "https://reclaim.example.org"
    doc = {**doc, "serve": {**doc["serve"], "max_consoles_per_user": 2}}
    seat = serve_seat(ledger, doc, key, trusted=["127.0.0.1"], origins=[origin], listen="127.0.0.1:0")
    conn, status = _ws(seat.address, [("X-Forwarded-User", "bob"), ("X-Forwarded-User", "alice"),
                                      ("Origin", origin)])
    conn.close()
    assert status == 403 and not seat.consoles
    _wait_for(lambda: any("2 X-Forwarded-User headers" in line for line in seat.log), timeout=5,
              what="the refusal logged")
    open_ = [_ws(seat.address, [("X-Forwarded-User", "bob"), ("Origin", origin)]) for _ in range(2)]
    assert [s for _, s in open_] == [101, 101]
    _wait_for(lambda: len(seat.consoles) == 2, timeout=10, what="bob's two consoles")
    third, status = _ws(seat.address, [("X-Forwarded-User", "bob"), ("Origin", origin)])
    assert status == 429
    third.close()
    alice, status = _ws(seat.address, [("X-Forwarded-User", "alice"), ("Origin", origin)])
    assert status == 101  # the limit is per user
    _wait_for(lambda: len(seat.consoles) == 3, timeout=10, what="alice's console")
    for c, _ in [*open_, (alice, 101)]:
        c.close()


def test_ten_consoles_opened_at_once_by_one_user_start_exactly_the_limit(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served],
) -> None:
    ledger, doc, key = held_ledger(tmp_path, sim)
    origin = "https://reclaim.example.org"
    doc = {**doc, "serve": {**doc["serve"], "max_consoles_per_user": 4}}
    seat = serve_seat(ledger, doc, key, trusted=["127.0.0.1"], origins=[origin], listen="127.0.0.1:0")
    # All ten upgrades are on the wire before any answer is read: the seat takes them while its first consoles
    # are still starting.
    conns = [_ws_request(seat.address, [("X-Forwarded-User", "bob"), ("Origin", origin)]) for _ in range(10)]
    statuses = [c.getresponse().status for c in conns]
    assert sorted(statuses) == [101] * 4 + [429] * 6, statuses

    def started() -> set[int]:  # as the seat logs each console it has started
        pids = {int(m.group(1)) for line in seat.log for m in [re.search(r"console (\d+) started for bob", line)] if m}
        return pids if len(pids) >= 4 and pids <= seat.consoles else set()

    consoles = _wait_for(started, timeout=60, what="bob's four consoles started")
    assert len(consoles) == 4 and seat.consoles == consoles
    _wait_for(lambda: sum("refused a console for bob" in line for line in seat.log) == 6, timeout=10,
              what="six refusals logged")
    for c in conns:
        c.close()


def test_consoles_die_with_a_seat_killed_by_sigkill(
    tmp_path: Path, sim: Simulator, serve_seat: Callable[..., Served],
) -> None:
    ledger, doc, key = held_ledger(tmp_path, sim)
    origin = "https://reclaim.example.org"
    seat = serve_seat(ledger, doc, key, trusted=["127.0.0.1"], origins=[origin], listen="127.0.0.1:0")
    clients = [_ws(seat.address, [("X-Forwarded-User", "bob"), ("Origin", origin)])[0] for _ in range(2)]
    # Started as the seat logs it: a child still between fork and exec has not asked for the parent-death
    # signal yet, and a child paused there would never ask.
    def started() -> set[int]:
        pids = {int(m.group(1)) for line in seat.log for m in [re.search(r"console (\d+) started for", line)] if m}
        return pids if len(pids) == 2 and pids <= seat.consoles else set()

    consoles = _wait_for(started, timeout=30, what="two consoles started")
    for pid in consoles:  # paused consoles cannot notice their pipes closing: only the kernel can end them
        os.kill(pid, signal.SIGSTOP)
    seat.proc.kill()  # no reaping can run
    seat.proc.wait(timeout=10)
    _wait_for(lambda: not any(alive(pid) for pid in consoles), timeout=30,
              what="the consoles to end with their seat")
    for c in clients:
        c.close()
