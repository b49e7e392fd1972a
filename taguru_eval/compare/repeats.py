"""A key repeated inside an object compare reads is an error (GATE_AND_COMPARE.md §1.2).

taguru decodes evaluation.json straight into structs, and serde refuses a
field given twice in one of them (``duplicate field `x```); a key no struct
reads, or a key of a free-keyed map (``definitions``, ``metrics``), may
repeat. msgspec, which decodes compare's view, keeps the last value instead,
so the objects the view reads are checked apart from the decoding, against
the same view (:func:`shape_of` derives the objects and their keys from the
msgspec types, the case blocks' from the catalog):

* a whole file is parsed once more by pyarrow's JSON reader against a schema
  of exactly those objects (:func:`arrow_schema`). Like serde it refuses a
  field the schema names when it is given twice in one object — a ``null``
  first occurrence included — and ignores every other key, at C++ speed
  (about a second for a 100,000-case file of 370 MB);
* when Arrow finds a repeat, or cannot decide, and for small inputs (the
  head the run-store reader decodes, one definition), :func:`first_repeat`
  walks the bytes — looking into the checked objects only, skipping any
  other value in one C call — and names the first repeat in document order
  with its JSON path, as compare's other decoder errors do.

Both run only on bytes msgspec has already accepted as JSON.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import msgspec
import pyarrow as pa

SMALL: Final = 1 << 20
"""Up to this many bytes the byte walk alone is quicker than asking Arrow first."""

ARROW_MAX: Final = (1 << 31) - 2
"""Arrow reads the file as one block, whose size is a 32-bit integer."""


@dataclass(frozen=True)
class Leaf:
    """A value compare reads but does not look into, and its Arrow type."""

    arrow: pa.DataType


@dataclass(frozen=True)
class Fixed:
    """A fixed-shape object: the keys compare reads, each with its value's shape."""

    fields: Mapping[str, Shape]


@dataclass(frozen=True)
class Each:
    """An array whose elements have one shape (the ``cases`` array)."""

    item: Shape


Shape = Leaf | Fixed | Each


@dataclass(frozen=True)
class Repeat:
    """A key given twice in one checked object; ``path`` locates the object."""

    path: str
    key: str

    @property
    def detail(self) -> str:
        """serde's words, after the object's JSON path (none for the top level)."""
        words = f"duplicate field `{self.key}`"
        return f"{self.path}: {words}" if self.path else words


# ------------------------------------------------------------------ the shape


_SCALARS: Final[Mapping[type[msgspec.inspect.Type], pa.DataType]] = {
    msgspec.inspect.IntType: pa.uint64(),  # the view's integers are all unsigned
    msgspec.inspect.FloatType: pa.float64(),
    msgspec.inspect.StrType: pa.string(),
    msgspec.inspect.BoolType: pa.bool_(),
    # A free-keyed map, or a raw value: any object, none of its keys checked.
    msgspec.inspect.DictType: pa.struct([]),
    msgspec.inspect.RawType: pa.struct([]),
}


@functools.cache
def shape_of(view: type) -> Fixed:
    """The objects a msgspec view type reads, as a :class:`Fixed` tree.

    A field typed as any value (``thresholds.passed``, read for display only)
    is no field of taguru's view and may repeat.
    """
    shape = _shape(msgspec.inspect.type_info(view))
    if not isinstance(shape, Fixed):
        raise TypeError(f"{view!r} is not a struct type")
    return shape


def _shape(info: msgspec.inspect.Type) -> Shape | None:
    if isinstance(info, msgspec.inspect.UnionType):  # ``X | None``
        inner = [kind for kind in info.types if not isinstance(kind, msgspec.inspect.NoneType)]
        return _shape(inner[0]) if len(inner) == 1 else None
    if isinstance(info, msgspec.inspect.StructType):
        fields = {field.encode_name: _shape(field.type) for field in info.fields}
        return Fixed({name: shape for name, shape in fields.items() if shape is not None})
    if isinstance(info, msgspec.inspect.ListType):
        item = _shape(info.item_type)
        return None if item is None else Each(item)
    if isinstance(info, msgspec.inspect.Metadata):
        return _shape(info.type)
    arrow = _SCALARS.get(type(info))
    return None if arrow is None else Leaf(arrow)


def arrow_schema(shape: Fixed) -> pa.Schema:
    """The Arrow schema of the checked objects (every other key is ignored)."""
    return pa.schema([pa.field(name, _arrow(child)) for name, child in shape.fields.items()])


def _arrow(shape: Shape) -> pa.DataType:
    if isinstance(shape, Leaf):
        return shape.arrow
    if isinstance(shape, Each):
        return pa.list_(_arrow(shape.item))
    return pa.struct([pa.field(name, _arrow(child)) for name, child in shape.fields.items()])


# ------------------------------------------------------------------ entry point


def find_repeat(data: bytes, shape: Fixed) -> Repeat | None:
    """The first key repeated inside one of ``shape``'s objects in ``data``
    (valid JSON, an object at the top), or ``None``."""
    if len(data) > SMALL and arrow_finds_repeat(data, shape) is False:
        return None
    return first_repeat(data, shape)


