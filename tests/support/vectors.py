"""The conformance vectors of ``../shared/vectors`` as pytest parameters."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.paths import VECTORS


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
