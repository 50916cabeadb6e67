"""The ledger's figures for Prometheus: a collector that reads the ledger on every scrape.

Every figure is computed from the ledger (its events and tables, `ledger.store.metrics`), never from a
process's own counters, so every process on every host that serves them reports the same numbers and a
restart loses nothing. The one exception is `reclaim_journal_pending_outcomes`: the outcome journal is a
file on the serving host (see `ledger.journal`), labelled with that host.

`LedgerCollector` yields metric families to a `prometheus_client` registry; `exposition()` renders the
registry once (`generate_latest`), `make_server()` serves it at `/metrics` over HTTP.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.simple_server import make_server as wsgi_server

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ledger import journal, store
from ledger.clock import Clock
from ledger.config import Config
from ledger.errors import BadInput, LedgerError
from ledger.status import LiveFigures, read_live_figures
from ledger.store import Connection, ledger_clock
from ledger.store import jobs as jobs_store
from ledger.store import metrics as q
from ledger.store import verify as verify_store

NOTIFY_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 86_400.0)
"""Seconds from a state change to its notification being delivered: a second to a day."""
RESOLUTION_BUCKETS = (1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 86_400.0)
"""Seconds from a piece of evidence arriving to the hold it resolved: a pass or two, to a day."""
STALE_OUTCOMES = {"orphan_found": "handle_found", "orphan_held": "held"}
"""How a stale send (lease expired, no outcome recorded) was recovered, by the event that recorded it."""
DECIDED_BY = {True: "evidence", False: "person"}
"""Who decided a hold: the worker on the remote's own evidence, or a person."""

Counts = dict[tuple[str, ...], int]
"""LiveFigures by their label values."""


class LedgerCollector(Collector):
    """Reads the ledger once per `collect()` (one snapshot) and yields the `reclaim_*` metric families.

    `open_conn` opens a (read-only) connection; it is opened on the first scrape and again after a read
    failed. A ledger that cannot be read yields `reclaim_ledger_up 0` (and the error on stderr) instead of
    failing the scrape, unless `strict`: then the LedgerError propagates. Thread-safe:
    scrapes read one at a time.
    """

    def __init__(self, open_conn: Callable[[], Connection], config: Config, clock: Clock,
                 journal_of: str | None = None, host: str | None = None, strict: bool = False) -> None:
        self.open_conn = open_conn
        self.config = config
        self.clock = clock
        self.journal_of = journal_of
        self.host = host or socket.gethostname()
        self.strict = strict
        self.conn: Connection | None = None
        self.lock = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: registering must not read the ledger (the figures are named as they are read)."""
        return []

    def collect(self) -> Iterable[Metric]:
        """Read the ledger and yield every family; `reclaim_ledger_up` says whether the read succeeded."""
        with self.lock:
            started = time.monotonic()
            try:
                families = self._read()
                up = 1.0
            except LedgerError as e:
                if self.strict:
                    self._drop()
                    raise
                print(f"reclaim metrics: the ledger could not be read: {e}", file=sys.stderr, flush=True)
                self._drop()
                families, up = [], 0.0
            elapsed = time.monotonic() - started
        yield from families
        yield _gauge("reclaim_ledger_up", "1 when this scrape read the ledger, 0 when it could not.", [], [((), up)])
        yield _gauge("reclaim_ledger_read_seconds", "How long this scrape took to read the ledger.", [],
                     [((), elapsed)])

    def close(self) -> None:
        """Close the connection, if open."""
        with self.lock:
            self._drop()

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # a broken connection may refuse even this
                pass
            self.conn = None

    def _read(self) -> list[Metric]:
        if self.conn is None:
            self.conn = self.open_conn()
        conn = self.conn
        with store.read_snapshot(conn):  # one snapshot for every figure
            now = ledger_clock(conn, self.clock).now()
            tallies = q.event_tallies(conn)  # kept by the events' trigger: a few rows, never a scan of the events
            figures = read_live_figures(conn, self.config, now)  # what `reclaim status` and the console show too
            out = [*_jobs(conn, now), *_recovery(conn, self.config, tallies), _verified(conn),
                   *_notifications(conn), *_webhooks(conn, figures), *_quota_and_remotes(figures, self.config),
                   *_workers(figures),
                   _counter("reclaim_audit_events", "Events in the ledger: the audit chain's length (compare a copy "
                            "of its head kept outside the ledger with 'reclaim verify').", [],
                            [((), sum(t.count for t in tallies))])]
        out.extend(self._journal())
        return out

    def _journal(self) -> list[Metric]:
        """Outcomes waiting in this host's journal (the ledger refused them; the next pass replays them)."""
        if self.journal_of is None:
            return []
        # The connection names a PostgreSQL ledger's journal by the database's identity, not the URL's text.
        where = journal.of(self.conn) if self.conn is not None else self.journal_of
        try:
            n = len(journal.pending(where))
        except OSError as e:  # e.g. no permission to lock it: say nothing rather than a wrong zero
            print(f"reclaim metrics: the outcome journal could not be read: {e}", file=sys.stderr, flush=True)
            return []
        return [_gauge("reclaim_journal_pending_outcomes", "Send outcomes in this host's outcome journal, waiting to "
                       "be replayed into the ledger (run 'reclaim tick').", ["host"], [((self.host,), n)])]


