"""A fork server for tests/system/test_chaos.py: real worker processes that are cheap to start and to kill.

Starting `reclaim` costs about a second (Python, google-genai, the SDK's lazy imports); 200+ kills of
freshly started CLI processes would not fit the test's budget. This script imports and warms up
everything once while it is still single-threaded, then forks a child per request. Each child is a
real, separate OS process with its own ledger connection and SDK clients; the test SIGKILLs it at a
random moment. The server itself never touches the ledger or the network.

Protocol (one JSON object per line on stdin, one JSON reply per line on stdout):
  {"cmd": "spawn", "plan": [...], "offset": 0}  -> {"pid": N}
      plan steps: ["submit", job_id] (reserve, then send once, like `reclaim submit`) or ["tick"].
  {"cmd": "wait", "pid": N}                      -> {"pid": N, "signal": S | null, "code": C | null}
EOF on stdin ends the server. Usage: python chaos_worker.py LEDGER CONFIG LOGFILE
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import traceback

from ledger.clock import SystemClock
from ledger.config import load_config
from ledger.db import connect
from ledger.remotes import remote_for
from ledger.worker import RemoteCache, submit_now, tick, worker_id

OP = "article.generate"


def warm_up(config_path: str) -> None:
    """Run the SDK's send and lookup paths once against a closed port, so its lazy imports happen here."""
    cfg = load_config(config_path)
    dead = {name: dataclasses.replace(rc, base_url="http://127.0.0.1:9", timeout_seconds=1.0)
            for name, rc in cfg.remotes.items()}
    remote = remote_for(dataclasses.replace(cfg, remotes=dead), OP)
    remote.send({"input": "warm-up"}, "warm-up", 1)
    remote.lookup("warm-up")


def child(ledger: str, config_path: str, remotes: RemoteCache, plan: list[list[str]], offset: float, log: str) -> None:
    """One worker process: run the plan against the ledger, then exit. Never returns."""
    code = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        cfg = load_config(config_path)
        conn = connect(ledger)
        clock = SystemClock(offset)
        owner = worker_id()
        for step in plan:
            if step[0] == "submit":
                submit_now(conn, cfg, OP, {"input": f"write {step[1]}"}, clock=clock, job_id=step[1],
                           actor="chaos", remotes=remotes)
            else:
                tick(conn, cfg, clock=clock, remotes=remotes, owner=owner)
        conn.close()
    except BaseException:  # report anything to the log; the test fails on a non-zero exit
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"pid {os.getpid()} plan {plan}\n{traceback.format_exc()}\n")
        code = 3
    os._exit(code)


def main(argv: list[str]) -> int:
    ledger, config_path, log = argv
    warm_up(config_path)
    # The real adapter, built before any fork: no connection is open yet, so each child gets its own.
    remotes = RemoteCache(load_config(config_path))
    remotes.for_operation(OP)
    if threading.active_count() != 1:
        print(json.dumps({"error": f"{threading.active_count()} threads before fork"}), flush=True)
        return 1
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "spawn":
            pid = os.fork()
            if pid == 0:
                child(ledger, config_path, remotes, req["plan"], float(req.get("offset", 0)), log)
            print(json.dumps({"pid": pid}), flush=True)
        elif req["cmd"] == "wait":
            _, status = os.waitpid(int(req["pid"]), 0)
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            print(json.dumps({"pid": req["pid"], "signal": sig, "code": code}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {req['cmd']!r}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
