"""A taguru-compatible reference server (ASGI, Starlette + uvicorn) for the demo and tests.

``create_app`` builds the app over a ``ServerState``; ``load_corpus_dir`` fills a
state from a corpus folder through the same write path the HTTP routes use;
``running_server`` serves one on an ephemeral loopback port. They are loaded on
first use, so importing one algorithm module (``taguru_refserver.bm25``, …) does not
pull in Starlette or uvicorn.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServerState", "create_app", "load_corpus_dir", "running_server"]


def __getattr__(name: str) -> Any:
    if name == "ServerState":
        from taguru_refserver.state import ServerState

        return ServerState
    if name == "create_app":
        from taguru_refserver.app import create_app

        return create_app
    if name == "load_corpus_dir":
        from taguru_refserver.corpus import load_corpus_dir

        return load_corpus_dir
    if name == "running_server":
        from taguru_refserver.serve import running_server

        return running_server
    raise AttributeError(f"module 'taguru_refserver' has no attribute {name!r}")
