"""Strict JSON decoding: the reference's serde rules, reproduced for Python.

Python's ``json`` module is lenient where taguru's serde decoding is strict
(EVALUATE.md §0.1, GATE_AND_COMPARE.md §1.2), so every loader goes through
these helpers instead of calling ``json.loads`` directly:

* :func:`loads` parses one JSON text, reading a number with a fraction or an
  exponent as taguru does (:mod:`.serde_numbers`). ``NaN``/``Infinity``
  literals, numbers that overflow a double (``1e400``), lone UTF-16 surrogate escapes and
  nesting deeper than 128 levels are syntax errors (:class:`JsonSyntaxError`).
  A key repeated inside one object either keeps its last value (eval.jsonl and
  server responses) and is remembered in :attr:`JsonObject.duplicate_keys`, or
  is rejected at once with ``reject_duplicate_keys=True``.
* The ``read_*`` functions type one already-parsed value. Each takes the
  value and its :data:`JsonPath` (a tuple of keys and indices) and raises
  :class:`JsonShapeError` naming that path, with serde-like wording
  (``invalid type: integer `42`, expected a sequence``,
  ``unknown field `x`, expected one of `a`, `b```, ``missing field `query```).

Integers (``read_u8`` … ``read_usize``) accept only JSON integers written
without fraction or exponent, never booleans. :func:`read_f32` accepts any
JSON number and rounds it to binary32 before the caller range-checks it.

A closed object (fixed keys, typo protection) is read with
:func:`read_closed_object`: it returns the object's members after checking
that every key is known and every required key present. Free-keyed maps use
:func:`read_map`, where a repeated key always keeps its last value.

Callers (dataset, thresholds) catch :class:`JsonSyntaxError` /
:class:`JsonShapeError` and re-raise them as the project's ``InputError`` with
their own file/line prefix: these two exceptions never reach the user.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeAlias, TypeVar

from taguru_eval._base.serde_numbers import NumberOutOfRange, read_number
from taguru_eval._base.text import json_f64, to_f32

JsonPath = tuple[str | int, ...]
"""Where a value sits inside its document: object keys and array indices."""

T = TypeVar("T")

Reader: TypeAlias = Callable[[object, JsonPath], T]
"""A typed reader: ``(value, path) -> typed value``, raising JsonShapeError."""

U8_MAX = 255
U32_MAX = 4_294_967_295
U64_MAX = 18_446_744_073_709_551_615
USIZE_MAX = U64_MAX
I64_MAX = 2**63 - 1
"""The largest count a run table holds (its integer columns are Arrow int64): a
u64 count beyond it is stored as this value, "at least this many" (tables.flatten)."""
MAX_DEPTH = 128  # serde_json's recursion limit: 127 nested containers parse, 128 do not
_I64_MIN = -(2**63)
_F64_MAX_DIGITS = 309  # 10**309 exceeds the largest double (~1.8e308)


BOM: Final = "\ufeff"
"""A UTF-8 byte order mark, decoded: no JSON value starts with it."""

BOM_HINT: Final = "the file starts with a UTF-8 byte order mark (BOM): save it as UTF-8 without one"
"""The fix for a file whose first character is :data:`BOM` (taguru refuses it too)."""


class JsonSyntaxError(ValueError):
    """The text is not (strict) JSON; ``str()`` is the decoder's description."""


