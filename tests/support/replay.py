"""Record the requests this package makes, replay them to two servers, compare the answers.

The reference server claims to answer as taguru does. This module is how that
claim is measured (issue 41): every mode of a mode list (``support.differential``)
runs against one server behind a :class:`~support.loopback.RecordingProxy`, the distinct
requests it sent are kept (method, target with its query, body), and each is
sent again, in the order first seen, to two freshly loaded servers. Their
answers are compared as JSON documents whose objects keep their key order and
whose numbers keep their spelling, so a difference in value *or* in key order
shows; only the keys :data:`MASKED` names are blanked first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from support.differential import Number, run_ours
from support.loopback import Exchange, RecordingProxy


class RunnableMode(Protocol):
    """What a mode of ``support.differential`` offers."""

    @property
    def name(self) -> str: ...

    def argv(self, inputs: Path, *, ours: bool = False) -> list[str]: ...


@dataclass(frozen=True)
class Sent:
    """One distinct request: what the client put on the wire, minus its headers."""

    method: str
    target: str
    content_type: str | None
    body: bytes

    @classmethod
    def of(cls, exchange: Exchange) -> Sent:
        return cls(exchange.method, exchange.target, exchange.content_type, exchange.body)

    def label(self) -> str:
        body = self.body.decode("utf-8", "replace")
        return f"{self.method} {self.target} {body[:160]}".rstrip()


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass
class Recording:
    """The distinct requests of a mode list, in the order first seen, with the modes
    that sent each and how each command ended."""

    sent: dict[Sent, list[str]] = field(default_factory=dict)
    exit_codes: dict[str, int] = field(default_factory=dict)
    stderr: dict[str, str] = field(default_factory=dict)

    def add(self, mode: str, exchanges: Iterable[Exchange]) -> None:
        for exchange in exchanges:
            senders = self.sent.setdefault(Sent.of(exchange), [])
            if mode not in senders:
                senders.append(mode)


def record_runs(url: str, modes: Sequence[RunnableMode], inputs: Path, workdir: Path) -> Recording:
    """Run ``python -m taguru_eval`` in every mode, this package's own flags included,
    against ``url`` through a recording proxy; the distinct requests they made."""
    recording = Recording()
    proxy = RecordingProxy(url)
    with proxy as proxy_url:
        for mode in modes:
            before = len(proxy.exchanges)
            argv = [*mode.argv(inputs, ours=True), "--url", proxy_url, "--quiet"]
            outcome = run_ours(argv, workdir / mode.name)
            recording.exit_codes[mode.name] = outcome.exit_code
            recording.stderr[mode.name] = outcome.stderr
            recording.add(mode.name, proxy.exchanges[before:])
    return recording


def replay(url: str, requests: Iterable[Sent]) -> list[Answer]:
    """Send each request to ``url`` as recorded, one after another."""
    answers: list[Answer] = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for sent in requests:
            headers = {} if sent.content_type is None else {"Content-Type": sent.content_type}
            response = client.request(
                sent.method, sent.target, content=sent.body or None, headers=headers
            )
            answers.append(Answer(response.status_code, response.content))
    return answers


class Pairs(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in the order written."""


MASK = "<masked>"

MASKED: dict[tuple[str | None, str], str] = {
    (None, "time"): "the envelope's handling time in seconds: a clock",
    ("usage", "last_read_epoch"): "Unix time of the context's last read: a clock",
    ("usage", "last_write_epoch"): "Unix time of the context's last write: a clock",
    (None, "stored_at"): (
        "Unix time a source was stored (the two servers were loaded seconds apart): a clock"
    ),
    ("stats", "footprint_bytes"): (
        "taguru's estimate of its own resident memory, from the sizes of its Rust records "
        "and hash-map overheads (HTTP.md §11.12: implementation accounting, read by no client)"
    ),
}
"""The keys blanked before two answers are compared, by (parent key, key); a parent of
``None`` matches anywhere. The key stays in place, so its position is still compared.
The usage counters (``reads``, ``empty_reads``, ``writes``) are not masked: both
servers get the same requests in the same order, so they count the same."""


def _masked(parent: str | None, key: str) -> bool:
    return (None, key) in MASKED or (parent, key) in MASKED


def _mask(value: Any, parent: str | None) -> Any:
    if isinstance(value, Pairs):
        return Pairs(
            (key, MASK if _masked(parent, key) else _mask(item, key)) for key, item in value
        )
    if isinstance(value, list):
        return [_mask(item, parent) for item in value]
    return value


def document(body: bytes) -> Any:
    """A JSON body with its key order and number spellings kept, the masked keys blanked;
    a body that is not JSON is kept as text."""
    try:
        parsed = json.loads(
            body,
            object_pairs_hook=Pairs,
            parse_float=Number,
            parse_int=Number,
        )
    except ValueError:
        return body.decode("utf-8", "replace")
    return _mask(parsed, None)


def difference(ours: Answer, theirs: Answer) -> str | None:
    """Where ``ours`` first differs from ``theirs`` (status, value or key order), or None."""
    if ours.status != theirs.status:
        return f"status {ours.status} != taguru's {theirs.status}"
    return _first_difference(document(ours.body), document(theirs.body), "$")


def _first_difference(ours: Any, theirs: Any, at: str) -> str | None:
    if isinstance(ours, Pairs) and isinstance(theirs, Pairs):
        our_keys = [key for key, _ in ours]
        their_keys = [key for key, _ in theirs]
        if our_keys != their_keys:
            return f"{at}: keys {our_keys} != taguru's {their_keys}"
        for (key, mine), (_, its) in zip(ours, theirs, strict=True):
            found = _first_difference(mine, its, f"{at}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list) and type(ours) is type(theirs):
        if len(ours) != len(theirs):
            shown = f"{_short(ours)} / {_short(theirs)}"
            return f"{at}: {len(ours)} items != taguru's {len(theirs)}: {shown}"
        for index, (mine, its) in enumerate(zip(ours, theirs, strict=True)):
            found = _first_difference(mine, its, f"{at}[{index}]")
            if found is not None:
                return found
        return None
    if ours != theirs or type(ours) is not type(theirs):
        return f"{at}: {_short(ours)} != taguru's {_short(theirs)}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "…"
