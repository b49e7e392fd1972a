"""taguru_eval.jsonstrict: the strict JSON rules of EVALUATE.md §0.1 / GATE §1.2."""

from __future__ import annotations

import math

import pytest

from taguru_eval._base import jsonstrict as js


@pytest.mark.parametrize(
    "text",
    ["NaN", "[Infinity]", '{"a":-Infinity}', "1e400", "-1e400", "1" * 400, '"\\udc00"',
     '"\\ud800x"', "\ufeff{}", "{} {}", "", "[1,]", "{'a':1}", "[" * 128 + "]" * 128],
)  # fmt: skip
def test_loads_rejects(text: str) -> None:
    with pytest.raises(js.JsonSyntaxError):
        js.loads(text)


def test_loads_accepts_edge_values() -> None:
    assert js.loads("[" * 127 + "]" * 127) is not None
    assert js.loads('"\\ud83c\\udf76"') == "🍶"
    assert js.loads("18446744073709551616") == 2**64
    assert js.loads("1e308") == 1e308
    assert js.loads(' {"a": 1}\n') == {"a": 1}


def test_duplicate_keys_two_modes() -> None:
    obj = js.loads('{"a":1,"b":2,"a":3}')
    assert obj == {"a": 3, "b": 2}
    assert isinstance(obj, js.JsonObject) and obj.duplicate_keys == ("a",)
    with pytest.raises(js.JsonSyntaxError, match="duplicate field `a`"):
        js.loads('{"x":{"a":1,"a":1}}', reject_duplicate_keys=True)
    with pytest.raises(js.JsonShapeError, match="duplicate field `a`"):
        js.read_closed_object(obj, (), ["a", "b"], reject_duplicates=True)
    assert js.read_closed_object(obj, (), ["a", "b"]) == {"a": 3, "b": 2}
    assert js.read_map(obj, (), js.read_u8) == {"a": 3, "b": 2}


@pytest.mark.parametrize(
    ("reader", "value", "reason"),
    [
        (js.read_u8, 256, "invalid value: integer `256`, expected u8"),
        (js.read_u8, -1, "invalid value: integer `-1`, expected u8"),
        (js.read_u8, True, "invalid type: boolean `true`, expected u8"),
        (js.read_u8, 3.0, "invalid type: floating point `3.0`, expected u8"),
        (js.read_u32, 2**32, "invalid value: integer `4294967296`, expected u32"),
        (js.read_u64, 2**64, "invalid value: integer `18446744073709551616`, expected u64"),
        (js.read_usize, None, "invalid type: null, expected usize"),
        (js.read_u64, "1", 'invalid type: string "1", expected u64'),
        (js.read_f32, False, "invalid type: boolean `false`, expected f32"),
        (js.read_f64, "x", 'invalid type: string "x", expected f64'),
        (js.read_str, [], "invalid type: sequence, expected a string"),
        (js.read_bool, 0, "invalid type: integer `0`, expected a boolean"),
        (js.read_str_array, {}, "invalid type: map, expected a sequence"),
    ],
)
def test_reader_errors(reader: js.Reader[object], value: object, reason: str) -> None:
    with pytest.raises(js.JsonShapeError) as info:
        reader(value, ("a", 0, "b"))
    assert info.value.reason == reason
    assert info.value.field == "a[0].b"
    assert str(info.value) == f"a[0].b: {reason}"


def test_integer_readers_accept_full_range() -> None:
    assert js.read_u8(255, ()) == 255
    assert js.read_u32(4294967295, ()) == 4294967295
    assert js.read_u64(2**64 - 1, ()) == 2**64 - 1
    assert js.read_usize(0, ()) == 0


def test_read_f32_rounds_to_binary32() -> None:
    assert js.read_f32(1.00000001, ()) == 1.0
    assert js.read_f32(0.1, ()) != 0.1
    assert js.read_f32(3, ()) == 3.0
    assert js.read_f32(1e39, ()) == math.inf
    assert js.read_f32(-(10**400), ()) == -math.inf
    assert js.read_f32(3.4028235e38, ()) == 3.4028234663852886e38


def test_closed_object_messages() -> None:
    with pytest.raises(js.JsonShapeError) as info:
        js.read_closed_object({"mx": 1}, ("b",), ["min", "max"])
    assert info.value.reason == "unknown field `mx`, expected `min` or `max`"
    with pytest.raises(js.JsonShapeError) as info:
        js.read_closed_object({"x": 1}, (), ["a", "b", "c"])
    assert info.value.reason == "unknown field `x`, expected one of `a`, `b`, `c`"
    with pytest.raises(js.JsonShapeError, match=r"expected `a`$"):
        js.read_closed_object({"x": 1}, (), ["a"])
    with pytest.raises(js.JsonShapeError, match="there are no fields"):
        js.read_closed_object({"x": 1}, (), [])
    with pytest.raises(js.JsonShapeError, match="missing field `a`"):
        js.read_closed_object({}, (), ["a"], required=["a"])
    with pytest.raises(js.JsonShapeError, match="expected a map"):
        js.read_closed_object([], (), ["a"])


def test_paths_and_relative_detail() -> None:
    assert js.format_path(("expected_sources", 1, "relevance")) == "expected_sources[1].relevance"
    assert js.format_path((0, "a")) == "[0].a"
    assert js.format_path(()) == ""
    error = js.JsonShapeError(("expected_citations", 0), "missing field `paragraph`")
    assert error.relative_to(("expected_citations",)) == "[0]: missing field `paragraph`"
    assert error.relative_to(("expected_citations", 0)) == "missing field `paragraph`"
    assert js.read_optional(None, (), js.read_str) is None
    assert js.read_array([1, 2], ("p",), js.read_u8) == [1, 2]
