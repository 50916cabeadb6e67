"""`python -m console` and `python -m ledger.simulator` run the same commands as the installed scripts (in process:
the module is run as __main__ the way `-m` runs it; the real-process runs are in tests/system/ and the chaos tests)."""

from __future__ import annotations

import runpy
import sys

import pytest


@pytest.mark.parametrize(("module", "says"), [("console", "python -m console"), ("ledger.simulator", "simulator")])
def test_python_dash_m_prints_its_help_and_exits_0(module: str, says: str, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert exit_.value.code in (0, None)
    out = capsys.readouterr().out
    assert "usage" in out.lower() and says in out
