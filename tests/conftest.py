"""Shared fixtures for reclaim's tests: a live simulator, a real ledger file, a config, and the CLI.

Everything here is real: the ledger is a SQLite file in `tmp_path`, the remote is `ledger.simulator`
on a loopback port (the google-genai SDK talks to it over HTTP), and `run_cli` runs the installed
`reclaim` command in a subprocess. Nothing here binds a fixed port, so `pytest -n 2` is safe.

Fixtures (all function-scoped):

- `sim`            a started `Simulator` (jobs complete at once); stopped after the test.
- `clock`          a `ManualClock` at `T0` (2026-12-01T12:00:00Z); move it with `.advance()` / `.set()`.
- `ledger_path`    `tmp_path / "reclaim.db"`, created with `create_ledger` (no connection left open). In a
                   module that sets `BACKENDS = ("sqlite", "postgresql")`, each test runs on both: on
                   PostgreSQL `ledger_path` is the `postgresql://` URL (a str) of a fresh database on
                   the session's throwaway server (`pg_server`).
- `pg_server`      (session) a started `tests.pg_server.PgServer`; the tests that need it skip with the
                   reason when no server can be started, or fail when RECLAIM_REQUIRE_PG=1 (CI).
- `pg_url`         a fresh, empty database on `pg_server` (no ledger in it yet).
- `make_config`    `make_config(base_url=None, timeout_seconds=5.0, daily_quota=100, policy=None,
                   operators=None) -> dict`: a config dict (TOML-shaped) with one gemini remote and the
                   operation `article.generate` (`OP`); base_url defaults to the `sim` fixture's URL.
- `config_dict`    `make_config()` with the defaults.
- `cfg`            `parse_config(config_dict)`: the validated `Config`.
- `write_config`   `write_config(dict, path=None) -> Path`: writes TOML (default `tmp_path/"reclaim.toml"`).
- `config_path`    `write_config(config_dict)`: the TOML file the CLI reads.
- `conn`           a connection to `ledger_path` for the test's own ledger calls; closed after.
- `fingerprint`    `fingerprint(path) -> str`: `ledger_reads.job_fingerprint` of the ledger, read on a FRESH
                   read-only connection (closed at once). Compare before/after a refused command.
- `file_digest`    `file_digest(path) -> str`: sha256 of a file's bytes (or "missing"), for files that
                   are not usable ledgers (not SQLite, too new, ...), where `fingerprint` cannot open them.
- `read_job`       `read_job(path, job_id, operation=OP) -> Job | None` on a FRESH connection.
- `run_cli`        `run_cli(*args, ledger=..., config=..., now=None, operator=None, env=None,
                   timeout=60, prefix=None, stdin=None) -> CliResult(rc, stdout, stderr)`: runs `[*prefix, reclaim, *ARGS]` with env
                   RECLAIM_LEDGER / RECLAIM_CONFIG (default: the `ledger_path` / `config_path` paths,
                   whether or not they exist) and RECLAIM_TEST_NOW=`now` (the test launcher's clock) when given; cwd is `tmp_path`;
                   stdin is the text `stdin`, empty when None.

- `start_cli`      `start_cli(*args, **same keywords as run_cli) -> Popen`: starts `reclaim ARGS` without
                   waiting (stdout/stderr piped, text). `proc.communicate(timeout=...)` collects it;
                   any still running at teardown are killed.
- `free_port`      `free_port() -> int`: a loopback port that was free a moment ago.
- `wait_for`       `wait_for(pred, timeout=10.0, what=...)`: poll until truthy, else fail the test.

Do not `from conftest import ...` in test files: tests/console/ has its own conftest.py, and both are
imported as the module `conftest`, so such an import can pick the wrong one. Use the fixtures; the
constants are repeated where needed (T0 = 2026-12-01T12:00:00Z, operation "article.generate").
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from child_env import inherited_env
from cli_in_process import process_boundary, run_in_process
from hypothesis import settings
from ledger_reads import job_fingerprint

from ledger.clock import ManualClock, parse_time
from ledger.config import Config, parse_config
from ledger.db import connect, create_ledger
from ledger.model import Job, JobKey
from ledger.simulator import Simulator
from ledger.store import jobs as jobs_store

ROOT = Path(__file__).resolve().parents[1]

# Hypothesis: `ci` (the default, `make test`) runs each property's full count; `fast` (`make test-fast`, or
# RECLAIM_HYPOTHESIS_PROFILE=fast) a tenth of it. Tests size their counts with hypothesis_budget.examples().
settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("fast", max_examples=10, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("RECLAIM_HYPOTHESIS_PROFILE", "ci"))
T0 = parse_time("2026-12-01T12:00:00Z")
OP = "article.generate"
MODEL = "gemini-sim"


@pytest.fixture(autouse=True)
def _own_signing_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's processes keep their signing key (ledger.signing) in its own folder, never in the home of the
    account running the tests: `reclaim init` makes one there, and what runs after it in the test signs with it.
    No test inherits the signer an earlier one left this process holding."""
    from ledger.signing import use_signer

    monkeypatch.setenv("RECLAIM_SIGNING_KEY_FILE", str(tmp_path / ".reclaim-signing-key"))
    use_signer(None)
    yield
    use_signer(None)


