"""`reclaim serve`: the browser seat. One console process per browser connection, acting as the user an
authenticating reverse proxy names, on a unix socket or a loopback address only.

Every request (page, assets, websocket) is admitted only when
- it arrives from a trusted proxy: a peer address in `[serve] trusted_proxies`, or through a unix socket listed
  there as "unix:/path" (then the socket file's permissions decide who can be the proxy);
- it carries the proxy's header (`[identity] proxy_header`, e.g. X-Forwarded-User) with a usable name;
- and, for the websocket, its Origin is one of `[serve] allowed_origins` (a page on another site cannot drive
  a logged-in operator's console).
A refused request gets a 403 with one line saying why, and starts nothing. An admitted websocket starts
`python -m console console` in its own process group with the name in RECLAIM_SEAT_OPERATOR (see
ledger.identity for why only this process's account can make that count); when the websocket closes, or its
heartbeat goes unanswered because the browser vanished, the whole group is ended (`SeatProcess.reap`).

The page and its assets (textual-serve's script, xterm's CSS, the Roboto Mono files it ships) are served from
here; the page's Content-Security-Policy forbids loading anything from another origin.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import ipaddress
import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import textual_serve
from aiohttp import WSMsgType, web

from console.job_link import decode_token
from console.seat_process import SeatProcess
from ledger import SEAT_ENV, BadInput, Config, check_seat_name

log = logging.getLogger("reclaim.serve")

HEARTBEAT_SECONDS = 5.0
"""The websocket is pinged this often; a browser that stops answering (vanished, not closed) is dropped and its
console reaped within about two of these."""
STATIC = Path(textual_serve.__file__).parent / "static"
PAGE = Template((Path(__file__).parent / "seat_page.html").read_text(encoding="utf-8"))
CSP = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
       "font-src 'self'; img-src 'self' data: blob:; connect-src 'self'; worker-src 'self' blob:; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
_JS_ANCHOR = "t.fit(),s||t.connect()"
"""Where textual-serve's script creates the terminal; the seat exposes it as `window.reclaimSeat` there."""


