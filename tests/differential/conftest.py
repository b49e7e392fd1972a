"""Servers the differential suites share: one real taguru per module, the demo
corpora loaded, with and without a token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.differential import CONTEXTS, TOKEN, write_inputs
from support.paths import DATA
from support.taguru import RealTaguru, populate, require_taguru


def _loaded(token: str | None) -> Iterator[RealTaguru]:
    server = RealTaguru(require_taguru(), token=token).start()
    try:
        for context in CONTEXTS:
            populate(server.url, DATA / context, token=token)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def taguru_server() -> Iterator[RealTaguru]:
    """A real taguru 0.9.7 holding the demo corpora, no token."""
    yield from _loaded(None)


@pytest.fixture(scope="module")
def taguru_server_with_token() -> Iterator[RealTaguru]:
    """A real taguru 0.9.7 holding the demo corpora, requiring :data:`TOKEN`."""
    yield from _loaded(TOKEN)


@pytest.fixture(scope="module")
def mode_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated files the modes name under ``{inputs}``."""
    return write_inputs(tmp_path_factory.mktemp("mode-inputs"))
