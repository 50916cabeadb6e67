"""Whose signature counts for which event (ledger.authors): a person's decision is signed by that person with
the role it needs, a browser seat signs for the person its proxy authenticated, the rest by a sending account."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import authors
from ledger.config import Config, ServeConfig
from ledger.signing import Signer, new_key

DIGEST = "0f" * 32


@pytest.fixture
def signers(tmp_path: Path) -> dict[str, Signer]:
    return {name: new_key(tmp_path / name, name) for name in ("alice", "bob", "sched", "seat")}


def _policy(signers: dict[str, Signer], source: str = "os") -> Config:
    return Config(
        identity_source=source,
        operators={"alice": frozenset({"triage", "viewer"}), "bob": frozenset({"triage", "approver", "viewer"}),
                   "carol": frozenset({"triage", "approver", "viewer"}), "sched": frozenset({"sender", "viewer"}),
                   "seat": frozenset({"viewer"})},
        keys={name: s.public for name, s in signers.items()},
        serve=ServeConfig(account="seat"),
    )


def _why(cfg: Config, signer: Signer | None, actor: str, kind: str, source: str | None = "os") -> str | None:
    detail = {"identity_source": source} if source is not None else {}
    proof = signer.sign(DIGEST) if signer is not None else None
    return authors.refusal(cfg, actor=actor, kind=kind, detail=detail, chain_hash=DIGEST, proof=proof)


def test_a_decision_counts_only_signed_by_its_actor_holding_the_role(signers: dict[str, Signer]) -> None:
    cfg = _policy(signers)
    assert authors.required(cfg)
    assert _why(cfg, signers["bob"], "bob", "release") is None
    assert "names bob but is signed by alice" in (_why(cfg, signers["alice"], "bob", "release") or "")
    assert "lacks the approver role" in (_why(cfg, signers["alice"], "alice", "release") or "")
    assert "is not signed" in (_why(cfg, None, "bob", "release") or "")
    assert _why(cfg, signers["alice"], "alice", "finding") is None
    # A release written without naming how its actor was identified is still a person's: not the system's.
    assert "names bob but is signed by sched" in (_why(cfg, signers["sched"], "bob", "release", None) or "")


def test_a_seat_signs_for_the_person_its_proxy_authenticated_and_for_no_one_else(signers: dict[str, Signer]) -> None:
    cfg = _policy(signers, source="proxy")
    assert _why(cfg, signers["seat"], "carol", "release", "proxy") is None
    assert "names carol but is signed by seat" in (_why(cfg, signers["seat"], "carol", "release", "os") or "")
    assert "lacks the approver role" in (_why(cfg, signers["seat"], "alice", "release", "proxy") or "")


def test_the_systems_events_are_signed_by_a_sending_account(signers: dict[str, Signer], tmp_path: Path) -> None:
    cfg = _policy(signers)
    assert _why(cfg, signers["sched"], "host:1:abc", "send_started", None) is None
    assert "lacks the sender role" in (_why(cfg, signers["alice"], "reclaim", "reconcile", None) or "")
    assert "has no key registered" in (_why(cfg, new_key(tmp_path / "m", "mallory"), "reclaim", "evidence",
                                            None) or "")


def test_nothing_is_required_without_registered_keys_or_with_declared_names(signers: dict[str, Signer]) -> None:
    assert not authors.required(Config())
    assert not authors.required(_policy(signers, source="declared"))
