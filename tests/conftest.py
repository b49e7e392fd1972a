"""Fixtures every test gets: no proxy or taguru settings from the machine, and
every JSON document checked against the old writer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal

import pytest

if TYPE_CHECKING:
    from support.taguru import RealTaguru

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
    from taguru_eval.run.lanes import budget
    from taguru_refserver import envelope

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


@pytest.fixture
def real_taguru() -> Iterator[Callable[..., RealTaguru]]:
    """Start the real taguru 0.9.7 (``start(token=None, env={})``), stopped at teardown;
    skipped with the way to get one when there is none (a failure in CI)."""
    from support.taguru import RealTaguru, require_taguru

    binary = require_taguru()
    started: list[RealTaguru] = []

    def start(token: str | None = None, env: dict[str, str] | None = None) -> RealTaguru:
        server = RealTaguru(binary, token=token, env=env or {}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line, whatever the verbosity, when the differential tests were skipped."""
    from support.taguru import HOW_TO_GET_IT

    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if HOW_TO_GET_IT in str(getattr(report, "longrepr", ""))
    ]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} differential test(s) skipped: {HOW_TO_GET_IT}")
