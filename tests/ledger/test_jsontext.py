"""ledger.jsontext: its encoders write what json.JSONEncoder.encode writes, byte for byte, and fail alike."""

from __future__ import annotations

import json
import json.encoder
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from ledger import jsontext

SHAPES = [
    {"sort_keys": True, "separators": (",", ":")},
    {"sort_keys": True, "separators": (", ", ": ")},
    {"sort_keys": False, "separators": (",", ":")},
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"sort={s['sort_keys']},sep={s['separators'][0]!r}")
@settings(max_examples=examples(300), deadline=None)
@given(value=json_values)
def test_same_text_as_json_encoder(shape: dict, value: object) -> None:
    expected = json.JSONEncoder(ensure_ascii=False, **shape).encode(value)
    assert jsontext.encoder(**shape)(value) == expected
    assert jsontext.encoder(**shape, check_circular=False)(value) == expected


def test_the_fast_path_is_taken_where_the_c_encoder_exists() -> None:
    enc = jsontext.encoder(sort_keys=True, separators=(",", ":"))
    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert json.encoder.c_make_encoder is not None  # CPython here
    assert enc != plain.encode  # its own function, not the bound encode
    assert enc({"b": 1, "a": [math.pi, "\u2028"]}) == '{"a":[3.141592653589793,"\u2028"],"b":1}'


def test_errors_are_the_encoders_errors() -> None:
    enc = jsontext.encoder(sort_keys=True, separators=(",", ":"))
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        enc(loop)
    with pytest.raises(TypeError, match="not JSON serializable"):
        enc({"a": object()})
    with pytest.raises(TypeError, match="keys must be str"):
        enc({("a",): 1})
    # a failed call leaves nothing behind: the next value encodes as usual
    assert enc({"x": [1, {"y": None}]}) == '{"x":[1,{"y":null}]}'


def test_without_the_c_encoder_it_is_the_plain_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    enc = jsontext.encoder(sort_keys=True, separators=(",", ":"))
    assert getattr(enc, "__self__", None).__class__ is json.JSONEncoder
    assert enc({"b": 1, "a": 2}) == '{"a":2,"b":1}'
