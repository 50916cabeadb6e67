"""``python -m ledger.simulator``: serve until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import FrameType
from typing import Any

from ledger.simulator.base import is_loopback_host
from ledger.simulator.faults import FAULT_KINDS
from ledger.simulator.server import Simulator


def _iter_rates(items: Sequence[str]) -> Iterator[tuple[str, float]]:
    for item in items:
        kind, sep, rate = item.partition("=")
        if not sep:
            raise ValueError(f"--fault-rate expects kind=rate, got {item!r}")
        yield kind.strip(), float(rate)


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    complete_after: float = 0.0,
    fault_rates: Mapping[str, float] | None = None,
    seed: int | None = None,
    *,
    webhook_url: str | None = None,
    webhook_secret: str | None = None,
    cleanup_fault_rates: Mapping[str, float] | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM, after printing ``simulator listening on URL``; returns 0. ``fault_rates``
    apply to Gemini creates, ``cleanup_fault_rates`` to clean-up creates (each seeded with ``seed``)."""
    sim = Simulator(host, port, complete_after, webhook_url=webhook_url, webhook_secret=webhook_secret)
    if fault_rates:
        sim.set_fault_rates(fault_rates, seed=seed)
    if cleanup_fault_rates:
        sim.set_fault_rates(cleanup_fault_rates, seed=seed, method="cleanup")
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    sim.start()
    try:
        print(f"simulator listening on {sim.url}", flush=True)
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: ``python -m ledger.simulator --port 0 ...``; returns an exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m ledger.simulator",
        description="Loopback simulator of the Gemini Interactions API and a clean-up API.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="loopback host (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port (0 = pick a free one)"
    )
    parser.add_argument(
        "--complete-after",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds until an interaction completes",
    )
    parser.add_argument(
        "--fault-rate",
        action="append",
        default=[],
        metavar="KIND=RATE",
        help=f"random fault rate for creates; kinds: {', '.join(FAULT_KINDS)}",
    )
    parser.add_argument(
        "--cleanup-fault-rate",
        action="append",
        default=[],
        metavar="KIND=RATE",
        help="random fault rate for clean-up creates (POST /cleanup); the same kinds",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for random faults")
    parser.add_argument("--webhook-url", default=None, metavar="URL",
                        help="POST signed webhook events here (http:// on loopback); needs --webhook-secret-env")
    parser.add_argument("--webhook-secret-env", default=None, metavar="VAR",
                        help="environment variable holding the whsec_ signing secret")
    args = parser.parse_args(argv)
    if not is_loopback_host(args.host):
        parser.error(
            f"refusing non-loopback host {args.host!r} (use 127.0.0.1, ::1 or localhost)"
        )
    secret: str | None = None
    if args.webhook_secret_env:
        secret = os.environ.get(args.webhook_secret_env)
        if not secret:
            parser.error(f"environment variable {args.webhook_secret_env} (the webhook secret) is not set")
    if bool(args.webhook_url) != bool(secret):
        parser.error("--webhook-url and --webhook-secret-env go together")
    try:
        rates = dict(_iter_rates(args.fault_rate))
        cleanup_rates = dict(_iter_rates(args.cleanup_fault_rate))
        # validate early
        check = Simulator(args.host, args.port, webhook_url=args.webhook_url, webhook_secret=secret)
        check.set_fault_rates(rates)
        check.set_fault_rates(cleanup_rates, method="cleanup")
    except ValueError as exc:
        parser.error(str(exc))
    return serve(args.host, args.port, args.complete_after, rates, args.seed,
                 webhook_url=args.webhook_url, webhook_secret=secret, cleanup_fault_rates=cleanup_rates)
