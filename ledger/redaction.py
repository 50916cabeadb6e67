"""Secrets the config names, and the one function that takes them out of text: `Redactor.redact`.

The config names environment variables whose values are secrets: every remote's `api_key_env`, every
value of its `header_env`, and its `webhook_secret_env`. A remote may echo one back (an error body that
quotes the key, a model answer that repeats a header), so text from outside passes through a Redactor
before it is written anywhere (events, job fields, evidence, the outcome journal, result files) or
printed. Each occurrence becomes `[redacted:NAME]`, NAME being the variable's name, so a reader knows
which secret was there without seeing it.

Values shorter than `MIN_SECRET_LENGTH` characters are not searched for: replacing a 3-character value
would garble ordinary text (timestamps, ids, counts), and so short a value is no credential worth the
name. Unset or empty variables are skipped. Besides the raw value, its JSON-escaped and URL-quoted
forms are replaced too, as a remote may quote it either way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ledger.config import Config, RemoteConfig

MIN_SECRET_LENGTH = 8
"""A variable's value shorter than this is not treated as a secret (see the module docstring)."""


def secret_names(config: Config) -> list[str]:
    """Every environment variable the config names as holding a secret, sorted, without repeats."""
    names: set[str] = set()
    for rc in config.remotes.values():
        names.update(_names_of(rc))
    return sorted(names)


def _names_of(rc: RemoteConfig) -> set[str]:
    names = {rc.api_key_env, *rc.header_env.values()}
    if rc.webhook_secret_env:
        names.add(rc.webhook_secret_env)
    return {n for n in names if n}


def _forms(value: str) -> list[str]:
    # An environment value that was not valid UTF-8 arrives with lone surrogates: quote its raw bytes.
    forms = [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1],
             quote(value, safe="", errors="surrogateescape")]
    return list(dict.fromkeys(forms))  # unique, raw value first


@dataclass(frozen=True)
class Redactor:
    """Knows the secret values (and their names) and replaces them in text and in JSON-like values."""

    secrets: tuple[tuple[str, str], ...] = ()
    """(text to find, variable name), longest first, so a secret containing another goes whole."""

    @classmethod
    def from_names(cls, names: Iterable[str], environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for the current values of the variables `names` (unset, empty and short ones skipped)."""
        env = os.environ if environ is None else environ
        pairs: dict[str, str] = {}
        for name in sorted(set(names)):
            value = env.get(name) or ""
            if len(value) < MIN_SECRET_LENGTH:
                continue
            for form in _forms(value):
                pairs.setdefault(form, name)
        ordered = sorted(pairs.items(), key=lambda p: (-len(p[0]), p[0]))
        return cls(tuple(ordered))

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for every secret the config names (`api_key_env`, `header_env`, `webhook_secret_env`)."""
        return cls.from_names(secret_names(config), environ)

    @classmethod
    def for_remote(cls, rc: RemoteConfig, environ: Mapping[str, str] | None = None) -> Redactor:
        """A Redactor for the secrets of one remote (for an adapter built without the whole config)."""
        return cls.from_names(_names_of(rc), environ)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def names(self) -> list[str]:
        """The names of the variables whose values this Redactor replaces."""
        return sorted({name for _, name in self.secrets})

    def redact(self, text: str) -> str:
        """`text` with every occurrence of a secret replaced by `[redacted:NAME]`."""
        for secret, name in self.secrets:
            if secret in text:
                text = text.replace(secret, f"[redacted:{name}]")
        return text

    def redact_value(self, value: Any) -> Any:
        """A copy of a JSON-like value (str, dict, list, tuple; keys too) with every string redacted.

        Anything else (numbers, None, other objects) is returned as it is.
        """
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact_value(k): self.redact_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.redact_value(v) for v in value)
        return value
