"""What derives from a shape of :mod:`.shapes`: its key order and its Polars dtype.

A shape is a TypedDict; its fields, in declaration order, are evaluation.json's
key order. A field's Polars dtype follows from its Python type (``str``,
``bool``, ``int`` as Int64, ``float`` as Float64, ``list[...]``, a nested
shape as a struct, ``| None`` adding nothing since every Polars value may be
null) unless ``Annotated`` metadata names one (``Annotated[int, pl.Int32()]``).
Everything here runs once, at import, to build the tables' struct types.

The same declaration gives the strict type a stored lane output is decoded
into (:func:`decoding_type`): msgspec checks every key, type and the range of
every 32-bit column, so a checkpoint read back is the shape the run wrote.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Collection, Mapping
from functools import cache, reduce
from typing import (
    Annotated,
    Final,
    NotRequired,
    Required,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import msgspec
import polars as pl

Omit = Mapping[type, Collection[str]]
"""Shape -> fields a derived dtype leaves out, wherever that shape is nested."""

_SCALARS: Final[Mapping[object, pl.DataType]] = {
    str: pl.String(),
    bool: pl.Boolean(),
    int: pl.Int64(),
    float: pl.Float64(),
}


@cache
def _hints(shape: type) -> dict[str, object]:
    # ``__required_keys__`` cannot serve: under ``from __future__ import
    # annotations`` Python 3.11 counts a ``NotRequired`` key as required.
    if not is_typeddict(shape):
        raise TypeError(f"{shape!r} is not a TypedDict shape")
    return get_type_hints(shape, include_extras=True)


def keys(shape: type, *, required: bool | None = None) -> tuple[str, ...]:
    """``shape``'s keys in declaration order; ``required`` keeps only the required
    (``True``) or the ``NotRequired`` ones (``False``)."""
    total = bool(getattr(shape, "__total__", True))
    return tuple(
        name
        for name, hint in _hints(shape).items()
        if required is None or _required(hint, total) == required
    )


def _required(hint: object, total: bool) -> bool:
    origin = get_origin(hint)
    if origin is NotRequired:
        return False
    return origin is Required or total


def struct(shape: type, omit: Omit | None = None) -> pl.Struct:
    """``shape`` as a Polars struct, fields in declaration order (``omit``'s left out)."""
    return pl.Struct(schema(shape, omit))


def schema(shape: type, omit: Omit | None = None) -> pl.Schema:
    """``shape``'s fields as a Polars schema (a frame with one row per value)."""
    leave_out = omit or {}
    for owner, names in leave_out.items():
        unknown = set(names) - set(keys(owner))
        if unknown:
            raise ValueError(f"{owner.__name__} declares no {sorted(unknown)} to omit")
    return _schema(shape, leave_out)


def _schema(shape: type, omit: Omit) -> pl.Schema:
    left_out = omit.get(shape, ())
    return pl.Schema(
        [(name, _dtype(hint, omit)) for name, hint in _hints(shape).items() if name not in left_out]
    )


def _dtype(hint: object, omit: Omit) -> pl.DataType:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        declared = [item for item in args[1:] if isinstance(item, pl.DataType)]
        return declared[0] if declared else _dtype(args[0], omit)
    if origin in (NotRequired, Required):
        return _dtype(args[0], omit)
    if origin in (Union, types.UnionType):
        kinds = [arg for arg in args if arg is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"no Polars dtype for {hint!r}: one type or None, not several")
        return _dtype(kinds[0], omit)
    if origin is list:
        return pl.List(_dtype(args[0], omit))
    if isinstance(hint, type) and is_typeddict(hint):
        return pl.Struct(_schema(hint, omit))
    if hint in _SCALARS:
        return _SCALARS[hint]
    raise TypeError(f"no Polars dtype for {hint!r}: declare one as Annotated[..., dtype]")


_INT32: Final = msgspec.Meta(ge=-(2**31), le=2**31 - 1)
"""What a column declared ``Int32`` holds: a wider integer could not be built."""


@cache
def decoding_type(shape: type) -> type:
    """``shape`` as msgspec decodes it strictly: the same keys (required ones
    required), the same types, an ``Int32`` field bounded to 32 bits. Unknown keys
    are skipped (a later version's addition changes nothing the run reads)."""
    fields = {name: _decoding(hint) for name, hint in _hints(shape).items()}
    total = bool(getattr(shape, "__total__", True))
    return TypedDict(f"{shape.__name__}Decoded", fields, total=total)  # type: ignore[operator, no-any-return]


def _decoding(hint: object) -> object:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        if any(isinstance(item, pl.Int32) for item in args[1:]):
            return Annotated[int, _INT32]
        return _decoding(args[0])
    if origin is NotRequired:
        return NotRequired[_decoding(args[0])]
    if origin is Required:
        return Required[_decoding(args[0])]
    if origin in (Union, types.UnionType):
        return reduce(operator.or_, (_decoding(arg) for arg in args))
    if origin is list:
        return list[_decoding(args[0])]  # type: ignore[misc]
    if origin is dict:
        return dict[_decoding(args[0]), _decoding(args[1])]  # type: ignore[misc]
    if isinstance(hint, type) and is_typeddict(hint):
        return decoding_type(hint)
    return hint
