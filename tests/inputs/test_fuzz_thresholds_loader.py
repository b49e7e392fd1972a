"""Property: a mutated thresholds file either loads or raises InputError — nothing else.

Mutations (issue 2, "Bad input"): truncation, type flips, unknown keys,
invalid UTF-8, huge numbers, deep nesting, duplicate keys, a BOM, random bytes;
and (issue 12) keys and values with control characters and lone surrogates,
and integers too long for any double. The error is always one printable line.
``TAGURU_EVAL_FUZZ_EXAMPLES`` raises the example count.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fuzz import EXAMPLES, assert_one_printable_line, nasty_text

from taguru_eval.catalog import CASE_SCOPED_METRICS, CATALOG
from taguru_eval.errors import InputError
from taguru_eval.inputs.thresholds import Thresholds, load_thresholds

CASE_IDS = ("c1", "c2", "ケース")
METRICS = [*CATALOG, "not.a.metric", ""]


class Pairs(list[tuple[str, Any]]):
    """A JSON object as ordered pairs, so a key may appear twice."""


def dump(node: Any, ascii_only: bool = False) -> str:
    if isinstance(node, Pairs):
        members = (
            f"{json.dumps(k, ensure_ascii=ascii_only)}:{dump(v, ascii_only)}" for k, v in node
        )
        return "{" + ",".join(members) + "}"
    if isinstance(node, list):
        return "[" + ",".join(dump(item, ascii_only) for item in node) + "]"
    if isinstance(node, RawToken):
        return node.text
    return json.dumps(node, ensure_ascii=ascii_only)


class RawToken:
    """Text inserted verbatim (a number JSON can spell but Python would not emit)."""

    def __init__(self, text: str) -> None:
        self.text = text


numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
)
bounds = st.fixed_dictionaries(
    {}, optional={"min": st.one_of(st.none(), numbers), "max": st.one_of(st.none(), numbers)}
).map(lambda d: Pairs(d.items()))
bound_maps = st.dictionaries(st.sampled_from(METRICS), bounds, max_size=4).map(
    lambda d: Pairs(d.items())
)
documents = st.fixed_dictionaries(
    {"taguru_evaluate_thresholds": st.sampled_from([1, 1, 1, 0, 2])},
    optional={
        "aggregate": bound_maps,
        "cases": st.fixed_dictionaries(
            {},
            optional={
                "default": st.dictionaries(
                    st.sampled_from(CASE_SCOPED_METRICS), bounds, max_size=3
                ).map(lambda d: Pairs(d.items())),
                "overrides": st.dictionaries(
                    st.sampled_from([*CASE_IDS, "ghost"]), bound_maps, max_size=3
                ).map(lambda d: Pairs(d.items())),
            },
        ).map(lambda d: Pairs(d.items())),
        "allow_unstable_corpus": st.booleans(),
    },
).map(lambda d: Pairs(d.items()))

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.text(max_size=8),
    nasty_text,
    st.sampled_from(
        [
            RawToken("1e400"),
            RawToken("-1e309"),
            RawToken("1" + "0" * 500),
            RawToken(str(2**64)),
            RawToken("NaN"),
            RawToken("Infinity"),
            RawToken("-Infinity"),
            RawToken("1.0"),
            RawToken("-0"),
            RawToken('"\\ud800"'),
            RawToken("9" * 5000),
            RawToken("-" + "1" * 5000),
        ]
    ),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(st.tuples(nasty_text, children), max_size=3).map(Pairs),
    ),
    max_leaves=6,
)


def containers(node: Any) -> list[Pairs]:
    """Every object inside ``node`` (depth first), the root included."""
    found: list[Pairs] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Pairs):
            found.append(current)
            stack.extend(value for _, value in current)
        elif isinstance(current, list):
            stack.extend(current)
    return found


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    document = draw(documents)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        objects = containers(document)
        target = draw(st.sampled_from(objects))
        kind = draw(st.sampled_from(["flip", "unknown_key", "duplicate", "huge", "nest", "delete"]))
        if kind == "flip" and target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            target[index] = (target[index][0], draw(json_values))
        elif kind == "unknown_key":
            target.append((draw(nasty_text), draw(json_values)))
        elif kind == "duplicate" and target:
            target.append(draw(st.sampled_from(list(target))))
        elif kind == "huge" and target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            target[index] = (target[index][0], draw(json_scalars))
        elif kind == "nest" and target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            depth = draw(st.sampled_from([5, 127, 129, 2000, 100_000]))
            opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
            target[index] = (target[index][0], RawToken(opener * depth + "1" + closer * depth))
        elif kind == "delete" and target:
            del target[draw(st.integers(min_value=0, max_value=len(target) - 1))]
    raw = dump(document, draw(st.booleans())).encode("utf-8", "surrogatepass")
    byte_kind = draw(st.sampled_from(["none", "none", "truncate", "invalid_utf8", "bom", "junk"]))
    if byte_kind == "truncate":
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw)))]
    elif byte_kind == "invalid_utf8":
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
        raw = raw[:at] + bad + raw[at:]
    elif byte_kind == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif byte_kind == "junk":
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]
    return raw


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=mutated_files())
def test_a_mutated_file_loads_or_raises_input_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "th.json"
        path.write_bytes(raw)
        try:
            loaded = load_thresholds(str(path), CATALOG, CASE_IDS)
        except InputError as error:
            message = str(error)
            assert message.startswith((f"{path}: ", f"cannot read {path}: "))
            assert_one_printable_line(message)
            assert "set_int_max_str_digits" not in message
            return
    assert isinstance(loaded, Thresholds)
    assert loaded.stamp == 1
    assert len(loaded.sha256) == 64
    # A file that loads is usable by the gate: every frame builds.
    loaded.aggregate_bounds.height  # noqa: B018
    loaded.case_bounds(list(CASE_IDS)).height  # noqa: B018


@settings(max_examples=max(50, EXAMPLES // 4), deadline=None)
@given(raw=st.binary(max_size=200))
def test_random_bytes_load_or_raise_input_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "th.json"
        path.write_bytes(raw)
        try:
            load_thresholds(str(path), CATALOG, CASE_IDS)
        except InputError as error:
            assert_one_printable_line(str(error))
            return
