"""``load``: populate a taguru-compatible server from context folders (``load.py``),
over its public write routes with one synchronous HTTP client (``client.py``).

The folders are read by ``taguru_eval.corpus``, the reader ``serve DIR`` uses too.
"""

from __future__ import annotations

from taguru_eval.populate.load import Loaded, LoadedContext, load

__all__ = ["Loaded", "LoadedContext", "load"]
