"""Seeded mutations of a checkpoint batch file, for the checkpoint fuzzers.

A mutation is what a disk, a hand or a hostile user does to a batch: delete a
key, retype or change a value, add an unknown key, duplicate, drop or swap
outputs, or damage the bytes themselves (a flipped byte, a cut, trailing
garbage, random bytes). ``resigned`` mutations recompute the batch's digest
(a user who knows the format): only the strict decoding stands between them
and the run.
"""

from __future__ import annotations

import copy
import hashlib
import random
from dataclasses import dataclass
from typing import Any, Final

import msgspec

ODD_VALUES: Final[tuple[Any, ...]] = (
    None, True, False, 0, -1, 7, 2**31, -(2**31) - 1, 2**63 - 1, 2**64 - 1, -(2**63),
    1.5, -0.0, float("nan"), float("inf"), "", "x", "\x85\u202e\x1b[31m", [], [1, "a"],
    {}, {"k": 1}, b"\x00\xff",
)  # fmt: skip
"""Values of every msgpack type, ranges past 32 and 64 bits, and control characters."""

VALUE_KINDS: Final = ("drop", "retype", "tweak", "add", "outputs")
BYTE_KINDS: Final = ("flip", "cut", "append", "garbage", "empty")


@dataclass(frozen=True)
class Mutation:
    """One mutated batch: its bytes, what was done and whether the digest was redone."""

    data: bytes
    kind: str
    resigned: bool
    changed: bool  # whether the outputs differ from the original's


def split(data: bytes) -> tuple[bytes, list[Any]]:
    """A batch file's digest and its outputs (decoded without any checking)."""
    batch = msgspec.msgpack.decode(data)
    return batch["sha256"], msgspec.msgpack.decode(batch["outputs"])


def join(outputs: list[Any], digest: bytes | None = None) -> bytes:
    """A batch file of ``outputs`` with ``digest``, or (None) the right one."""
    body = msgspec.msgpack.encode(outputs)
    sha = hashlib.sha256(body).digest() if digest is None else digest
    return msgspec.msgpack.encode({"sha256": sha, "outputs": body})


def mutate(data: bytes, rng: random.Random) -> Mutation:
    """One seeded mutation of the batch file ``data``."""
    digest, outputs = split(data)
    if rng.random() < 0.2:
        kind = rng.choice(BYTE_KINDS)
        damaged = _bytes(data, kind, rng)
        return Mutation(damaged, kind, resigned=False, changed=damaged != data)
    kind = rng.choice(VALUE_KINDS)
    mutated = copy.deepcopy(outputs)
    if kind == "outputs":
        _outputs(mutated, rng)
    else:
        _node(mutated, kind, rng)
    resigned = rng.random() < 0.5
    body = join(mutated, None if resigned else digest)
    return Mutation(body, kind, resigned=resigned, changed=mutated != outputs)


def _bytes(data: bytes, kind: str, rng: random.Random) -> bytes:
    if kind == "flip":
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :]
    if kind == "cut":
        return data[: rng.randrange(len(data))]
    if kind == "append":
        return data + rng.randbytes(rng.randint(1, 64))
    if kind == "garbage":
        return rng.randbytes(rng.randint(1, 256))
    return b""


def _outputs(outputs: list[Any], rng: random.Random) -> None:
    choice = rng.randrange(4)
    if choice == 0 and outputs:
        outputs.append(copy.deepcopy(rng.choice(outputs)))  # a case twice
    elif choice == 1 and outputs:
        outputs.pop(rng.randrange(len(outputs)))  # a case lost: sent again, no harm
    elif choice == 2 and len(outputs) > 1:
        a, b = rng.sample(range(len(outputs)), 2)
        outputs[a]["case_index"], outputs[b]["case_index"] = (
            outputs[b]["case_index"],
            outputs[a]["case_index"],
        )
    else:
        outputs.insert(0, rng.choice(ODD_VALUES))


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (keys and indexes), the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found.append((*path, key))
        found.extend(_nodes(item, (*path, key)))
    return found


def _node(outputs: list[Any], kind: str, rng: random.Random) -> None:
    paths = _nodes(outputs)
    if not paths:
        return
    path = rng.choice(paths)
    parent: Any = outputs
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if kind == "drop":
        del parent[key]
    elif kind == "retype":
        parent[key] = rng.choice([v for v in ODD_VALUES if type(v) is not type(parent[key])])
    elif kind == "add":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target[f"unknown_{rng.randrange(100)}"] = rng.choice(ODD_VALUES)
        else:
            target.append(rng.choice(ODD_VALUES))
    else:
        parent[key] = _tweaked(parent[key], rng)


def _tweaked(value: Any, rng: random.Random) -> Any:
    """The same type, another value."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice((value + 1, value - 1, -value - 1, value * 1000 + 7, 2**31 + value))
    if isinstance(value, float):
        return rng.choice((value * 2 + 1, -value, 1e300))
    if isinstance(value, str):
        return rng.choice((value + "x", value[:-1], value.upper() + "\u0085", "searched", "failed"))
    if isinstance(value, list):
        return [*value, *value[:1]] if value else [rng.choice(ODD_VALUES)]
    if isinstance(value, dict):
        return {}
    return rng.choice(ODD_VALUES)
