"""Response bodies: read under the cap, with one slot for large ones, then parsed as JSON.

Memory is bounded per call and across calls: a body is streamed and refused
the moment it passes :data:`BODY_CAP_BYTES` (or, once past
:data:`SMALL_BODY_BYTES`, announces more with ``Content-Length``), and only
one body at a time may grow past :data:`SMALL_BODY_BYTES`, so at
``--concurrency N`` the buffered bodies stay under
``N × SMALL_BODY_BYTES + BODY_CAP_BYTES``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Callable
from typing import Final

import msgspec

from taguru_eval._base import jsonstrict

BODY_CAP_BYTES: Final = 256 * 1024 * 1024
# Bodies up to this size are read side by side; a larger one waits for the one
# large-body slot, so concurrency multiplies only this, never the cap.
SMALL_BODY_BYTES: Final = 2 * 1024 * 1024

# A JSON \u escape of a UTF-16 surrogate; only then can a parsed string hold a lone one.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class BodyTooLarge(Exception):
    """The body passed :data:`BODY_CAP_BYTES` (its message is the failure's reason)."""

    def __init__(self) -> None:
        super().__init__(f"the body exceeds the {BODY_CAP_BYTES // (1024 * 1024)} MiB cap")


class LargeBodySlot:
    """One slot for a body larger than :data:`SMALL_BODY_BYTES` (per client)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    def ticket(self) -> Ticket:
        return Ticket(self._lock)


class Ticket:
    """One call's claim on the large-body slot: taken while reading, released by
    the caller once the body is decoded and parsed (or the call failed)."""

    __slots__ = ("_lock", "held")

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock
        self.held = False

    async def acquire(self) -> None:
        await self._lock.acquire()
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()


async def read_capped(
    chunks: AsyncIterator[bytes], declared_length: Callable[[], str | None], ticket: Ticket
) -> bytearray:
    """The whole (decoded) body from ``chunks``, refused as soon as it is known to pass the cap.

    A body that grows past :data:`SMALL_BODY_BYTES` is refused there if its
    ``Content-Length`` (``declared_length()``) announces more than the cap, and
    otherwise waits for the client's one large-body slot (``ticket``) before it
    may grow further. Small bodies (every body of a real run) never look at
    their headers.
    """
    data = bytearray()
    try:
        async for chunk in chunks:
            size = len(data) + len(chunk)
            if size > BODY_CAP_BYTES:
                raise BodyTooLarge
            if size > SMALL_BODY_BYTES and not ticket.held:
                declared = declared_length() or ""
                if declared.isdigit() and int(declared) > BODY_CAP_BYTES:
                    raise BodyTooLarge
                await ticket.acquire()
            data += chunk
    except BaseException:
        # Whatever keeps this exception keeps this frame: the body goes now, not with it.
        data.clear()
        raise
    return data


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


_READER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_WRITER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""One reader and one writer for every call (``json.loads``/``dumps`` with options
build a new one each time)."""


def parse_json(text: str) -> object:
    """Parse a response body: no NaN/Infinity literals, no lone surrogate escape,
    a repeated key keeps its last value (EVALUATE.md §0.1); raises ``ValueError``.

    serde refuses a lone ``\\ud800`` escape, so taguru records such a body as
    "not a taguru response"; strings are only walked when the text holds a
    surrogate escape at all.
    """
    if text.startswith("\ufeff"):  # json.loads' own refusal, in its words
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value: object = _READER.decode(text)
    except RecursionError:
        raise ValueError("recursion limit exceeded") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        jsonstrict.reject_lone_surrogates(value)
    return value


_ENCODER: Final = msgspec.json.Encoder()


def compact_json(body: object) -> bytes:
    """A request body as taguru's client sends it: compact, UTF-8, not ASCII-escaped.

    msgspec writes it (the same bytes as ``json.dumps(ensure_ascii=False)`` for
    every string and integer, at a tenth of the cost), except that a float is
    spelled as Python writes it (``1e-05``, where msgspec writes ``1e-5``): the
    requests stay the bytes they always were.
    """
    return _ENCODER.encode(_python_floats(body))


def _python_floats(value: object) -> object:
    """``value`` with every float a ``msgspec.Raw`` of its stdlib JSON spelling (the
    value itself when it holds none: a request body is a handful of members)."""
    if isinstance(value, float):
        text = float.__repr__(value) if math.isfinite(value) else _WRITER.encode(value)
        return msgspec.Raw(text.encode())
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, _SPELLED):
                return {key: _python_floats(item) for key, item in value.items()}
        return value
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, _SPELLED):
                return [_python_floats(item) for item in value]
        return value
    return value


_SPELLED: Final = (float, dict, list, tuple)
"""What :func:`_python_floats` looks into: a float, or what may hold one."""
