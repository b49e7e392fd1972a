"""A taguru-compatible reference server (ASGI, Starlette + uvicorn) for the demo and tests.

``create_app`` builds the app over a ``ServerState``; ``load_corpus_dir`` fills a
state from a corpus folder through the same write path the HTTP routes use;
``running_server`` serves one on an ephemeral loopback port. They are loaded on
first use, so importing one algorithm module (``refserver.bm25``, …) does not
pull in Starlette or uvicorn.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["ServerState", "create_app", "load_corpus_dir", "running_server"]

_HOMES = {
    "ServerState": "taguru_eval.refserver.state",
    "create_app": "taguru_eval.refserver.app",
    "load_corpus_dir": "taguru_eval.refserver.corpus",
    "running_server": "taguru_eval.refserver.serve",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'taguru_eval.refserver' has no attribute {name!r}")
    return getattr(import_module(home), name)
