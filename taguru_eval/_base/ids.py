"""Run ids: the names of stored runs and of resumable checkpoints.

Kept apart from the store so that a run which only checkpoints (``resume``)
names its checkpoint without loading the store's Parquet machinery before its
first request.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


def new_run_id(now: datetime | None = None) -> str:
    """``20261130T042512.123456Z-3f9a1c``: sortable by time, unique by its suffix.

    Microseconds keep runs started within one second (a demo history, a CI
    matrix) in the order they ran; the random suffix keeps two machines apart.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%S.%fZ}-{secrets.token_hex(3)}"
