"""`reclaim demo --seat`: the browser seat on the demo's ledger, as docs/browser-seat.md deploys it, on loopback.

`reclaim serve` listens on a unix socket in the demo folder with a copy of the demo's config whose identity is the
proxy's header (`seat.toml`); Debian's nginx (`make demo-seat` installs it as root, as `make test` does) stands in
front on a free loopback port, plain HTTP, with basic auth for alice and bob under one password drawn per run. The
seat's address is `[serve] public_url` in both configs, so a job screen's `y` copies a link that opens, in the
terminal's console as in the browser's.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ledger import BadInput, os_account

NGINX = "/usr/sbin/nginx"
USERS = ("alice", "bob")
"""Who may log in to the demo's seat (the demo config's operators)."""
START_SECONDS = 20.0
"""How long nginx and the seat may take to start listening."""
DECLARED = '[identity]\nsource = "declared"\n'
"""The demo config's identity table (console.demo.CONFIG_TEMPLATE), which the seat's config replaces."""


@dataclass(frozen=True)
class SeatPlan:
    """Where the demo's seat will be: its address, the files it uses, and the password of its users."""

    url: str
    """The address a browser opens (also `[serve] public_url`), ending in /."""
    port: int
    socket: Path
    seat_config: Path
    password: str


def free_port() -> int:
    """A loopback port free now (bound to port 0 and released): not reserved; OSError if none can be bound."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plan_seat(folder: Path) -> SeatPlan:
    """Choose the seat's port, socket, config path and password in `folder` (nothing is written)."""
    port = free_port()
    return SeatPlan(url=f"http://127.0.0.1:{port}/", port=port, socket=folder.absolute() / "seat.sock",
                    seat_config=folder / "seat.toml", password=secrets.token_urlsafe(9))


def write_configs(plan: SeatPlan, config: Path) -> None:
    """Set `[serve] public_url` in the demo's `config` and write the seat's config beside it: the same, but acting
    as the name the proxy's header gives, for `reclaim serve` running as this account behind the proxy on the
    socket. Raises BadInput when `config` is not the demo's (no declared identity table to replace)."""
    text = config.read_text(encoding="utf-8")
    if DECLARED not in text:
        raise BadInput(f"demo --seat: {config} is not the demo's config (no {DECLARED.splitlines()[1]!r})")
    public = f'public_url = "{plan.url}"\n'
    config.write_text(f"{text.rstrip()}\n\n[serve]\n{public}", encoding="utf-8")
    origin = plan.url.rstrip("/")
    seat = text.replace(DECLARED, f'[identity]\nsource = "proxy"\n\n[serve]\naccount = "{os_account()}"\n'
                                  f'trusted_proxies = ["unix:{plan.socket}"]\nallowed_origins = ["{origin}"]\n'
                                  f"{public}", 1)
    plan.seat_config.write_text(seat.replace("# Written by `reclaim demo`.", "# Written by `reclaim demo --seat`: "
                                             "the browser seat's copy of reclaim.toml.", 1), encoding="utf-8")


def nginx_conf(plan: SeatPlan, prefix: Path) -> str:
    """docs/browser-seat.md's nginx site, on the plan's loopback port without TLS, inside a config of its own."""
    temp = "\n".join(f"    {k}_temp_path {prefix / 'tmp' / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                          "scgi"))
    return f"""daemon off;
worker_processes 1;
user {os_account()};
pid {prefix / "nginx.pid"};
error_log stderr warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
{temp}
    map $http_upgrade $seat_connection {{ default upgrade; "" close; }}
    server {{
        listen 127.0.0.1:{plan.port};
        auth_basic "reclaim demo";
        auth_basic_user_file {prefix / "htpasswd"};
        location / {{
            proxy_pass http://unix:{plan.socket}:;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $seat_connection;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""


def htpasswd(password: str, users: tuple[str, ...] = USERS) -> str:
    """An nginx user file: each of `users` with `password`, salted SHA-1 ({SSHA})."""
    lines = []
    for user in users:
        salt = secrets.token_bytes(8)
        digest = base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()
        lines.append(f"{user}:{{SSHA}}{digest}\n")
    return "".join(lines)


def start_seat(plan: SeatPlan, ledger: Path, folder: Path, log: Path) -> list[subprocess.Popen[str]]:
    """Start `reclaim serve` on the plan's socket and nginx in front of it; return both once nginx answers the seat
    with a request for credentials. BadInput when nginx is not installed; RuntimeError (processes stopped) when
    either does not start within START_SECONDS."""
    binary = shutil.which("nginx") or (NGINX if Path(NGINX).exists() else None)
    if binary is None:
        raise BadInput("demo --seat: nginx is not installed: run 'make demo-seat' (as root it installs it), or "
                       "'sudo apt-get install nginx'")
    prefix = folder.absolute() / "nginx"
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    (prefix / "htpasswd").write_text(htpasswd(plan.password), encoding="utf-8")
    (prefix / "nginx.conf").write_text(nginx_conf(plan, prefix), encoding="utf-8")
    started: list[subprocess.Popen[str]] = []
    try:
        serve = subprocess.Popen(
            [sys.executable, "-m", "console", "serve", "--socket", str(plan.socket), "--ledger", str(ledger.absolute()),
             "--config", str(plan.seat_config.absolute())],
            stdout=subprocess.PIPE, stderr=log.open("a"), text=True, start_new_session=True)
        started.append(serve)
        assert serve.stdout is not None
        if "listening on" not in serve.stdout.readline():
            raise RuntimeError(f"demo --seat: reclaim serve did not start (see {log})")
        started.append(subprocess.Popen([binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"],
                                        stdout=log.open("a"), stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True))
        deadline = time.monotonic() + START_SECONDS
        while not _asks_credentials(plan.port):
            if started[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"demo --seat: nginx did not start on 127.0.0.1:{plan.port} (see {log})")
            time.sleep(0.05)
    except BaseException:
        for p in started:
            p.terminate()
            p.wait(10)
        raise
    return started


def _asks_credentials(port: int) -> bool:
    """True when 127.0.0.1:`port` answers a plain GET / with 401 (nginx's basic auth)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status == 401
    except OSError:
        return False
    finally:
        conn.close()