def parse_listen(spec: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`, `localhost` meaning 127.0.0.1) as a loopback address and port;
    BadInput for anything that is not loopback: the seat is reached through its proxy, never directly."""
    host, sep, port_text = spec.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BadInput(f"--listen {spec[:80]!r}: expected HOST:PORT, e.g. 127.0.0.1:8740 (port 0 picks a free one)")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise BadInput(f"--listen {spec[:80]!r}: the host must be a loopback IP address such as 127.0.0.1") from None
    if not address.is_loopback:
        raise BadInput(
            f"--listen {spec[:80]!r}: {host} is not a loopback address; the seat listens on loopback or a unix "
            "socket only, behind an authenticating proxy (see the README's nginx example)"
        )
    return str(address), int(port_text)


def _peer_ip(request: web.Request) -> str | None:
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return None


@dataclass
class Seat:
    """The web application: admission checks, the page, and one SeatProcess per admitted websocket."""

    ledger: Path
    config_path: Path
    config: Config
    socket_path: Path | None = None
    consoles: dict[int, SeatProcess] = field(default_factory=dict)
    owners: dict[int, str] = field(default_factory=dict)
    """The operator each open console acts for, by pid."""
    seats: dict[str, int] = field(default_factory=dict)
    """Consoles open or starting, per user: what [serve] max_consoles_per_user limits."""
    refusals: int = 0

    def __post_init__(self) -> None:
        script = (STATIC / "js" / "textual.js").read_text(encoding="utf-8")
        if _JS_ANCHOR not in script:
            raise BadInput(f"serve: textual-serve's script changed ({STATIC / 'js' / 'textual.js'}); "
                           "install the textual-serve version pyproject.toml names")
        self.script = script.replace(_JS_ANCHOR, "t.fit(),window.reclaimSeat=t,s||t.connect()", 1)
        trusted = self.config.serve.trusted_proxies
        self.trusted_ips = {ipaddress.ip_address(t) for t in trusted if not t.startswith("unix:")}
        self.trusted_socket = self.socket_path is not None and f"unix:{self.socket_path}" in trusted

    # -- admission --------------------------------------------------------------------------------------------
    def _trusted_peer(self, request: web.Request) -> bool:
        ip = _peer_ip(request)
        if ip is not None:
            return ipaddress.ip_address(ip.split("%")[0]) in self.trusted_ips
        return self.trusted_socket  # a unix socket: the peer is whoever could open the socket file

    def admit(self, request: web.Request, *, websocket: bool) -> str:
        """The operator the proxy named for this request; HTTPForbidden (one line why) when the request is not
        from a trusted proxy, carries no usable name, or (for the websocket) comes from a foreign Origin."""
        header = self.config.proxy_header
        if not self._trusted_peer(request):
            raise self._refuse(request, f"this peer is not a trusted proxy ([serve] trusted_proxies); {header} "
                                        "is believed only from the proxy")
        names = request.headers.getall(header, [])
        if not names:
            raise self._refuse(request, f"no {header} header: reach the seat through its authenticating proxy")
        if len(names) > 1:
            raise self._refuse(request, f"{len(names)} {header} headers: the proxy must send exactly one")
        name = names[0]
        try:
            check_seat_name(name)
        except BadInput as e:
            raise self._refuse(request, f"{header}: {e}") from None
        if websocket:
            origin = request.headers.get("Origin")
            if origin not in self.config.serve.allowed_origins:
                raise self._refuse(request, f"Origin {(origin or '(none)')[:80]!r} is not in [serve] allowed_origins")
        return name

    def _refuse(self, request: web.Request, why: str) -> web.HTTPForbidden:
        self.refusals += 1
        log.warning("refused %s %s from %s: %s", request.method, request.path, _peer_ip(request) or "unix socket",
                    why)
        return web.HTTPForbidden(text=f"reclaim serve: refused: {why}\n")

    @web.middleware
    async def _admission(self, request: web.Request, handler: Any) -> web.StreamResponse:
        request["operator"] = self.admit(request, websocket=request.path == "/ws" or request.path.startswith("/ws/"))
        response: web.StreamResponse = await handler(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    # -- handlers ---------------------------------------------------------------------------------------------
    async def page(self, request: web.Request) -> web.Response:
        """The seat's page: textual-serve's terminal with local fonts, the operator's name in the title."""
        name: str = request["operator"]
        size = request.query.get("fontsize", "16")
        body = PAGE.substitute(operator=html.escape(name), font_size=size if size.isdigit() and len(size) < 3 else 16)
        return web.Response(text=body, content_type="text/html", headers={"Cache-Control": "no-store"})

    async def script_js(self, request: web.Request) -> web.Response:
        """textual-serve's script, exposing the terminal to the page's own scripts as `window.reclaimSeat`."""
        return web.Response(text=self.script, content_type="application/javascript")

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        """One console for this connection, acting as the proxy's user; reaped when the connection ends.

        A user has at most `[serve] max_consoles_per_user` consoles open or starting: one more gets a 429. The
        user's slot is taken before anything is awaited and given back once the console has ended or failed
        to start."""
        name: str = request["operator"]  # admitted by `_admission`, Origin included
        limit = self.config.serve.max_consoles_per_user
        if self.seats.get(name, 0) >= limit:
            self.refusals += 1
            log.warning("refused a console for %s: %d open ([serve] max_consoles_per_user)", name, limit)
            raise web.HTTPTooManyRequests(text=f"reclaim serve: refused: {name} has {limit} consoles open "
                                               "([serve] max_consoles_per_user); close one first\n")
        # The seat is taken here, with no await since the check: a console still starting counts too.
        self.seats[name] = self.seats.get(name, 0) + 1
        try:
            return await self._open_console(request, name)
        finally:
            self.seats[name] -= 1
            if not self.seats[name]:
                del self.seats[name]

    async def _open_console(self, request: web.Request, name: str) -> web.StreamResponse:
        """Start the console for an admitted websocket and relay until either side ends; reap it."""
        width = _int(request.query.get("width"), 80)
        height = _int(request.query.get("height"), 24)
        linked: list[str] = []
        token = request.match_info.get("token")
        if token is not None:  # a job link (`/?job=..&op=..`): the console only opens that job's screen
            try:
                job_id, operation = decode_token(token)
            except BadInput as e:
                self.refusals += 1
                raise web.HTTPBadRequest(text=f"reclaim serve: refused: {e}\n") from None
            linked = [f"--job={job_id}", *([f"--operation={operation}"] if operation else [])]
        ws = web.WebSocketResponse(heartbeat=HEARTBEAT_SECONDS)
        await ws.prepare(request)
        console = SeatProcess(
            [sys.executable, "-m", "console", "console", "--ledger", str(self.ledger), "--config",
             str(self.config_path), *linked],
            {SEAT_ENV: name},
            write_bytes=ws.send_bytes, write_str=ws.send_str, close=ws.close,
        )
        try:
            await console.start(width, height)
            assert console.pid is not None
            self.consoles[console.pid] = console
            self.owners[console.pid] = name
            log.info("console %d started for %s", console.pid, name)
            await _relay(ws, console)
        finally:
            pid = console.pid
            await asyncio.shield(console.reap())
            if pid is not None:
                self.consoles.pop(pid, None)
                self.owners.pop(pid, None)
                log.info("console %d for %s ended", pid, name)
            if not ws.closed:
                await ws.close()
        return ws

    async def _shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(c.reap() for c in list(self.consoles.values())), return_exceptions=True)

    def make_app(self) -> web.Application:
        """The aiohttp application (routes, admission middleware, reaping on shutdown)."""
        app = web.Application(middlewares=[self._admission])
        app.add_routes([
            web.get("/", self.page),
            web.get("/ws", self.websocket),
            web.get("/ws/open/{token}", self.websocket),
            web.get("/static/js/textual.js", self.script_js),
            web.get("/favicon.ico", _no_icon),
            web.static("/static", STATIC),
        ])
        app.on_shutdown.append(self._shutdown)
        return app


async def _no_icon(request: web.Request) -> web.Response:
    return web.Response(status=204)


def _int(text: str | None, default: int) -> int:
    try:
        value = int(text or "")
    except ValueError:
        return default
    return value if 1 <= value <= 1000 else default


async def _relay(ws: web.WebSocketResponse, console: SeatProcess) -> None:
    """Browser -> console until the websocket closes (by the browser, the heartbeat, or the console's exit)."""
    async for message in ws:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = message.json()
            kind, data = envelope[0], envelope[1]
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        if kind == "stdin" and isinstance(data, str):
            await console.send_bytes(data.encode("utf-8"))
        elif kind == "resize" and isinstance(data, dict):
            await console.set_terminal_size(_int(str(data.get("width")), 80), _int(str(data.get("height")), 24))
        elif kind == "ping":
            await ws.send_json(["pong", data])
        elif kind == "blur":
            await console.blur()
        elif kind == "focus":
            await console.focus()


async def run(seat: Seat, *, host: str | None, port: int | None, socket_path: Path | None,
              announce: Any = print) -> None:
    """Serve until SIGTERM or SIGINT, then reap every console and stop. `announce` gets one line with the address."""
    logging.basicConfig(level=logging.INFO, format="reclaim serve: %(message)s", stream=sys.stderr)
    runner = web.AppRunner(seat.make_app(), handle_signals=False, access_log=None)
    await runner.setup()
    site: web.BaseSite
    if socket_path is not None:
        with contextlib.suppress(FileNotFoundError):
            if socket_path.is_socket():
                socket_path.unlink()  # a socket left by a seat that was killed
        site = web.UnixSite(runner, str(socket_path))
        await site.start()
        socket_path.chmod(0o660)  # the proxy's account reaches it through group or directory permissions
        announce(f"reclaim serve: listening on unix:{socket_path}")
    else:
        assert host is not None and port is not None
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        announce(f"reclaim serve: listening on http://{host if ':' not in host else f'[{host}]'}:{bound}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        if socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                socket_path.unlink()