@pytest.fixture
def owner_signer(tmp_path: Path) -> Any:
    """This process signs every event it writes with a new key of the test's own, as the ledger's owner would
    (`reclaim init` makes and takes one the same way); the signer."""
    from ledger.identity import os_account
    from ledger.signing import key_path, new_key, use_signer

    signer = new_key(key_path(), os_account())
    use_signer(signer)
    return signer


def _reclaim_command() -> list[str]:
    script = Path(sys.executable).with_name("reclaim")
    return [str(script)] if script.exists() else [sys.executable, "-m", "console"]


RECLAIM = _reclaim_command()
"""The argv prefix that runs the installed `reclaim` CLI with this interpreter's environment."""
CLOCKED_RECLAIM = [sys.executable, str(Path(__file__).parent / "support" / "clocked_reclaim.py")]
"""The same CLI with the clock RECLAIM_TEST_NOW / RECLAIM_TEST_CLOCK_OFFSET ask for (test-only launcher)."""
SENDER = "scheduler"
"""The tests' scheduler account: the one operator with the sender role (submit, tick, worker)."""


def reclaim_argv(env: dict[str, str]) -> list[str]:
    """The argv prefix for a CLI run in `env`: the clocked launcher when the env asks for a test clock."""
    clocked = "RECLAIM_TEST_NOW" in env or "RECLAIM_TEST_CLOCK_OFFSET" in env
    return CLOCKED_RECLAIM if clocked else RECLAIM


class CliResult(NamedTuple):
    """What one `reclaim` run returned; unpacks as (rc, stdout, stderr)."""

    rc: int
    stdout: str
    stderr: str


def _free_port() -> int:
    """A loopback port that was free a moment ago (bind to 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.01, what: str = "condition") -> Any:
    """Poll `pred` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"{what} not met within {timeout}s")
        time.sleep(step)


# -- TOML --------------------------------------------------------------------------------------------
def _toml_key(k: str) -> str:
    bare = k and all(c.isalnum() or c in "-_" for c in k)
    return k if bare else json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def to_toml(doc: dict[str, Any]) -> str:
    """Serialise a config dict as TOML (scalars and lists inline, dicts as [tables])."""
    lines: list[str] = []

    def emit(table: dict[str, Any], prefix: tuple[str, ...]) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        tables = {k: v for k, v in table.items() if isinstance(v, dict)}
        if prefix and (scalars or not tables):
            lines.append("[" + ".".join(_toml_key(p) for p in prefix) + "]")
        for k, v in scalars.items():
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for k, v in tables.items():
            emit(v, (*prefix, k))

    emit(doc, ())
    return "\n".join(lines) + "\n"