def arrow_finds_repeat(data: bytes, shape: Fixed) -> bool | None:
    """Whether pyarrow's JSON reader finds a field of ``shape`` given twice in
    one object; ``None`` when it cannot tell (it failed for another reason)."""
    if len(data) > ARROW_MAX:
        return None
    import pyarrow.json as pajson  # loaded on first use: most commands never need it

    options = pajson.ParseOptions(
        explicit_schema=arrow_schema(shape),
        unexpected_field_behavior="ignore",
        newlines_in_values=True,
    )
    try:
        pajson.read_json(
            pa.BufferReader(data),
            read_options=pajson.ReadOptions(block_size=len(data) + 1, use_threads=False),
            parse_options=options,
        )
    except pa.ArrowInvalid as exc:
        return True if "specified twice" in str(exc) else None
    return False


# ------------------------------------------------------------------ the byte walk


_SPACE: Final = re.compile(rb"[ \t\r\n]*")
_STRING_REST: Final = re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL)
_MEMBER: Final = re.compile(rb'"((?:[^"\\]|\\.)*)"[ \t\r\n]*:[ \t\r\n]*', re.DOTALL)
"""A member's key and the ``:`` after it, up to its value."""
_AFTER: Final = re.compile(rb"[ \t\r\n]*([,\]}])[ \t\r\n]*")
"""What follows a value inside a container: ``,`` or the closing bracket."""
_SCALAR: Final = re.compile(rb"[^,\]}\s]*")
_TOKEN: Final = re.compile(rb'["{}\[\]]')
_TRAILING: Final = re.compile(r"trailing characters \(byte (?P<offset>\d+)\)$")


class _Walk:
    """One pass over ``data`` (valid JSON); every method takes the position of
    a value's first byte and returns the position just after it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.view = memoryview(data)

    def space(self, pos: int) -> int:
        found = _SPACE.match(self.data, pos)
        return pos if found is None else found.end()

    def value(self, pos: int, shape: Shape | None, path: str) -> tuple[int, Repeat | None]:
        opener = self.data[pos : pos + 1]
        if isinstance(shape, Fixed) and opener == b"{":
            return self.object(pos, shape, path)
        if isinstance(shape, Each) and opener == b"[":
            return self.array(pos, shape.item, path)
        return self.skip(pos), None

    def after(self, pos: int) -> tuple[int, bytes]:
        """Past the separator after a value: the next position and ``,``/``]``/``}``."""
        found = _AFTER.match(self.data, pos)
        if found is None:
            raise ValueError(f"no separator at byte {pos}")
        return found.end(), found.group(1)

    def object(self, pos: int, shape: Fixed, path: str) -> tuple[int, Repeat | None]:
        seen: set[str] = set()
        pos = self.space(pos + 1)
        if self.data[pos : pos + 1] == b"}":
            return pos + 1, None
        while True:
            member = _MEMBER.match(self.data, pos)
            if member is None:
                raise ValueError(f"no member at byte {pos}")
            raw = member.group(1)
            key = str(json.loads(b'"' + raw + b'"')) if b"\\" in raw else raw.decode("utf-8")
            pos = member.end()
            child = shape.fields.get(key)
            if child is not None:
                if key in seen:
                    return pos, Repeat(path, key)
                seen.add(key)
            pos, found = self.value(pos, child, f"{path}.{key}" if path else key)
            if found is not None:
                return pos, found
            pos, separator = self.after(pos)
            if separator == b"}":
                return pos, None

    def array(self, pos: int, item: Shape, path: str) -> tuple[int, Repeat | None]:
        pos = self.space(pos + 1)
        index = 0
        if self.data[pos : pos + 1] == b"]":
            return pos + 1, None
        while True:
            pos, found = self.value(pos, item, f"{path}[{index}]")
            if found is not None:
                return pos, found
            pos, separator = self.after(pos)
            if separator == b"]":
                return pos, None
            index += 1

    def skip(self, pos: int) -> int:
        opener = self.data[pos : pos + 1]
        if opener == b'"':
            rest = _STRING_REST.match(self.data, pos + 1)
            return len(self.data) if rest is None else rest.end()
        if opener in (b"{", b"["):
            return self.skip_container(pos)
        found = _SCALAR.match(self.data, pos)
        return pos if found is None else found.end()

    def skip_container(self, pos: int) -> int:
        """Past the object or array at ``pos``: msgspec parses it in one call and
        reports where the bytes after it start; a token walk if it does not."""
        try:
            msgspec.json.decode(self.view[pos:], type=msgspec.Raw)
        except msgspec.DecodeError as exc:
            found = _TRAILING.search(str(exc))
            if found is not None:
                end = pos + int(found.group("offset")) - 1  # msgspec counts from 1
                if self.data[end : end + 1] in (b",", b"]", b"}"):
                    return end
        else:
            return len(self.data)
        return self.walk_container(pos)

    def walk_container(self, pos: int) -> int:
        depth = 0
        while True:
            found = _TOKEN.search(self.data, pos)
            if found is None:
                return len(self.data)
            pos = found.end()
            char = self.data[found.start()]
            if char == 0x22:  # '"'
                rest = _STRING_REST.match(self.data, pos)
                pos = len(self.data) if rest is None else rest.end()
            elif char in b"{[":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return pos


def first_repeat(data: bytes, shape: Fixed) -> Repeat | None:
    """The first key repeated inside one of ``shape``'s objects, in document
    order, found by walking ``data`` (valid JSON with an object at the top)."""
    walk = _Walk(data)
    pos = walk.space(0)
    if data[pos : pos + 1] != b"{":
        return None
    return walk.object(pos, shape, "")[1]