def _gauge(name: str, doc: str, labels: list[str], samples: Iterable[tuple[tuple[str, ...], float]],
           unit: str = "") -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels, unit=unit)
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _counter(name: str, doc: str, labels: list[str], samples: Iterable[tuple[tuple[str, ...], float]]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


def _histogram(name: str, doc: str, labels: list[str], rows: Iterable[q.Histogram]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for h in rows:
        buckets: list[tuple[str, float]] = [(_le(b), float(n)) for b, n in zip(h.bounds, h.buckets, strict=True)]
        buckets.append(("+Inf", float(h.count)))
        family.add_metric(list(h.labels), buckets, h.total)
    return family




def _le(bound: float) -> str:
    """A bucket bound as Prometheus's clients write it (60.0, 1e+06, +Inf)."""
    return str(floatToGoString(bound))  # type: ignore[no-untyped-call]  # the library leaves it unannotated


def _jobs(conn: Connection, now: float) -> Iterator[Metric]:
    counts: Counts = {(op, state): n for op, states in jobs_store.operation_counts(conn).items()
                      for state, n in states.items()}
    yield _gauge("reclaim_jobs", "Jobs by operation and state.", ["operation", "state"], sorted(counts.items()))
    held = q.held_figures(conn, now)
    yield _gauge("reclaim_held_jobs_oldest_age_seconds", "Seconds since the oldest held job of each operation was "
                 "held ('reclaim list --held').", ["operation"],
                 (((h.operation,), max(now - h.oldest_held_at, 0.0)) for h in held if h.oldest_held_at is not None))
    yield _gauge("reclaim_held_jobs_past_due", "Held jobs whose due time has passed ('reclaim list --held').",
                 ["operation"], (((h.operation,), h.past_due) for h in held))


def _recovery(conn: Connection, config: Config, tallies: Iterable[q.EventTally]) -> Iterator[Metric]:
    ops = sorted(config.operations)
    stale: Counts = dict.fromkeys(((op, o) for op in ops for o in STALE_OUTCOMES.values()), 0)
    abandoned: Counts = dict.fromkeys(((op,) for op in ops), 0)
    replayed: Counts = dict.fromkeys(((op,) for op in ops), 0)
    dupes: Counts = dict.fromkeys(((op,) for op in ops), 0)
    cancelled: Counts = dict.fromkeys(((op,) for op in ops), 0)
    resolved: Counts = dict.fromkeys(
        ((op, d, b) for op in ops for d in q.RESOLUTION_KINDS for b in DECIDED_BY.values()), 0)
    for t in tallies:
        op = t.operation
        if t.kind in STALE_OUTCOMES:
            _add(stale, (op, STALE_OUTCOMES[t.kind]), t.count)
        elif t.kind == "send_abandoned":
            _add(abandoned, (op,), t.count)
        elif t.kind == "duplicate_send":
            _add(dupes, (op,), t.count)
            _add(cancelled, (op,), t.cancelled)
        elif t.kind in q.RESOLUTION_KINDS and t.from_state == "held":
            _add(resolved, (op, t.kind, DECIDED_BY[t.system]), t.count)
        if t.kind in q.OUTCOME_KINDS:
            _add(replayed, (op,), t.journaled)
    fenced: Counts = dict.fromkeys(((op,) for op in ops), 0)
    for op, _event, n in q.fenced_writes(conn):
        _add(fenced, (op,), n)
    yield _counter("reclaim_stale_sends_recovered_total", "Sends found stale (lease expired, no outcome recorded) "
                   "and recovered: a handle found by key, or held for a person.", ["operation", "outcome"],
                   stale.items())
    yield _counter("reclaim_sends_abandoned_total", "Claims given up by the send window before anything was sent.",
                   ["operation"], abandoned.items())
    yield _counter("reclaim_fenced_writes_total", "Writes refused because the writer's epoch was stale "
                   "('reclaim show JOB' lists them).", ["operation"], fenced.items())
    yield _counter("reclaim_journal_replayed_outcomes_total", "Send outcomes the ledger could not take at first, "
                   "journaled, and recorded later by a journal replay.", ["operation"], replayed.items())
    yield _counter("reclaim_duplicate_sends_total", "Second remote interactions detected for one job's idem key.",
                   ["operation"], dupes.items())
    yield _counter("reclaim_duplicate_sends_cancelled_total", "Detected duplicate interactions that were still "
                   "running and were asked to cancel.", ["operation"], cancelled.items())
    yield _counter("reclaim_holds_resolved_total", "Held jobs decided, by decision and by whom: the remote's own "
                   "evidence (the worker) or a person.", ["operation", "decision", "by"], resolved.items())
    yield _histogram("reclaim_evidence_to_resolution_seconds", "Seconds from a webhook delivery's evidence arriving "
                     "to the hold it resolved.", ["operation"], q.evidence_to_resolution(conn, RESOLUTION_BUCKETS))


def _verified(conn: Connection) -> Metric:
    passes = verify_store.last_passes(conn)
    return _gauge("reclaim_verify_last_pass_timestamp_seconds", "When 'reclaim verify' last found nothing wrong (Unix "
                  "time; 0: never): scope 'full' checked every page and event, 'since' what was appended after an "
                  "earlier head. Opening a ledger checks only its header, schema and newest event.", ["scope"],
                  (((scope,), passes[scope].at if scope in passes else 0.0) for scope in ("full", "since")))


def _add(table: Counts, key: tuple[str, ...], n: int) -> None:
    table[key] = table.get(key, 0) + n


def _notifications(conn: Connection) -> Iterator[Metric]:
    yield _gauge("reclaim_notifications", "Notifications in the outbox by channel and state; 'uncertain' ones wait "
                 "for a person ('reclaim notifications').", ["channel", "state"],
                 (((ch, st), n) for ch, st, n in q.outbox_states(conn)))
    yield _histogram("reclaim_notification_delay_seconds", "Seconds from the state change a notification reports to "
                     "its delivery.", ["channel", "kind"], q.notification_delays(conn, NOTIFY_BUCKETS))


def _webhooks(conn: Connection, figures: LiveFigures) -> Iterator[Metric]:
    yield _counter("reclaim_webhook_deliveries_verified_total", "Webhook deliveries whose signature verified, by "
                   "type; recorded='false' for a type reclaim ignores.", ["type", "recorded"],
                   (((t, "true" if rec else "false"), n) for t, rec, n in q.webhook_deliveries(conn)))
    yield _counter("reclaim_webhook_deliveries_refused_total", "Webhook deliveries refused, by reason.", ["reason"],
                   (((reason,), n) for reason, n in figures.webhook_counters.items()))


def _quota_and_remotes(figures: LiveFigures, config: Config) -> Iterator[Metric]:
    used = {d.operation: d.used for d in figures.quota_today}
    ops = sorted(config.operations)
    yield _gauge("reclaim_quota_used", "Reservations counted against each operation's daily quota today (the "
                 "config's time zone).", ["operation"], (((op,), used.get(op, 0)) for op in ops))
    yield _gauge("reclaim_quota_limit", "Each operation's daily quota.", ["operation"],
                 (((op,), config.operations[op].daily_quota) for op in ops))
    paused = figures.paused_remotes
    remotes = sorted(set(config.remotes) | set(paused))
    yield _gauge("reclaim_remote_paused", "1 while a remote is paused because it refuses every job "
                 "('reclaim status'; 'reclaim resume REMOTE' once fixed).", ["remote"],
                 (((r,), 1.0 if r in paused else 0.0) for r in remotes))


def _workers(figures: LiveFigures) -> Iterator[Metric]:
    now, running = figures.now, figures.board.running
    yield _gauge("reclaim_worker_heartbeat_age_seconds", "Seconds since each worker marked running last wrote its "
                 "heartbeat.", ["worker", "host", "kind"],
                 (((w.worker_id, w.host, w.kind), max(now - w.updated_at, 0.0)) for w in running))
    last = figures.board.last_pass_at
    yield _gauge("reclaim_worker_last_pass_age_seconds", "Seconds since any worker's pass last started or ended "
                 "(+Inf: none ever did).", [], [((), max(now - last, 0.0) if last is not None else math.inf)])


def loopback_listen(spec: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`, `localhost` meaning 127.0.0.1) as a loopback address and port (0: a
    free one). Raises BadInput for anything else: the figures are served unauthenticated, so only on loopback
    (like `reclaim serve`); put an authenticating proxy in front to scrape from another host."""
    host, sep, port_text = spec.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BadInput(f"--listen {spec[:80]!r}: expected HOST:PORT, e.g. 127.0.0.1:9464 (port 0 picks a free one)")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise BadInput(f"--listen {spec[:80]!r}: the host must be a loopback IP address such as 127.0.0.1") from None
    if not address.is_loopback:
        raise BadInput(
            f"--listen {spec[:80]!r}: {host} is not a loopback address; the metrics are served on loopback only "
            "(put an authenticating proxy in front of them to scrape from another host)"
        )
    return str(address), int(port_text)


def registry_for(collector: LedgerCollector) -> CollectorRegistry:
    """A registry holding only the ledger's collector (no process or platform metrics of the serving process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's figures in the Prometheus text format, read now."""
    return generate_latest(registry)


def samples(registry: CollectorRegistry) -> list[dict[str, Any]]:
    """The registry's samples, read now, as JSON-ready dicts: name, labels, and the value (a number, or the
    string "+Inf", "-Inf" or "NaN" as Prometheus's own API writes a value JSON cannot hold)."""
    out: list[dict[str, Any]] = []
    for family in registry.collect():
        for s in family.samples:
            v = s.value
            out.append({"name": s.name, "labels": dict(s.labels),
                        "value": v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf"))})
    return out


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a scrape every few seconds is not news."""


class _ThreadingServer(WSGIServer):
    """Serves each request on its own thread, so a slow client cannot hold up a scrape."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        threading.Thread(target=self._serve_one, args=(request, client_address), daemon=True).start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


def make_server(registry: CollectorRegistry, host: str, port: int) -> WSGIServer:
    """A bound HTTP server (not yet serving: `serve_forever()`) answering GET /metrics with the registry's figures
    (read at each request), 404 for any other path, 405 for any other method. Raises OSError when it cannot bind."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"reclaim metrics: the figures are at /metrics\n"]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain"), ("Allow", "GET, HEAD")])
            return [b"reclaim metrics: GET /metrics\n"]
        body = exposition(registry)
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body] if environ.get("REQUEST_METHOD") == "GET" else []

    server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
    return wsgi_server(host, port, app, server_class=server_class, handler_class=_Quiet)
