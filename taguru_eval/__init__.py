"""taguru_eval: a retrieval and citation quality gate for taguru contexts."""

from __future__ import annotations

__version__ = "0.1.0"