def build_config(
    base_url: str,
    sink: Path,
    *,
    timeout_seconds: float = 5.0,
    daily_quota: int = 100,
    policy: dict[str, Any] | None = None,
    operators: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The tests' standard config: declared identity; alice triage, bob triage+approver, carol approver,
    scheduler sender; one gemini op."""
    return {
        "timezone": "UTC",
        "identity": {"source": "declared"},
        "policy": {
            "lease_seconds": 60,
            "stale_reserving_seconds": 120,
            "retry_backoff_seconds": 30,
            **(policy or {}),
        },
        "operators": operators
        if operators is not None
        else {"alice": ["triage"], "bob": ["triage", "approver"], "carol": ["approver"], SENDER: ["sender"]},
        "remotes": {
            "gemini": {"kind": "gemini", "base_url": base_url, "model": MODEL, "timeout_seconds": timeout_seconds}
        },
        "operations": {OP: {"remote": "gemini", "daily_quota": daily_quota, "sink": str(sink)}},
    }


# -- fixtures ----------------------------------------------------------------------------------------
@pytest.fixture
def free_port() -> Callable[[], int]:
    """`free_port()`: a loopback port that was free a moment ago (no fixed ports: -n 2 safe)."""
    return _free_port


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    """`wait_for(pred, timeout=10.0, step=0.01, what='condition')`: poll until truthy or fail."""
    return _wait_for


@pytest.fixture
def sim() -> Iterator[Simulator]:
    """A started loopback simulator on a free port; interactions complete at once."""
    s = Simulator(complete_after=0.0).start()
    try:
        yield s
    finally:
        s.stop()


def pytest_configure(config: pytest.Config) -> None:
    """Let Ctrl-C reach the programs the tests start. A test run started in the background of a shell without job
    control (`make test &` in a script) inherits SIGINT ignored, and so would every `reclaim` it starts: `events
    --follow`, which ends on Ctrl-C, would then never end. Python turns a SIGINT it may handle into
    KeyboardInterrupt, and a started program gets the default (an ignored signal stays ignored across exec)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at T0 (2026-12-01T12:00:00Z)."""
    return ManualClock(T0)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test of a module that lists `BACKENDS`, and every test marked `both_backends`, once per backend
    (fixture `ledger_backend`), except those marked `sqlite_only` (about the file itself: its mode, its bytes,
    SQLite's lock); the postgresql run is marked `pg`."""
    backends = getattr(metafunc.module, "BACKENDS", None)
    if metafunc.definition.get_closest_marker("both_backends"):
        backends = ("sqlite", "postgresql")
    if metafunc.definition.get_closest_marker("sqlite_only"):
        backends = ("sqlite",)
    if backends and "ledger_backend" in metafunc.fixturenames:
        params = [pytest.param(b, marks=pytest.mark.pg) if b == "postgresql" else b for b in backends]
        metafunc.parametrize("ledger_backend", params, indirect=True)


@functools.cache
def _body(function: Callable[..., Any]) -> str:
    """The test function's source (once per function: a parametrized test has many items)."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _names_a_crash_point(body: str) -> bool:
    """Whether a test's own body sets a crash or pause point (the command then kills or stops its process)."""
    return "RECLAIM_CRASH_AT" in body or "RECLAIM_PAUSE_AT" in body


def _starts_a_process(body: str) -> bool:
    """Whether a test's own body starts a program itself (`subprocess`, a `multiprocessing` Process), or runs
    reclaim behind a prefix (a pty, an OS account)."""
    return "subprocess." in body or ".Process(" in body or "prefix=" in body


MARK_BY_FIXTURE = {"pg_server": "pg", "private_pg_server": "pg", "start_cli": "process", "snap_compare": "snapshot"}
"""A test that uses one of these fixtures (directly or through another) gets the marker."""
MARK_BY_MODULE = {
    "test_browser_seat.py": ("browser", "process"),
    "test_prometheus.py": ("prometheus", "process"),
    "test_chaos.py": ("chaos", "process"),
    "test_pause_chaos.py": ("chaos", "process"),
    "test_crash_points.py": ("chaos", "process"),
}
"""Modules whose every test needs a server, a browser, or kills processes."""
LEFT_OUT_OF_THE_LOOP = ("pg", "browser", "prometheus", "chaos", "process", "slow")
"""What `make test-fast` leaves out (the Makefile's FAST_MARKS says the same)."""
SLOW_SECONDS = 1.0
"""A test that `make test-fast` would run and whose call takes longer than this carries `slow` (by hand); `make
test` names those that do not, so the loop stays fast as tests are added."""
RUN_FIRST = ("chaos", "browser", "prometheus", "pg")
"""Run order under xdist: the longest kinds start first, so no worker runs one alone at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by what it needs (`pg`, `process`, `snapshot`, `browser`, `prometheus`, `chaos`: what
    `make test-fast` selects on), then order the run: chaos, browser, Prometheus and PostgreSQL tests first,
    then tests/system/ and the property tests, then the rest (each group in collection order)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, mark in MARK_BY_FIXTURE.items():
            if fixture in names:
                item.add_marker(mark)
        for mark in MARK_BY_MODULE.get(item.path.name, ()):
            item.add_marker(mark)
        if item.path.parent.name == "system":
            item.add_marker("process")
        body = _body(item.function) if isinstance(item, pytest.Function) else ""
        if _names_a_crash_point(body):
            item.add_marker("chaos")
            item.add_marker("process")
        elif _starts_a_process(body):
            item.add_marker("process")

    def group(item: pytest.Item) -> int:
        for rank, mark in enumerate(RUN_FIRST):
            if item.get_closest_marker(mark):
                return rank
        long_running = item.path.parent.name == "system" or getattr(
            getattr(item, "function", None), "is_hypothesis_test", False)
        return len(RUN_FIRST) + (0 if long_running else 1)

    items.sort(key=group)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """After a run: name the tests the edit-test loop would run that took longer than SLOW_SECONDS (mark them
    `slow`, or make them faster). A loaded machine can push a test over; the list is advice, not a failure."""
    over = []
    for report in terminalreporter.stats.get("passed", []):
        if report.when != "call" or report.duration <= SLOW_SECONDS:
            continue
        if not any(mark in report.keywords for mark in LEFT_OUT_OF_THE_LOOP):
            over.append(report)
    if over:
        terminalreporter.section(f"over {SLOW_SECONDS:g} s and not marked slow (make test-fast runs them)")
        for report in sorted(over, key=lambda r: -r.duration):
            terminalreporter.write_line(f"{report.duration:.2f}s {report.nodeid}")


@pytest.fixture
def ledger_backend(request: pytest.FixtureRequest) -> str:
    """'sqlite', or the backend this run of a multi-backend test is for."""
    return str(getattr(request, "param", "sqlite"))


def _pg_or_skip(start: Callable[[], Any]) -> Any:
    """`start()` a PostgreSQL server; skip the test saying why it cannot (fail with RECLAIM_REQUIRE_PG=1)."""
    import pg_server as pgs

    why = pgs.unavailable()
    if why is None:
        try:
            return start()
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            why = f"PostgreSQL server did not start: {e}"
    if os.environ.get("RECLAIM_REQUIRE_PG") == "1":
        pytest.fail(f"RECLAIM_REQUIRE_PG=1 but {why}")
    pytest.skip(str(why))


@pytest.fixture
def private_pg_server() -> Iterator[Any]:
    """A PostgreSQL server of this test's own, for a test that stops and starts it (`halt()`, `resume()`):
    the session's server is shared with the other xdist worker, whose tests must not see it go down."""
    import pg_server as pgs

    server = _pg_or_skip(lambda: pgs.PgServer().start())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's throwaway PostgreSQL server (tests/support/pg_server.py), one for all xdist workers: the
    first to need it starts it under a file lock in the session's shared temporary folder, the others attach.
    It is stopped at the end of the session (`pytest_sessionfinish` on the controller, or here without xdist)."""
    import pg_server as pgs

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    server = _pg_or_skip(lambda: pgs.shared(root))
    try:
        yield server
    finally:
        if not worker:
            pgs.stop_shared(root)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the xdist controller: stop the PostgreSQL server its workers shared, once they have all finished."""
    config = session.config
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if getattr(config.option, "numprocesses", None):
        import pg_server as pgs

        pgs.stop_shared(config._tmp_path_factory.getbasetemp())  # the folder the workers' basetemps are in


@pytest.fixture
def pg_url(pg_server: Any) -> str:
    """A fresh, empty database on the session's server: its postgresql:// URL."""
    return str(pg_server.new_database())


@pytest.fixture
def ledger_path(tmp_path: Path, ledger_backend: str, request: pytest.FixtureRequest) -> Path:
    """A freshly created ledger: the file tmp_path/'reclaim.db', or on PostgreSQL a fresh database's URL."""
    if ledger_backend == "postgresql":
        url = request.getfixturevalue("pg_server").new_ledger()
        create_ledger(url)  # already current: allocates the ledger's outcome journal on this host, as a new one's
        return url  # type: ignore[return-value]  # a str: the tests pass it where a path goes
    path = tmp_path / "reclaim.db"
    create_ledger(path)
    return path


@pytest.fixture
def make_config(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """Factory for config dicts; base_url defaults to the `sim` fixture's URL (started on demand)."""

    def make(base_url: str | None = None, **kw: Any) -> dict[str, Any]:
        url = base_url if base_url is not None else request.getfixturevalue("sim").url
        return build_config(url, tmp_path / "results", **kw)

    return make


@pytest.fixture
def config_dict(make_config: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The standard config as a dict, pointing at `sim`."""
    return make_config()


@pytest.fixture
def cfg(config_dict: dict[str, Any], tmp_path: Path) -> Config:
    """The standard config, validated."""
    return parse_config(config_dict, base_dir=tmp_path)


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write a config dict as TOML; returns the path (default tmp_path/'reclaim.toml')."""

    def write(doc: dict[str, Any], path: Path | None = None) -> Path:
        p = path or tmp_path / "reclaim.toml"
        p.write_text(to_toml(doc), encoding="utf-8")
        return p

    return write


@pytest.fixture
def config_path(write_config: Callable[..., Path], config_dict: dict[str, Any]) -> Path:
    """The standard config written to tmp_path/'reclaim.toml'."""
    return write_config(config_dict)


@pytest.fixture
def conn(ledger_path: Path) -> Iterator[sqlite3.Connection]:
    """A read-write connection to `ledger_path` for the test's own ledger calls."""
    c = connect(ledger_path)
    try:
        yield c
    finally:
        c.close()


def _fingerprint(path: Path) -> str:
    c = connect(path, readonly=True)
    try:
        return job_fingerprint(c)
    finally:
        c.close()


def _file_digest(path: Path) -> str:
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "missing"


def _read_job(path: Path, job_id: str, operation: str = OP) -> Job | None:
    c = connect(path, readonly=True)
    try:
        return jobs_store.find_job(c, JobKey(job_id, operation))
    finally:
        c.close()


@pytest.fixture
def fingerprint() -> Callable[[Path], str]:
    """`fingerprint(path)`: digest of every ledger row, from a fresh read-only connection."""
    return _fingerprint


@pytest.fixture
def file_digest() -> Callable[[Path], str]:
    """`file_digest(path)`: sha256 of the file's bytes, or 'missing'."""
    return _file_digest


@pytest.fixture
def read_job() -> Callable[..., Job | None]:
    """`read_job(path, job_id, operation=OP)`: the job as a fresh connection sees it, or None."""
    return _read_job


def cli_env(ledger: Path, config: Path, now: float | str | None = None, operator: str | None = None,
            extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a `reclaim` subprocess gets: no inherited RECLAIM_* except what is given and the test's
    signing key file; the
    operator is `operator`, else the scheduler (declared identity); `now` freezes the test launcher's clock."""
    env = inherited_env()
    env.update(RECLAIM_LEDGER=str(ledger), RECLAIM_CONFIG=str(config), PYTHONDONTWRITEBYTECODE="1",
               NO_COLOR="1", COLUMNS="200", RECLAIM_OPERATOR=operator if operator is not None else SENDER)
    if now is not None:
        env["RECLAIM_TEST_NOW"] = str(now)
    env.update(extra or {})
    return env


def _default_ledger(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The ledger a CLI run uses unless told: the test's `ledger_path` on PostgreSQL, else the file's path."""
    if "ledger_path" in request.fixturenames and request.getfixturevalue("ledger_backend") == "postgresql":
        return request.getfixturevalue("ledger_path")  # type: ignore[no-any-return]  # the URL, a str
    return tmp_path / "reclaim.db"


@pytest.fixture
def run_cli(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., CliResult]:
    """Run `reclaim ARGS`; returns CliResult(rc, stdout, stderr).

    The command runs inside this process (tests/support/cli_in_process.py: the same environment, working folder,
    clock, output and exit code as a subprocess would have), unless the process boundary is the point: a test
    marked `process`, a `prefix` (a pty, another OS account), a command that runs until stopped, a crash or
    pause point, or an argument that is not valid UTF-8. Those run `reclaim` as a real subprocess.
    """
    default_ledger = _default_ledger(tmp_path, request)
    in_process = request.node.get_closest_marker("process") is None

    def run(
        *args: str,
        ledger: Path | None = None,
        config: Path | None = None,
        now: float | str | None = None,
        operator: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
        prefix: list[str] | None = None,
        stdin: str | None = None,
    ) -> CliResult:
        full_env = cli_env(ledger or default_ledger, config or tmp_path / "reclaim.toml", now, operator, env)
        if in_process and prefix is None and process_boundary(args, full_env) is None:
            return CliResult(*run_in_process(args, full_env, tmp_path, stdin))
        fed: dict[str, Any] = {"stdin": subprocess.DEVNULL} if stdin is None else {"input": stdin}
        proc = subprocess.run(
            [*(prefix or []), *reclaim_argv(full_env), *args],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            **fed,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def start_cli(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start `reclaim ARGS` in the background; returns the Popen. Leftovers are killed at teardown."""
    default_ledger = _default_ledger(tmp_path, request)
    started: list[subprocess.Popen[str]] = []

    def start(
        *args: str,
        ledger: Path | None = None,
        config: Path | None = None,
        now: float | str | None = None,
        operator: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[str]:
        full_env = cli_env(ledger or default_ledger, config or tmp_path / "reclaim.toml", now, operator, env)
        proc = subprocess.Popen(
            [*reclaim_argv(full_env), *args], cwd=tmp_path, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
