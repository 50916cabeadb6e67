"""`[identity] source = "proxy"`: the browser seat's name counts only in the seat's own account, `reclaim serve`
runs only as that account and only on loopback or a unix socket, and bad [serve] keys are refused by name.
Every refusal is one line, exit 2, and leaves the ledger as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.serve import parse_listen
from ledger.config import parse_config
from ledger.errors import BadInput, ConfigError
from ledger.identity import SEAT_ENV, Identity, os_account, resolve


def _proxy(doc: dict[str, Any], account: str | None = None, **serve: Any) -> dict[str, Any]:
    out = dict(doc)
    out["identity"] = {"source": "proxy"}
    out["serve"] = {"account": account if account is not None else os_account(),
                    "trusted_proxies": ["127.0.0.1"], "allowed_origins": ["https://reclaim.example.org"], **serve}
    return out


def test_the_seat_name_counts_only_in_the_seat_account(config_dict: dict[str, Any], tmp_path: Path) -> None:
    mine = parse_config(_proxy(config_dict), base_dir=tmp_path)
    seat = resolve(mine, None, "bob")
    assert seat == Identity("bob", "proxy") and seat.verified
    assert seat.label == "identity: bob (browser seat, via the proxy)"
    assert resolve(mine, None) == Identity(os_account(), "os")  # on the host, the OS account as ever
    other = parse_config(_proxy(config_dict, account="reclaim-seat"), base_dir=tmp_path)
    with pytest.raises(BadInput, match=rf"{SEAT_ENV} counts only in the browser seat's account \(reclaim-seat\)"):
        resolve(other, None, "bob")
    with pytest.raises(BadInput, match="counts only with source = \"proxy\""):
        resolve(parse_config(config_dict, base_dir=tmp_path), None, "bob")  # the tests' declared config
    with pytest.raises(BadInput, match="unset RECLAIM_OPERATOR"):
        resolve(mine, "carol", "bob")
    for bad in ("", " bob", "bob\n", "b" * 65, "bob\x1b[2J"):
        with pytest.raises(BadInput, match="printable"):
            resolve(mine, None, bad)


@pytest.mark.parametrize(("serve", "message"), [
    ({"account": ""}, "serve.account: required"),
    ({"trusted_proxies": ["proxy.example"]}, "neither an IP address nor unix:/absolute/path"),
    ({"trusted_proxies": ["unix:relative.sock"]}, "must be an absolute path"),
    ({"allowed_origins": ["https://reclaim.example.org/console"]}, "is not an origin"),
    ({"allowed_origins": ["reclaim.example.org"]}, "is not an origin"),
    ({"listen": "0.0.0.0:80"}, "serve.listen: unknown key"),
])
def test_bad_serve_keys_are_refused_by_name(
    serve: dict[str, Any], message: str, config_dict: dict[str, Any], tmp_path: Path,
) -> None:
    doc = _proxy(config_dict)
    doc["serve"].update(serve)
    with pytest.raises(ConfigError, match=message):
        parse_config(doc, base_dir=tmp_path)


def test_a_bad_proxy_header_name_is_refused(config_dict: dict[str, Any], tmp_path: Path) -> None:
    doc = _proxy(config_dict)
    doc["identity"]["proxy_header"] = "X Forwarded User"
    with pytest.raises(ConfigError, match=r"identity\.proxy_header"):
        parse_config(doc, base_dir=tmp_path)


@pytest.mark.parametrize(("spec", "expected"), [
    ("127.0.0.1:0", ("127.0.0.1", 0)), ("localhost:8740", ("127.0.0.1", 8740)), ("[::1]:9", ("::1", 9)),
    ("127.8.9.10:1", ("127.8.9.10", 1)),
])
def test_loopback_listen_addresses(spec: str, expected: tuple[str, int]) -> None:
    assert parse_listen(spec) == expected


def test_serve_refuses_what_it_must_not_do_and_changes_nothing(
    config_dict: dict[str, Any], write_config: Callable[..., Path], ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str], tmp_path: Path,
) -> None:
    before = fingerprint(ledger_path)
    seat = write_config(_proxy(config_dict), tmp_path / "seat.toml")
    cases = [
        (["--listen", "0.0.0.0:8740"], seat, "0.0.0.0 is not a loopback address"),
        (["--listen", "192.168.1.10:8740"], seat, "is not a loopback address"),
        (["--listen", "reclaim.example.org:443"], seat, "must be a loopback IP address"),
        (["--listen", "127.0.0.1"], seat, "expected HOST:PORT"),
        ([], seat, "give exactly one of --listen"),
        (["--listen", "127.0.0.1:0", "--socket", str(tmp_path / "s.sock")], seat, "give exactly one of --listen"),
        (["--listen", "127.0.0.1:0"], write_config(config_dict, tmp_path / "declared.toml"),
         "needs source = \"proxy\""),
        (["--listen", "127.0.0.1:0"], write_config(_proxy(config_dict, account="reclaim-seat"),
                                                   tmp_path / "other.toml"),
         f"runs only as the seat account [serve] account = 'reclaim-seat', not as '{os_account()}'"),
        (["--listen", "127.0.0.1:0"], write_config(_proxy(config_dict, trusted_proxies=[]), tmp_path / "t.toml"),
         "trusted_proxies and allowed_origins must each name at least one entry"),
    ]
    for args, config, message in cases:
        r = run_cli("serve", *args, config=config)
        assert r.rc == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r)
    assert fingerprint(ledger_path) == before


def test_a_seat_name_typed_on_the_host_is_refused(
    config_dict: dict[str, Any], write_config: Callable[..., Path], ledger_path: Path, run_cli: Callable[..., Any],
    fingerprint: Callable[[Path], str], tmp_path: Path,
) -> None:
    """In an account that is not the seat's, RECLAIM_SEAT_OPERATOR=bob makes no one bob: refused, nothing written."""
    other = write_config(_proxy(config_dict, account="reclaim-seat"), tmp_path / "other.toml")
    before = fingerprint(ledger_path)
    r = run_cli("status", config=other, env={SEAT_ENV: "bob", "RECLAIM_OPERATOR": ""})
    assert r.rc == 2 and "counts only in the browser seat's account (reclaim-seat)" in r.stderr, r
    assert fingerprint(ledger_path) == before
    r = run_cli("status", config=other, env={"RECLAIM_OPERATOR": ""})
    assert r.rc == 0 and f"identity: {os_account()} (os account)" in r.stdout, r
