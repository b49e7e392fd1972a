"""Byte and token-quarter sizes of compact JSON, without building the text.

Evidence selection charges every candidate the size of its compact JSON
(HTTP.md §8.1), and measuring is most of an evidence call's work. This walker
gives the sizes :func:`taguru_eval.text.dumps_json` would produce — the same
string escapes (the standard library's ``encode_basestring``, which
``json.dumps(..., ensure_ascii=False)`` uses) and the same number spelling
(``json_f32`` / ``json_f64``) — at a third of the cost of serialising.
A quarter is 1 per ASCII scalar and 4 per any other scalar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring

from taguru_eval._base.text import F32, json_f32, json_f64

_FIXED = {None: 4, True: 4, False: 5}  # null, true, false


def _text_size(text: str) -> tuple[int, int]:
    ascii_count = len(text.encode("ascii", "ignore"))
    return len(text.encode("utf-8")), ascii_count + 4 * (len(text) - ascii_count)


def json_size(value: object) -> tuple[int, int]:
    """(UTF-8 bytes, quarters) of ``dumps_json(value)``."""
    if isinstance(value, str):
        return _text_size(encode_basestring(value))
    if value is None or isinstance(value, bool):
        size = _FIXED[value]
        return size, size
    if isinstance(value, F32):
        return _text_size(json_f32(value))
    if isinstance(value, float):
        return _text_size(json_f64(value))
    if isinstance(value, int):
        size = len(str(value))
        return size, size
    if isinstance(value, Mapping):
        if not value:
            return 2, 2
        size = quarters = 2 * len(value) + 1  # braces, colons, commas
        for key, item in value.items():
            key_size, key_quarters = json_size(str(key))
            item_size, item_quarters = json_size(item)
            size += key_size + item_size
            quarters += key_quarters + item_quarters
        return size, quarters
    if isinstance(value, Sequence):
        if not value:
            return 2, 2
        size = quarters = len(value) + 1  # brackets, commas
        for item in value:
            item_size, item_quarters = json_size(item)
            size += item_size
            quarters += item_quarters
        return size, quarters
    raise TypeError(f"cannot size {type(value).__name__} as JSON")
