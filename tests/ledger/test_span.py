"""`ledger.clock.span`: the one way an age or a duration is written, in every form the CLI and the console use."""

from __future__ import annotations

import pytest

from ledger.clock import span


@pytest.mark.parametrize(("seconds", "short", "precise", "words", "tight"), [
    (0, "0s", "0s", "0 s", "0s"),
    (45, "45s", "45s", "45 s", "45s"),
    (725, "12m", "12m 05s", "12 min", "12m"),
    (11_105, "3h 05m", "3h 05m 05s", "3 h 05 min", "3h05m"),
    (187_805, "2d 04h", "2d 04h 10m", "2 d 04 h", "2d04h"),
    (-5, "0s", "0s", "0 s", "0s"),
    (float("nan"), "invalid", "invalid", "invalid", "invalid"),
    (float("inf"), "invalid", "invalid", "invalid", "invalid"),
    (1e20, "invalid", "invalid", "invalid", "invalid"),
])
def test_span_forms(seconds: float, short: str, precise: str, words: str, tight: str) -> None:
    assert span(seconds) == short
    assert span(seconds, parts=3, finest="s") == precise
    assert span(seconds, words=True) == words
    assert span(seconds, join="") == tight
