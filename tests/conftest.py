"""Fixtures every test gets: no proxy or taguru settings from the machine, and
every JSON document checked against the old writer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest

PROXY_VARIABLES = (
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
)


@pytest.fixture(autouse=True)
def no_proxy_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client honours proxy variables as taguru's does; tests talk to loopback
    servers directly unless a test sets a proxy itself."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _writers_match_the_oracle(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every JSON document the suite writes (artifacts, server bodies, budget texts)
    is also written by the old recursive writer; the bytes must be equal.

    Mismatches are collected and reported at teardown, so a broad ``except``
    in the code under test cannot swallow them.
    """
    from support import serde_json_oracle as oracle

    from taguru_eval._base import text
    from taguru_eval.artifact import build
    from taguru_eval.refserver import envelope
    from taguru_eval.run.lanes import budget

    mismatches: list[str] = []

    def checked_text(value: object, indent: Literal[2] | None = None) -> str:
        written = text.dumps_json(value, indent)
        if written != oracle.dumps_json(value, indent):
            mismatches.append(written[:200])
        return written

    def checked_bytes(value: object, indent: Literal[2] | None = None) -> bytes:
        written = text.encode_json(value, indent)
        if written != oracle.dumps_json(value, indent).encode("utf-8"):
            mismatches.append(written[:200].decode("utf-8", "replace"))
        return written

    for module in (build, envelope, budget):
        monkeypatch.setattr(module, "dumps_json", checked_text)
    monkeypatch.setattr(build, "encode_json", checked_bytes)
    yield
    assert mismatches == []


TAGURU_SETTINGS = ("TAGURU_ADDR", "TAGURU_API_TOKEN", "TAGURU_API_TOKENS", "TAGURU_CONFIG")


@pytest.fixture(autouse=True)
def no_taguru_settings_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's TAGURU_* settings must not reach a test run."""
    for name in TAGURU_SETTINGS:
        monkeypatch.delenv(name, raising=False)
