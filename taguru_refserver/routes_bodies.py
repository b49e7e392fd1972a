"""Typed reading of JSON request bodies with taguru's framework rejections (HTTP.md §4.3).

taguru decodes bodies with serde: a value of the wrong JSON type is a **422**
``malformed_request`` whose text names the field path and what was expected.
These helpers reproduce that wording (``Failed to deserialize the JSON body
into the target type: limit: invalid type: string "x", expected usize``) so a
refusal reads the same whichever server answered. Semantic checks (empty
names, windows, list sizes) are not here: they are 400s raised by the write
and read operations themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from taguru_eval._base.jsonstrict import describe
from taguru_refserver.envelope import ApiError

DESERIALIZE_PREFIX = "Failed to deserialize the JSON body into the target type: "


def _whole(value: object) -> str:
    """serde's wording for ``value``, quoting a string in full as the server does."""
    return describe(value, max_string=None)


U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def type_error(path: str, value: object, expected: str) -> ApiError:
    where = f"{path}: " if path else ""
    return ApiError(
        "malformed_request",
        f"{DESERIALIZE_PREFIX}{where}invalid type: {_whole(value)}, expected {expected}",
        status=422,
    )


def value_error(path: str, value: object, expected: str) -> ApiError:
    where = f"{path}: " if path else ""
    return ApiError(
        "malformed_request",
        f"{DESERIALIZE_PREFIX}{where}invalid value: {_whole(value)}, expected {expected}",
        status=422,
    )


def missing_field(path: str, key: str) -> ApiError:
    where = f"{path}: " if path else ""
    return ApiError(
        "malformed_request", f"{DESERIALIZE_PREFIX}{where}missing field `{key}`", status=422
    )


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def as_object(value: object, path: str, what: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise type_error(path, value, what)
    return value


def as_list(value: object, path: str) -> list[object]:
    if not isinstance(value, list):
        raise type_error(path, value, "a sequence")
    return value


def as_str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise type_error(path, value, "a string")
    return value


def as_bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise type_error(path, value, "a boolean")
    return value


def as_uint(value: object, path: str, kind: str) -> int:
    """An unsigned integer of ``kind`` (``u32``, ``u64``, ``usize``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise type_error(path, value, kind)
    top = U32_MAX if kind == "u32" else U64_MAX
    if value < 0 or value > top:
        raise value_error(path, value, kind)
    return value


def as_float(value: object, path: str, kind: str = "f64") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise type_error(path, value, kind)
    return float(value)


class Fields:
    """Field access on one JSON object (a Rust struct without deny_unknown_fields)."""

    def __init__(self, value: object, path: str = "", what: str = "a struct") -> None:
        self.data = as_object(value, path, what)
        self.path = path

    def at(self, key: str) -> str:
        return join(self.path, key)

    def present(self, key: str) -> bool:
        """True when ``key`` carries a value (absent and ``null`` both count as absent)."""
        return self.data.get(key) is not None

    def required(self, key: str) -> object:
        if key not in self.data:
            raise missing_field(self.path, key)
        return self.data[key]

    def req_str(self, key: str) -> str:
        return as_str(self.required(key), self.at(key))

    def opt_str(self, key: str) -> str | None:
        value = self.data.get(key)
        return None if value is None else as_str(value, self.at(key))

    def opt_bool(self, key: str) -> bool | None:
        value = self.data.get(key)
        return None if value is None else as_bool(value, self.at(key))

    def opt_uint(self, key: str, kind: str) -> int | None:
        value = self.data.get(key)
        return None if value is None else as_uint(value, self.at(key), kind)

    def req_uint(self, key: str, kind: str) -> int:
        return as_uint(self.required(key), self.at(key), kind)

    def opt_float(self, key: str, kind: str = "f64") -> float | None:
        value = self.data.get(key)
        return None if value is None else as_float(value, self.at(key), kind)

    def str_list(self, key: str) -> list[str]:
        """A ``Vec<String>`` defaulting to empty."""
        value = self.data.get(key)
        if value is None:
            return []
        items = as_list(value, self.at(key))
        return [as_str(item, f"{self.at(key)}[{index}]") for index, item in enumerate(items)]

    def str_or_list(self, key: str) -> list[str]:
        """taguru's ``OneOrMany<String>``: a string or an array of strings; absent = []."""
        value = self.data.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list):
            raise type_error(self.at(key), value, "a string or a sequence of strings")
        return [as_str(item, f"{self.at(key)}[{index}]") for index, item in enumerate(value)]

    def str_map(self, key: str) -> dict[str, str]:
        """A ``Map<String, String>`` defaulting to empty."""
        value = self.data.get(key)
        if value is None:
            return {}
        mapping = as_object(value, self.at(key), "a map")
        return {name: as_str(item, join(self.at(key), name)) for name, item in mapping.items()}

    def object_map(self, key: str) -> Mapping[str, object]:
        value = self.data.get(key)
        if value is None:
            return {}
        return as_object(value, self.at(key), "a map")


def clamp_unit(value: float) -> float:
    """Clamp a floor to [0, 1]; NaN reads as 1.0 (HTTP.md §6.6)."""
    if math.isnan(value):
        return 1.0
    return min(max(value, 0.0), 1.0)


def over_limit(what: str, count: int, limit: int) -> ApiError:
    """The list-size refusal (``wire/error_over_limit.json`` wording)."""
    return ApiError(
        "over_limit",
        f"{what} carries {count} items, past the per-request limit of {limit}; split the request",
    )
