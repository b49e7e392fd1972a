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
  parses the bytes with ``json``, whose ``object_pairs_hook`` sees every
  member, and names the first repeat in document order with its JSON path,
  as compare's other decoder errors do.

Both run only on bytes msgspec has already accepted as JSON.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import msgspec
import pyarrow as pa

SMALL: Final = 1 << 20
"""Up to this many bytes parsing with ``json`` alone is quicker than asking Arrow first."""

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


# ------------------------------------------------------------------ naming the repeat


class _Members(tuple[tuple[str, object], ...]):
    """An object that holds a repeated key at some depth: every member in file
    order, each value kept only where it holds one too (else ``None``)."""


def _holds_repeat(value: object) -> bool:
    if not isinstance(value, list):
        return isinstance(value, _Members)
    stack = [value]  # not recursive: arrays may nest as deep as msgspec lets them
    while stack:
        item = stack.pop()
        if isinstance(item, _Members):
            return True
        if isinstance(item, list):
            stack.extend(item)
    return False


def _members(pairs: list[tuple[str, object]]) -> _Members | None:
    """``json``'s hook per object, innermost first: ``None`` for an object with
    no repeated key in it at any depth, so a clean document keeps next to nothing."""
    kept = [(key, value if _holds_repeat(value) else None) for key, value in pairs]
    if len({key for key, _ in pairs}) == len(pairs) and not any(v is not None for _, v in kept):
        return None
    return _Members(kept)


def _find(value: object, shape: Shape, path: str) -> Repeat | None:
    """The first repeat in file order inside ``shape``'s objects of ``value``."""
    if isinstance(shape, Each) and isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, shape.item, f"{path}[{index}]")
            if found is not None:
                return found
    if isinstance(shape, Fixed) and isinstance(value, _Members):
        seen: set[str] = set()
        for key, child in value:
            inner = shape.fields.get(key)
            if inner is None:
                continue
            if key in seen:
                return Repeat(path, key)
            seen.add(key)
            found = _find(child, inner, f"{path}.{key}" if path else key)
            if found is not None:
                return found
    return None


def first_repeat(data: bytes, shape: Fixed) -> Repeat | None:
    """The first key repeated inside one of ``shape``'s objects, in document
    order, named by parsing ``data`` (valid JSON) once more with ``json``, which
    sees every member (``None`` for JSON nested past ``json``'s own depth)."""
    try:
        return _find(json.loads(data, object_pairs_hook=_members), shape, "")
    except RecursionError:
        return None
