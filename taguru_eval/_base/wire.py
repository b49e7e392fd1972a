"""Server JSON into msgspec Structs, refused in serde's words.

A lane declares the shape it reads from a response once, as a msgspec
``Struct`` typed the way taguru types it (``U32``, ``U64``, ``F32`` below are
Rust's integer and float types), and :func:`convert` turns the parsed payload
into it in one C-speed step. When msgspec refuses the payload, the same
declaration is walked over the payload by :mod:`.jsonstrict`'s readers to
name the first problem the way every other decoding detail of the project is
worded (``total: invalid value: integer `-1`, expected u64``,
``missing field `plan```), so the wording follows from the declaration and
never from a second hand-written reader.

Fields are walked in declaration order, a missing required field reported
where the walk meets it. ``null`` for an optional field (``T | None``) reads
as absent. msgspec cannot bound an integer beyond int64, so a ``U64`` above
2^64−1 is not refused by :func:`convert`; a decoder that must refuse one (the
evidence package, whose counts a randomized server does send that large)
asks :func:`over_u64` after decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Final, TypeVar

import msgspec

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.structs import validation_detail

T = TypeVar("T")

U32 = Annotated[int, msgspec.Meta(ge=0, le=js.U32_MAX)]
U64 = Annotated[int, msgspec.Meta(ge=0)]
F32 = Annotated[float, msgspec.Meta(extra={"rust": "f32"})]
"""A number rounded to binary32 by whoever keeps it (:func:`taguru_eval._base.text.to_f32`)."""


class Prose(str):
    """Server prose a lane keeps (a search plan's ``reason``): msgspec hands each one
    to the ``dec_hook`` of whoever decodes it, the run's client, which returns it
    redacted (``TaguruClient.payload_as`` and its typed replies), so no lane
    redacts. Keep it as ``str(value)``: msgspec writes no ``str`` subclass."""


_UNSIGNED: Final[dict[int | None, Callable[[object, js.JsonPath], int]]] = {
    js.U8_MAX: js.read_u8,
    js.U32_MAX: js.read_u32,
    None: js.read_u64,
}


def convert(
    payload: object, kind: type[T], dec_hook: Callable[[type, Any], Any] | None = None
) -> T:
    """``payload`` as ``kind`` (``dec_hook`` makes its :class:`Prose`); raises
    :class:`~.jsonstrict.JsonShapeError` naming the first field that does not fit."""
    try:
        return msgspec.convert(payload, kind, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        try:
            _walk(payload, msgspec.inspect.type_info(kind), ())
        except js.JsonShapeError as shape:
            raise shape from None
        # A refusal the readers do not make (a float too large for a double):
        # msgspec's own words, path first like the rest.
        raise js.JsonShapeError((), validation_detail(exc)) from None


def over_u64(decoded: object) -> str | None:
    """``{path}: expected `int` <= 2^64-1`` for the first integer of a decoded
    value above u64's range, else ``None``.

    After decoding, every ``int`` left in a Struct is an integer field (a float
    field holds a float even when the JSON had an integer), and ``U32``/``U8``
    fields are already bounded, so the only integers that can exceed u64 are
    the ``U64`` ones msgspec could not bound. Worded like msgspec's own bounds.
    """
    stack: list[tuple[object, js.JsonPath]] = [(decoded, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if value > js.U64_MAX:
                where = js.format_path(path)
                return f"{where}: expected `int` <= {js.U64_MAX}"
        elif isinstance(value, msgspec.Struct):
            fields = zip(value.__struct_encode_fields__, value.__struct_fields__, strict=True)
            # Pushed in reverse so the first field in declaration order is reported.
            stack.extend(
                (getattr(value, attr), (*path, name)) for name, attr in reversed(list(fields))
            )
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, dict):
            stack.extend((item, (*path, key)) for key, item in reversed(list(value.items())))
    return None


def _walk(value: object, kind: msgspec.inspect.Type, path: js.JsonPath) -> None:
    """Raise JsonShapeError at the first place ``value`` does not fit ``kind``."""
    if isinstance(kind, msgspec.inspect.Metadata):
        if kind.extra and kind.extra.get("rust") == "f32":
            js.read_f32(value, path)
            return
        _walk(value, kind.type, path)
    elif isinstance(kind, msgspec.inspect.StructType):
        members = js.read_object(value, path)
        for field in kind.fields:
            if field.encode_name not in members:
                if field.required:
                    raise js.JsonShapeError(path, f"missing field `{field.encode_name}`")
                continue
            _walk(members[field.encode_name], field.type, (*path, field.encode_name))
    elif isinstance(kind, msgspec.inspect.UnionType):
        if value is None and any(isinstance(t, msgspec.inspect.NoneType) for t in kind.types):
            return
        (inner,) = (t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
        _walk(value, inner, path)
    elif isinstance(kind, msgspec.inspect.ListType):
        js.read_array(value, path, lambda item, at: _walk(item, kind.item_type, at))
    elif isinstance(kind, msgspec.inspect.DictType):
        js.read_map(value, path, lambda item, at: _walk(item, kind.value_type, at))
    elif isinstance(kind, msgspec.inspect.CustomType) and issubclass(kind.cls, str):
        js.read_str(value, path)  # Prose
    else:
        _scalar(value, kind, path)


def _scalar(value: object, kind: msgspec.inspect.Type, path: js.JsonPath) -> None:
    reader: Callable[[object, js.JsonPath], Any]
    if isinstance(kind, msgspec.inspect.IntType):
        reader = _UNSIGNED.get(kind.le, js.read_u64)
    elif isinstance(kind, msgspec.inspect.FloatType):
        reader = js.read_f64
    elif isinstance(kind, msgspec.inspect.StrType):
        reader = js.read_str
    elif isinstance(kind, msgspec.inspect.BoolType):
        reader = js.read_bool
    else:  # Any: every JSON value fits
        return
    reader(value, path)
