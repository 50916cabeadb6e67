"""A real Prometheus scrapes `reclaim metrics --listen`, and its own tools check the output and the alert rules.

Debian's `prometheus` package (`make prometheus`; `make test` depends on it) brings `prometheus` and
`promtool`. The test starts its own `prometheus` on a free loopback port with a temporary storage folder and a
scrape config pointed at `reclaim metrics --listen 127.0.0.1:<free>` (never a daemon the package may have
started), waits (bounded) until its query API returns a reclaim figure, and checks the value. `promtool check
metrics` lints the exposition; `promtool check rules` and `promtool test rules` (one test case per alert) run
on docs/prometheus/. Without the binaries these tests skip, unless running as root or with
RECLAIM_REQUIRE_PROMETHEUS=1 (CI): then they fail, since `make test` installs them there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.clock import ManualClock
from ledger.config import Config
from ledger.db import connect
from ledger.simulator import Simulator
from ledger.worker import submit_now

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus" / "reclaim-rules.yml"
RULE_TESTS = sorted((ROOT / "docs" / "prometheus" / "tests").glob("*.test.yml"))
RUNBOOK = ROOT / "docs" / "runbook.md"
OP = "article.generate"


def _tool(name: str) -> str:
    """The path of `name`; skip when missing, unless root or RECLAIM_REQUIRE_PROMETHEUS=1 (then fail)."""
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found:
        return found
    why = f"{name} not found (install Debian's prometheus package: 'make prometheus', or apt-get install prometheus)"
    if os.environ.get("RECLAIM_REQUIRE_PROMETHEUS") == "1" or os.geteuid() == 0:
        pytest.fail(f"{why}; required here (root or RECLAIM_REQUIRE_PROMETHEUS=1)")
    pytest.skip(why)


@pytest.fixture
def promtool() -> str:
    return _tool("promtool")


@pytest.fixture
def prometheus_bin() -> str:
    return _tool("prometheus")


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _held_job(conn: Any, cfg: Config, sim: Simulator, clock: ManualClock) -> None:
    sim.add_fault("status", status=503)  # the create's answer is lost in a 5xx: held
    assert submit_now(conn, cfg, OP, {"input": "x"}, clock=clock, job_id="held-1").state == "held"


@pytest.fixture
def metrics_url(sim: Simulator, cfg: Config, config_path: Path, ledger_path: Path, clock: ManualClock,
                start_cli: Callable[..., subprocess.Popen[str]]) -> str:
    """A ledger with one held job, served by `reclaim metrics --listen 127.0.0.1:<free>`: its host:port."""
    conn = connect(ledger_path)
    _held_job(conn, cfg, sim, clock)
    conn.close()
    proc = start_cli("metrics", "--listen", "127.0.0.1:0", ledger=ledger_path, config=config_path, now=clock.now())
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "metrics listening on" in line, proc.communicate(timeout=10)
    return line.strip().rsplit(" ", 1)[-1]


@pytest.fixture
def prometheus(prometheus_bin: str, metrics_url: str, tmp_path: Path) -> Iterator[str]:
    """Our own `prometheus` on a free loopback port scraping `metrics_url` every second: its base URL."""
    target = urllib.parse.urlsplit(metrics_url)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: reclaim\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: ['{target.netloc}']\n",
        encoding="utf-8",
    )
    for attempt in range(5):  # a port picked free may be taken before prometheus binds it: pick another
        port = _port()
        log = tmp_path / f"prometheus-{attempt}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / f'tsdb-{attempt}'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as reply:
                    ready = reply.status == 200
            except (urllib.error.URLError, OSError):
                ready = False
            if ready:
                break
            time.sleep(0.1)
        if ready:
            try:
                yield base
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            return
        proc.kill()
        proc.wait(timeout=10)
        text = log.read_text(errors="replace")
        if "address already in use" not in text:
            pytest.fail(f"prometheus did not become ready: {text[-2000:]}")
    pytest.fail("prometheus: five free ports in a row were taken before it could bind one")


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        doc = json.loads(reply.read())
    assert doc["status"] == "success", doc
    return list(doc["data"]["result"])


def test_a_real_prometheus_scrapes_the_ledgers_figures(prometheus: str, wait_for: Callable[..., Any]) -> None:
    held = wait_for(lambda: _query(prometheus, f'reclaim_jobs{{job="reclaim",operation="{OP}",state="held"}}'),
                    timeout=60, what="prometheus to have scraped reclaim_jobs")
    assert [float(r["value"][1]) for r in held] == [1.0]
    assert [float(r["value"][1]) for r in _query(prometheus, 'up{job="reclaim"}')] == [1.0]
    assert [float(r["value"][1]) for r in _query(prometheus, f'reclaim_quota_used{{operation="{OP}"}}')] == [1.0]
    # a counter initialised at zero for each configured operation, so the first fenced write is an increase
    assert [float(r["value"][1]) for r in _query(prometheus, f'reclaim_fenced_writes_total{{operation="{OP}"}}')] \
        == [0.0]


def test_promtool_check_metrics_passes_on_the_output(
    sim: Simulator, cfg: Config, config_path: Path, ledger_path: Path, clock: ManualClock, promtool: str,
    run_cli: Callable[..., Any],
) -> None:
    conn = connect(ledger_path)
    _held_job(conn, cfg, sim, clock)
    conn.close()
    done = run_cli("metrics", ledger=ledger_path, config=config_path)
    assert done.rc == 0, done.stderr
    assert 'reclaim_jobs{operation="article.generate",state="held"} 1.0' in done.stdout
    checked = subprocess.run([promtool, "check", "metrics"], input=done.stdout, capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0 and checked.stdout.strip() == "" and checked.stderr.strip() == "", checked


def test_promtool_checks_the_rules_and_runs_one_unit_test_per_alert(promtool: str) -> None:
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked
    tested = subprocess.run([promtool, "test", "rules", *map(str, RULE_TESTS)], capture_output=True, text=True,
                            timeout=120, cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(RULE_TESTS) >= 4

    rules = RULES.read_text(encoding="utf-8")
    alerts = re.findall(r"^\s+- alert: (\w+)$", rules, re.M)
    assert {"ReclaimHeldJobPastDue", "ReclaimNoWorkerPass", "ReclaimRemotePaused", "ReclaimWebhookRefusalsRising",
            "ReclaimFencedWrite", "ReclaimJournalNotEmpty"} <= set(alerts)
    tests_text = "\n".join(p.read_text(encoding="utf-8") for p in RULE_TESTS)
    for alert in alerts:  # each alert is tested, firing at least once
        assert re.search(rf"alertname: {alert}\n\s+exp_alerts:\n\s+- exp_labels", tests_text), alert
    # every summary names a reclaim command, every runbook link lands on a section of docs/runbook.md
    assert len(re.findall(r"summary: \".*'reclaim [a-z]", rules)) == len(alerts)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^## (.+)$", RUNBOOK.read_text(encoding="utf-8"), re.M)}
    links = re.findall(r'runbook_url: "docs/runbook.md#([a-z0-9-]+)"', rules)
    assert len(links) == len(alerts) and set(links) <= anchors, (links, anchors)
