"""Shared test fixtures: where ``../shared`` lives and how vectors are loaded."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TAGURU_EVAL_SHARED", PROJECT_ROOT.parent / "shared"))
VECTORS = SHARED / "vectors"
WIRE = SHARED / "contract" / "wire"
EXAMPLES = SHARED / "contract" / "examples"
DATA = PROJECT_ROOT / "data"


def vector_cases(topic: str, check: str | None = None) -> list[Any]:
    """The cases of one vector file (optionally one ``check``) as pytest params."""
    doc = json.loads((VECTORS / f"{topic}.json").read_text(encoding="utf-8"))
    cases = [c for c in doc["cases"] if check is None or c.get("check") == check]
    return [
        pytest.param(c, id=c["name"], marks=[pytest.mark.derived] if c.get("derived") else [])
        for c in cases
    ]


def vector_doc(topic: str) -> dict[str, Any]:
    """The whole vector file, for its top-level fixtures (catalog, …)."""
    doc: dict[str, Any] = json.loads((VECTORS / f"{topic}.json").read_text(encoding="utf-8"))
    return doc


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
    import serde_json_oracle as oracle

    from taguru_eval._base import text
    from taguru_eval.artifact import build
    from taguru_eval.refserver import envelope
    from taguru_eval.run import budget

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