class JsonShapeError(ValueError):
    """A parsed value has the wrong type, range or keys.

    ``path`` locates the value; ``reason`` is the serde-like description;
    ``str()`` is ``"{field}: {reason}"`` (just the reason at the root).
    """

    def __init__(self, path: JsonPath, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(self.detail)

    @property
    def field(self) -> str:
        """The JSON path as text, e.g. ``expected_sources[1].relevance``."""
        return format_path(self.path)

    @property
    def detail(self) -> str:
        field = self.field
        return f"{field}: {self.reason}" if field else self.reason

    def relative_to(self, prefix: JsonPath) -> str:
        """The detail with ``prefix`` removed from the path (for ``{field}: {detail}``)."""
        rest = self.path[len(prefix) :] if self.path[: len(prefix)] == prefix else self.path
        field = format_path(rest)
        return f"{field}: {self.reason}" if field else self.reason


class JsonObject(dict[str, object]):
    """A parsed JSON object that remembers which keys appeared more than once."""

    duplicate_keys: tuple[str, ...] = ()


def format_path(path: Sequence[str | int]) -> str:
    """``("expected_sources", 1, "relevance")`` -> ``expected_sources[1].relevance``."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(f".{part}" if out else part)
    return "".join(out)


# --------------------------------------------------------------------------- parsing


def loads(text: str, *, reject_duplicate_keys: bool = False) -> object:
    """Parse ``text`` as one strict JSON value.

    Objects come back as :class:`JsonObject`. With ``reject_duplicate_keys``
    a repeated key anywhere is a :class:`JsonSyntaxError` (``duplicate field
    `k```); without it the last occurrence wins and the key is recorded in
    ``duplicate_keys`` so a struct reader can still refuse it.
    """

    def object_hook(pairs: list[tuple[str, object]]) -> JsonObject:
        obj = JsonObject()
        duplicates: list[str] = []
        for key, value in pairs:
            if key in obj:
                if reject_duplicate_keys:
                    raise JsonSyntaxError(f"duplicate field `{key}`")
                duplicates.append(key)
            obj[key] = value
        if duplicates:
            obj.duplicate_keys = tuple(duplicates)
        return obj

    try:
        value = json.loads(
            text,
            object_pairs_hook=object_hook,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        if text.startswith(BOM):
            # Python names its own remedy (utf-8-sig); serde_json, and so taguru,
            # sees a character that starts no JSON value.
            raise JsonSyntaxError("expected value at line 1 column 1") from None
        raise JsonSyntaxError(
            f"{decode_error_reason(exc)} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise JsonSyntaxError("recursion limit exceeded") from None
    except JsonSyntaxError:
        raise
    except ValueError as exc:  # int() digit limit and similar conversion failures
        raise JsonSyntaxError(str(exc)) from None
    _check_strings_and_depth(value)
    return value


def decode_error_reason(exc: json.JSONDecodeError) -> str:
    """The decoder's reason without its position.

    A few of Python's reasons end in a bare "at" that its own ``str()``
    follows with ``: line …`` ("Unterminated string starting at"); a message
    that puts the position elsewhere, or adds its own "at line …", would read
    "starting at at line 1".
    """
    return exc.msg.removesuffix(" at")


def _reject_constant(name: str) -> object:
    raise JsonSyntaxError(f"{name} is not a JSON value")


def _parse_float(token: str) -> float:
    # A fraction or an exponent: read as taguru's serde_json reads it (two
    # roundings, ERRATA row 24), refused where it refuses it.
    try:
        return read_number(token)
    except NumberOutOfRange as exc:
        raise JsonSyntaxError(str(exc)) from None


def _parse_int(token: str) -> int:
    # serde_json reads integers outside i64/u64 as f64; one that overflows a
    # double is a decoding error there, so it is one here too. More digits than
    # any double has is decided on the text, before int() (whose own digit
    # limit would otherwise answer with Python's advice instead of serde's words).
    if len(token) - token.startswith("-") > _F64_MAX_DIGITS:
        raise JsonSyntaxError(f"number out of range: {token[:40]}…")
    value = int(token)
    if (value > U64_MAX or value < _I64_MIN) and len(token) > 300:
        try:
            float(value)
        except OverflowError:
            raise JsonSyntaxError(f"number out of range: {token[:40]}…") from None
    return value


def check_depth(root: object) -> None:
    """Raise :class:`JsonSyntaxError` when ``root`` nests :data:`MAX_DEPTH` or more
    containers: serde's limit, for a value another parser already decoded (the
    stack-bound ``RecursionError`` of ``json.loads`` sits far deeper and moves
    with the caller's own stack)."""
    _check_strings_and_depth(root, strings=False)


def _check_strings_and_depth(root: object, *, strings: bool = True) -> None:
    """Reject lone surrogates (not UTF-8 encodable) and nesting over MAX_DEPTH."""
    stack: list[tuple[object, int]] = [(root, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if strings:
                _check_string(value)
        elif isinstance(value, dict):
            if depth >= MAX_DEPTH - 1:
                raise JsonSyntaxError("recursion limit exceeded")
            for key, item in value.items():
                if strings:
                    _check_string(key)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth >= MAX_DEPTH - 1:
                raise JsonSyntaxError("recursion limit exceeded")
            stack.extend((item, depth + 1) for item in value)


def reject_lone_surrogates(root: object) -> None:
    """Raise :class:`JsonSyntaxError` when a string or key of ``root`` holds a lone
    surrogate (a ``\\ud800`` escape Python's decoder lets through and serde's does not)."""
    stack: list[object] = [root]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            _check_string(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_string(key)
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonSyntaxError("lone surrogate in a \\u escape") from None


# --------------------------------------------------------------------------- describing


def describe(value: object, *, max_string: int | None = 60) -> str:
    """serde's name for a JSON value in an ``invalid type`` message.

    Strings longer than ``max_string`` characters are shortened with ``…`` so a
    local error stays one readable line; the reference server passes ``None``
    to quote them whole, as serde does.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{json_f64(value)}`"
    if isinstance(value, str):
        long = max_string is not None and len(value) > max_string
        shown = value[:max_string] + "…" if long else value
        return f"string {json.dumps(shown, ensure_ascii=False)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _invalid_type(path: JsonPath, value: object, expected: str) -> JsonShapeError:
    return JsonShapeError(path, f"invalid type: {describe(value)}, expected {expected}")


def _expected_keys(keys: Sequence[str]) -> str:
    quoted = [f"`{key}`" for key in keys]
    if not quoted:
        return "there are no fields"
    if len(quoted) == 1:
        return f"expected {quoted[0]}"
    if len(quoted) == 2:
        return f"expected {quoted[0]} or {quoted[1]}"
    return "expected one of " + ", ".join(quoted)


# --------------------------------------------------------------------------- scalars


def _read_unsigned(value: object, path: JsonPath, maximum: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(path, value, name)
    if value < 0 or value > maximum:
        raise JsonShapeError(path, f"invalid value: integer `{value}`, expected {name}")
    return value


def read_u8(value: object, path: JsonPath) -> int:
    """A JSON integer in 0..=255."""
    return _read_unsigned(value, path, U8_MAX, "u8")


def read_u32(value: object, path: JsonPath) -> int:
    """A JSON integer in 0..=4294967295."""
    return _read_unsigned(value, path, U32_MAX, "u32")


def read_u64(value: object, path: JsonPath) -> int:
    """A JSON integer in 0..=2^64-1."""
    return _read_unsigned(value, path, U64_MAX, "u64")


def read_usize(value: object, path: JsonPath) -> int:
    """A JSON integer in 0..=2^64-1 (the reference's 64-bit usize)."""
    return _read_unsigned(value, path, USIZE_MAX, "usize")


def read_f64(value: object, path: JsonPath) -> float:
    """Any JSON number as a double (integers widened); booleans are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid_type(path, value, "f64")
    try:
        return float(value)
    except OverflowError:
        raise JsonShapeError(path, "number out of range, expected f64") from None


def read_f32(value: object, path: JsonPath) -> float:
    """Any JSON number, rounded to IEEE-754 binary32 (may become ±inf)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid_type(path, value, "f32")
    try:
        wide = float(value)
    except OverflowError:
        wide = math.inf if value > 0 else -math.inf
    try:
        return to_f32(wide)
    except OverflowError:  # beyond binary32's range: Rust's `as f32` saturates to inf
        return math.copysign(math.inf, wide)


def read_bool(value: object, path: JsonPath) -> bool:
    """A JSON ``true``/``false``."""
    if not isinstance(value, bool):
        raise _invalid_type(path, value, "a boolean")
    return value


def read_str(value: object, path: JsonPath) -> str:
    """A JSON string."""
    if not isinstance(value, str):
        raise _invalid_type(path, value, "a string")
    return value


def read_optional(
    value: object, path: JsonPath, reader: Callable[[object, JsonPath], T]
) -> T | None:
    """``null`` -> ``None``, anything else through ``reader``."""
    return None if value is None else reader(value, path)


# --------------------------------------------------------------------------- containers


def read_array(value: object, path: JsonPath, item: Callable[[object, JsonPath], T]) -> list[T]:
    """A JSON array whose every element passes ``item`` (path gets the index)."""
    if not isinstance(value, list):
        raise _invalid_type(path, value, "a sequence")
    return [item(element, (*path, index)) for index, element in enumerate(value)]


def read_str_array(value: object, path: JsonPath) -> list[str]:
    """A JSON array of strings."""
    return read_array(value, path, read_str)


def read_object(value: object, path: JsonPath) -> Mapping[str, object]:
    """Any JSON object (members unchecked)."""
    if not isinstance(value, dict):
        raise _invalid_type(path, value, "a map")
    return value


def read_closed_object(
    value: object,
    path: JsonPath,
    fields: Iterable[str],
    *,
    required: Iterable[str] = (),
    reject_duplicates: bool = False,
) -> Mapping[str, object]:
    """A JSON object whose keys all belong to ``fields`` (a serde struct with
    ``deny_unknown_fields``).

    Keys are checked in document order; the first unknown key fails
    (``unknown field `k`, expected one of …``). Then each ``required`` key
    must be present (``missing field `k```). With ``reject_duplicates`` a key
    the parser saw twice fails with ``duplicate field `k```.
    Returns the members; the caller types each one.
    """
    allowed = list(fields)
    obj = read_object(value, path)
    if reject_duplicates and isinstance(obj, JsonObject) and obj.duplicate_keys:
        raise JsonShapeError(path, f"duplicate field `{obj.duplicate_keys[0]}`")
    known = set(allowed)
    for key in obj:
        if key not in known:
            raise JsonShapeError(path, f"unknown field `{key}`, {_expected_keys(allowed)}")
    for key in required:
        if key not in obj:
            raise JsonShapeError(path, f"missing field `{key}`")
    return obj


def read_map(
    value: object,
    path: JsonPath,
    item: Callable[[object, JsonPath], T],
    *,
    reject_duplicates: bool = False,
) -> dict[str, T]:
    """A free-keyed JSON object (metric-name map, case-id map): each value
    passes ``item``; a repeated key keeps its last value (as serde's map does),
    or with ``reject_duplicates`` fails with ``duplicate key `k```."""
    obj = read_object(value, path)
    if reject_duplicates and isinstance(obj, JsonObject) and obj.duplicate_keys:
        raise JsonShapeError(path, f"duplicate key `{obj.duplicate_keys[0]}`")
    return {key: item(member, (*path, key)) for key, member in obj.items()}
