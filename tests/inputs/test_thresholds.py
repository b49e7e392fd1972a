"""The thresholds file loader and validator (GATE_AND_COMPARE.md §4, §8.1, §8.3)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from taguru_eval._base.text import display_f64
from taguru_eval.catalog import CASE_SCOPED_METRICS, CATALOG_KEYS
from taguru_eval.errors import EXIT_INPUT, InputError
from taguru_eval.inputs.thresholds import (
    Bound,
    Thresholds,
    bound_problem,
    load_thresholds,
    parse_thresholds,
    sha256_hex,
)

MINIMAL = '{"taguru_evaluate_thresholds":1}'
WORKED_EXAMPLE = (
    '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.recall_at_k":{"min":0.8},'
    '"passage.failure_rate":{"max":0.0}},"cases":{"default":{"recall.recall_at_k":{"min":0.5},'
    '"citations.recall":{"min":1.0}},"overrides":{"c2":{"citations.recall":{"min":0.0}}}},'
    '"allow_unstable_corpus":false}'
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Messages echo the path as given, so tests pass a relative "th.json".
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(workdir: Path, text: str | bytes, name: str = "th.json") -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    (workdir / name).write_bytes(data)
    return name


def load(
    workdir: Path,
    text: str | bytes,
    case_ids: tuple[str, ...] = (),
    catalog_keys: frozenset[str] = CATALOG_KEYS,
) -> Thresholds:
    return load_thresholds(write(workdir, text), catalog_keys, case_ids)


def error_of(
    workdir: Path,
    text: str | bytes,
    case_ids: tuple[str, ...] = (),
    catalog_keys: frozenset[str] = CATALOG_KEYS,
) -> InputError:
    with pytest.raises(InputError) as info:
        load(workdir, text, case_ids, catalog_keys)
    assert info.value.exit_code == EXIT_INPUT
    assert "\n" not in str(info.value)  # one stderr line
    return info.value


def with_aggregate(bounds: str) -> str:
    return '{"taguru_evaluate_thresholds":1,"aggregate":{' + bounds + "}}"


# --------------------------------------------------------------------------- §8.1 scenarios


def test_s3_rejects_a_stamp_mismatch(workdir: Path) -> None:
    err = error_of(workdir, '{"taguru_evaluate_thresholds":2}')
    assert "taguru_evaluate_thresholds" in str(err)
    assert str(err) == "th.json: taguru_evaluate_thresholds must be 1, got 2"


def test_s4_rejects_an_unknown_top_level_key(workdir: Path) -> None:
    err = error_of(workdir, '{"taguru_evaluate_thresholds":1,"bogus":true}')
    assert "bogus" in str(err).lower()
    assert str(err).startswith("th.json: unknown field `bogus`, expected one of ")
    for key in ("taguru_evaluate_thresholds", "aggregate", "cases", "allow_unstable_corpus"):
        assert f"`{key}`" in str(err)


def test_s5_rejects_an_unknown_aggregate_metric_name(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"not.a.metric":{"min":0.1}'))
    assert str(err) == "th.json: aggregate: unknown metric name 'not.a.metric'"


def test_s6_rejects_a_non_case_scoped_metric_in_cases_default(workdir: Path) -> None:
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":1,"cases":{"default":{"latency.resolve_ms":{"max":1.0}}}}',
    )
    assert str(err) == (
        "th.json: cases.default: unknown (or not case-scoped) metric name 'latency.resolve_ms'"
    )


def test_s7_rejects_an_unknown_case_id_in_overrides(workdir: Path) -> None:
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":1,"cases":{"overrides":'
        '{"ghost":{"recall.recall_at_k":{"min":0.1}}}}}',
        case_ids=("real-case",),
    )
    assert str(err) == "th.json: cases.overrides: unknown case_id 'ghost'"


def test_s8_rejects_a_bound_with_neither_min_nor_max(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"recall.recall_at_k":{}'))
    assert "min/max" in str(err)
    assert str(err) == "th.json: aggregate: 'recall.recall_at_k': needs at least one of min/max"


def test_s9_rejects_min_greater_than_max(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"recall.recall_at_k":{"min":0.9,"max":0.1}'))
    assert "<=" in str(err)
    assert str(err) == "th.json: aggregate: 'recall.recall_at_k': min 0.9 must be <= max 0.1"


def test_s10_overflowing_json_number_is_rejected(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"recall.recall_at_k":{"min":1e400}'))
    assert str(err).startswith("th.json: ")


@pytest.mark.parametrize(
    ("bound", "problem"),
    [
        (Bound(min=math.inf), "min inf must be finite"),
        (Bound(min=-math.inf), "min -inf must be finite"),
        (Bound(max=math.nan), "max NaN must be finite"),
        (Bound(min=0.5, max=-math.inf), "max -inf must be finite"),
        (Bound(min=math.nan, max=math.inf), "min NaN must be finite"),  # first problem only
    ],
)
def test_s11_validate_bound_rejects_a_non_finite_min_or_max(bound: Bound, problem: str) -> None:
    assert bound_problem(bound) == problem


def test_s12_sha256_hashes_the_raw_file_bytes(workdir: Path) -> None:
    loaded = load(workdir, MINIMAL)
    assert loaded.sha256 == "21913844c872603177f577ea2b9823dfb12bf84f0c579691447b47d6649d8beb"
    with_newline = load(workdir, MINIMAL + "\n")
    assert with_newline.sha256 == (
        "1200e9c696e8efe4a7cc10d091e994bc0447dda168cc7f0d72d0e77a97df7f16"
    )
    assert sha256_hex(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_s13_every_problem_in_a_file_is_reported_together(workdir: Path) -> None:
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":1,"aggregate":{"not.a.metric":{"min":0.1}},'
        '"cases":{"overrides":{"ghost":{"recall.recall_at_k":{"min":0.1}}}}}',
    )
    assert str(err) == (
        "th.json: aggregate: unknown metric name 'not.a.metric'; "
        "cases.overrides: unknown case_id 'ghost'"
    )


# --------------------------------------------------------------------------- §8.3 (loader part)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"taguru_evaluate_thresholds":2}', "taguru_evaluate_thresholds"),
        (with_aggregate('"not.a.real.metric":{"min":0.5}'), "not.a.real.metric"),
        (
            '{"taguru_evaluate_thresholds":1,"cases":{"overrides":'
            '{"no-such-case":{"recall.recall_at_k":{"min":0.5}}}}}',
            "no-such-case",
        ),
        (
            '{"taguru_evaluate_thresholds":1,"cases":{"default":'
            '{"latency.resolve_ms":{"max":100.0}}}}',
            "latency.resolve_ms",
        ),
        (with_aggregate('"recall.recall_at_k":{}'), "recall.recall_at_k"),
        (with_aggregate('"recall.recall_at_k":{"min":0.9,"max":0.1}'), "recall.recall_at_k"),
    ],
)
def test_cli_scenarios_exit_2(workdir: Path, text: str, fragment: str) -> None:
    err = error_of(workdir, text, case_ids=("c1",))
    assert fragment in str(err)


def test_missing_file_cannot_be_read(workdir: Path) -> None:
    with pytest.raises(InputError) as info:
        load_thresholds("missing.json", CATALOG_KEYS, ())
    assert str(info.value).startswith("cannot read missing.json: ")
    assert info.value.exit_code == EXIT_INPUT


def test_a_directory_cannot_be_read(workdir: Path) -> None:
    (workdir / "dir.json").mkdir()
    with pytest.raises(InputError, match=r"^cannot read dir\.json: "):
        load_thresholds("dir.json", CATALOG_KEYS, ())


def test_path_is_echoed_exactly_as_given(workdir: Path) -> None:
    (workdir / "sub").mkdir()
    write(workdir, '{"taguru_evaluate_thresholds":3}', "sub/t.json")
    with pytest.raises(InputError) as info:
        load_thresholds("./sub/../sub/t.json", CATALOG_KEYS, ())
    assert str(info.value) == "./sub/../sub/t.json: taguru_evaluate_thresholds must be 1, got 3"
    assert info.value.path == "./sub/../sub/t.json"


def test_a_path_object_is_accepted(workdir: Path) -> None:
    write(workdir, MINIMAL, "p.json")
    assert load_thresholds(workdir / "p.json", CATALOG_KEYS, ()).stamp == 1


# --------------------------------------------------------------------------- §4.2 decoding


def test_minimal_file_takes_every_default(workdir: Path) -> None:
    loaded = load(workdir, MINIMAL)
    assert loaded.aggregate == {}
    assert loaded.case_default == {}
    assert loaded.case_overrides == {}
    assert loaded.allow_unstable_corpus is False
    assert loaded.stamp == 1


def test_worked_example_decodes(workdir: Path) -> None:
    loaded = load(workdir, WORKED_EXAMPLE, case_ids=("c1", "c2", "c3"))
    assert loaded.sha256 == "f4089e4e537dfa3ec337efbfa270a22e34999736f74c1429cd8fdb446cea8f93"
    assert loaded.aggregate == {
        "passage.failure_rate": Bound(max=0.0),
        "recall.recall_at_k": Bound(min=0.8),
    }
    assert list(loaded.aggregate) == ["passage.failure_rate", "recall.recall_at_k"]
    assert loaded.case_default == {
        "citations.recall": Bound(min=1.0),
        "recall.recall_at_k": Bound(min=0.5),
    }
    assert loaded.case_overrides == {"c2": {"citations.recall": Bound(min=0.0)}}


def test_allow_unstable_corpus_true_is_kept(workdir: Path) -> None:
    loaded = load(workdir, '{"taguru_evaluate_thresholds":1,"allow_unstable_corpus":true}')
    assert loaded.allow_unstable_corpus is True


def test_integer_bounds_are_accepted_as_floats(workdir: Path) -> None:
    loaded = load(workdir, with_aggregate('"diversity.sources":{"min":3}'))
    bound = loaded.aggregate["diversity.sources"]
    assert bound.min == 3.0
    assert isinstance(bound.min, float)


def test_a_bound_is_read_as_taguru_reads_it(workdir: Path) -> None:
    """ERRATA row 24: two roundings, so a bound one unit above its nearest double
    (it reaches the gate's reasons and the violations' ``threshold``); a number only
    the two roundings overflow is refused as taguru refuses it."""
    loaded = load(workdir, with_aggregate('"recall.mrr":{"min":0.9134015924715543}'))
    assert loaded.aggregate["recall.mrr"].min == 0.9134015924715544
    err = error_of(workdir, with_aggregate('"recall.mrr":{"max":17976931348623158e292}'))
    assert "number out of range: 17976931348623158e292" in str(err)


def test_null_min_or_max_means_absent(workdir: Path) -> None:
    loaded = load(workdir, with_aggregate('"recall.mrr":{"min":null,"max":0.5}'))
    assert loaded.aggregate["recall.mrr"] == Bound(min=None, max=0.5)
    err = error_of(workdir, with_aggregate('"recall.mrr":{"min":null,"max":null}'))
    assert str(err) == "th.json: aggregate: 'recall.mrr': needs at least one of min/max"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[1]", "expected a map"),
        ("1", "expected a map"),
        ('"x"', "expected a map"),
        ("null", "expected a map"),
        ('{"aggregate":{}}', "missing field `taguru_evaluate_thresholds`"),
        ('{"taguru_evaluate_thresholds":1.0}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":-1}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":"1"}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":true}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":null}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":18446744073709551616}', "taguru_evaluate_thresholds"),
        ('{"taguru_evaluate_thresholds":1,"aggregate":null}', "aggregate"),
        ('{"taguru_evaluate_thresholds":1,"aggregate":[]}', "aggregate"),
        ('{"taguru_evaluate_thresholds":1,"cases":null}', "cases"),
        ('{"taguru_evaluate_thresholds":1,"cases":{"x":{}}}', "unknown field `x`"),
        ('{"taguru_evaluate_thresholds":1,"cases":{"default":null}}', "default"),
        ('{"taguru_evaluate_thresholds":1,"cases":{"overrides":null}}', "overrides"),
        ('{"taguru_evaluate_thresholds":1,"cases":{"overrides":{"c1":null}}}', "c1"),
        ('{"taguru_evaluate_thresholds":1,"allow_unstable_corpus":"yes"}', "allow_unstable"),
        ('{"taguru_evaluate_thresholds":1,"allow_unstable_corpus":null}', "allow_unstable"),
        (with_aggregate('"recall.mrr":null'), "recall.mrr"),
        (with_aggregate('"recall.mrr":[0.1,0.9]'), "recall.mrr"),
        (with_aggregate('"recall.mrr":{"min":true}'), "min"),
        (with_aggregate('"recall.mrr":{"max":"0.5"}'), "max"),
        (with_aggregate('"recall.mrr":{"minimum":1}'), "unknown field `minimum`"),
        (with_aggregate('"recall.mrr":{"min":0.1,"mx":1}'), "unknown field `mx`"),
        (with_aggregate('"recall.mrr":{"min":NaN}'), "NaN"),
        (with_aggregate('"recall.mrr":{"min":Infinity}'), "Infinity"),
        (with_aggregate('"recall.mrr":{"max":-Infinity}'), "Infinity"),
        (with_aggregate('"recall.mrr":{"min":1' + "0" * 400 + "}"), "out of range"),
        ('{"taguru_evaluate_thresholds":1', "th.json: "),
        ('{"taguru_evaluate_thresholds":1} x', "th.json: "),
        ("", "th.json: "),
    ],
)
def test_decoding_errors_name_the_file_and_the_offender(
    workdir: Path, text: str, fragment: str
) -> None:
    err = error_of(workdir, text)
    assert str(err).startswith("th.json: ")
    assert fragment in str(err)
    assert err.path == "th.json"


def test_unknown_bound_key_uses_serde_wording(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"recall.mrr":{"min":0.1,"mx":1}'))
    assert str(err).endswith("unknown field `mx`, expected `min` or `max`")
    assert err.field == "aggregate.recall.mrr"


def test_unknown_cases_key_uses_serde_wording(workdir: Path) -> None:
    err = error_of(workdir, '{"taguru_evaluate_thresholds":1,"cases":{"x":{}}}')
    assert str(err) == "th.json: cases: unknown field `x`, expected `default` or `overrides`"


def test_decoding_stops_at_the_first_error(workdir: Path) -> None:
    # A decoding error hides semantic problems and the stamp check.
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":2,"aggregate":{"nope":{"min":1}},"bogus":1}',
    )
    assert "bogus" in str(err)
    assert "must be 1" not in str(err)
    assert "nope" not in str(err)


@pytest.mark.parametrize(
    "text",
    [
        '{"taguru_evaluate_thresholds":1,"taguru_evaluate_thresholds":1}',
        '{"taguru_evaluate_thresholds":1,"aggregate":{},"aggregate":{}}',
        '{"taguru_evaluate_thresholds":1,"cases":{"default":{},"default":{}}}',
        with_aggregate('"recall.mrr":{"min":0.1,"min":0.2}'),
        '{"taguru_evaluate_thresholds":1,"cases":{"overrides":'
        '{"c1":{"recall.mrr":{"max":1,"max":1}}}}}',
    ],
)
def test_a_repeated_key_in_a_fixed_shape_object_is_an_error(workdir: Path, text: str) -> None:
    err = error_of(workdir, text, case_ids=("c1",))
    assert "duplicate field" in str(err)


def test_a_repeated_key_in_a_free_keyed_map_keeps_the_last(workdir: Path) -> None:
    loaded = load(
        workdir,
        '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":0.1},'
        '"recall.mrr":{"min":0.2}},"cases":{"overrides":{"c1":{"recall.mrr":{"min":0.3}},'
        '"c1":{"recall.ndcg":{"max":0.4}}}}}',
        case_ids=("c1",),
    )
    assert loaded.aggregate == {"recall.mrr": Bound(min=0.2)}
    assert loaded.case_overrides == {"c1": {"recall.ndcg": Bound(max=0.4)}}


def test_a_utf8_bom_is_rejected(workdir: Path) -> None:
    err = error_of(workdir, b"\xef\xbb\xbf" + MINIMAL.encode())
    assert str(err).startswith("th.json: ")


def test_invalid_utf8_is_rejected(workdir: Path) -> None:
    err = error_of(workdir, b'{"taguru_evaluate_thresholds":1,"aggregate":{"\xff":{"min":1}}}')
    assert str(err).startswith("th.json: ")
    assert "UTF-8" in str(err)


def test_a_lone_surrogate_escape_is_rejected(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"\\ud800":{"min":1}'))
    assert str(err).startswith("th.json: ")


def test_trailing_whitespace_is_fine(workdir: Path) -> None:
    assert load(workdir, MINIMAL + " \n\t\r\n").allow_unstable_corpus is False


def test_non_ascii_names_are_reported_verbatim(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"酒.メトリック":{"min":1}'))
    assert str(err) == "th.json: aggregate: unknown metric name '酒.メトリック'"


def test_control_characters_in_names_are_escaped_to_keep_one_line(workdir: Path) -> None:
    err = error_of(workdir, with_aggregate('"a\\nb\\u001b\\u2028":{"min":1}'))
    assert str(err) == "th.json: aggregate: unknown metric name 'a\\nb\\u{1b}\\u{2028}'"
    err = error_of(workdir, '{"taguru_evaluate_thresholds":1,"x\\ry":1}')
    assert "unknown field `x\\ry`" in str(err)


# --------------------------------------------------------------------------- §4.3 stamp


@pytest.mark.parametrize("stamp", [0, 2, 18446744073709551615])
def test_stamp_is_equality_not_a_range(workdir: Path, stamp: int) -> None:
    err = error_of(workdir, f'{{"taguru_evaluate_thresholds":{stamp}}}')
    assert str(err) == f"th.json: taguru_evaluate_thresholds must be 1, got {stamp}"
    assert err.field == "taguru_evaluate_thresholds"


def test_stamp_check_hides_every_semantic_problem(workdir: Path) -> None:
    err = error_of(workdir, '{"taguru_evaluate_thresholds":0,"aggregate":{"not.a.metric":{}}}')
    assert str(err) == "th.json: taguru_evaluate_thresholds must be 1, got 0"


# --------------------------------------------------------------------------- §4.4 semantics


def test_problem_order_and_at_most_one_problem_per_bound(workdir: Path) -> None:
    text = (
        '{"taguru_evaluate_thresholds":1,"aggregate":{"zeta.metric":{},'
        '"recall.mrr":{"min":2,"max":1},"alpha.metric":{"max":0.5}},'
        '"cases":{"default":{"budget.items_used":{"min":1},"recall.ndcg":{"min":0.5,"max":0.5}},'
        '"overrides":{"c2":{"latency.query_ms":{"max":5}},"b1":{"recall.recall_at_k":{}}}}}'
    )
    err = error_of(workdir, text, case_ids=("b1",))
    assert str(err) == (
        "th.json: aggregate: unknown metric name 'alpha.metric'; "
        "aggregate: unknown metric name 'zeta.metric'; "
        "cases.default: unknown (or not case-scoped) metric name 'budget.items_used'; "
        "cases.overrides: unknown case_id 'c2'; "
        "cases.overrides.c2: unknown (or not case-scoped) metric name 'latency.query_ms'; "
        "aggregate: 'recall.mrr': min 2 must be <= max 1; "
        "aggregate: 'zeta.metric': needs at least one of min/max; "
        "cases.overrides.b1: 'recall.recall_at_k': needs at least one of min/max"
    )


def test_unknown_case_ids_inner_names_and_bounds_are_still_checked(workdir: Path) -> None:
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":1,"cases":{"overrides":'
        '{"ghost":{"rerank.ran":{"min":0.9,"max":0.1}}}}}',
    )
    assert str(err) == (
        "th.json: cases.overrides: unknown case_id 'ghost'; "
        "cases.overrides.ghost: unknown (or not case-scoped) metric name 'rerank.ran'; "
        "cases.overrides.ghost: 'rerank.ran': min 0.9 must be <= max 0.1"
    )


def test_case_ids_match_exactly_and_case_sensitively(workdir: Path) -> None:
    text = (
        '{"taguru_evaluate_thresholds":1,"cases":{"overrides":'
        '{"C1":{"recall.mrr":{"min":0.1}}," c1":{"recall.mrr":{"min":0.1}}}}}'
    )
    err = error_of(workdir, text, case_ids=("c1",))
    assert str(err) == (
        "th.json: cases.overrides: unknown case_id ' c1'; cases.overrides: unknown case_id 'C1'"
    )


@pytest.mark.parametrize("name", CASE_SCOPED_METRICS)
def test_every_case_scoped_metric_is_accepted_per_case(workdir: Path, name: str) -> None:
    text = (
        '{"taguru_evaluate_thresholds":1,"cases":{"default":{"'
        + name
        + '":{"min":0}},"overrides":{"c1":{"'
        + name
        + '":{"max":1}}}}}'
    )
    loaded = load(workdir, text, case_ids=("c1",))
    assert loaded.case_default[name] == Bound(min=0.0)


@pytest.mark.parametrize("name", sorted(CATALOG_KEYS - set(CASE_SCOPED_METRICS)))
def test_every_other_catalog_metric_is_aggregate_only(workdir: Path, name: str) -> None:
    assert load(workdir, with_aggregate(f'"{name}":{{"min":0}}')).aggregate[name] == Bound(min=0.0)
    err = error_of(
        workdir, '{"taguru_evaluate_thresholds":1,"cases":{"default":{"' + name + '":{"min":0}}}}'
    )
    assert str(err) == f"th.json: cases.default: unknown (or not case-scoped) metric name '{name}'"


def test_aggregate_names_are_checked_against_the_runs_catalog(workdir: Path) -> None:
    text = with_aggregate('"abstention.refusal_rate":{"min":1.0}')
    err = error_of(workdir, text)
    assert str(err) == "th.json: aggregate: unknown metric name 'abstention.refusal_rate'"
    enlarged = CATALOG_KEYS | {"abstention.refusal_rate"}
    loaded = load(workdir, text, catalog_keys=enlarged)
    assert loaded.aggregate["abstention.refusal_rate"] == Bound(min=1.0)


def test_min_equal_to_max_is_legal(workdir: Path) -> None:
    loaded = load(workdir, with_aggregate('"recall.mrr":{"min":0.5,"max":0.5}'))
    assert loaded.aggregate["recall.mrr"] == Bound(min=0.5, max=0.5)


def test_the_spec_example_message(workdir: Path) -> None:
    err = error_of(
        workdir,
        '{"taguru_evaluate_thresholds":1,"aggregate":{"not.a.metric":{"min":0.1}},'
        '"cases":{"overrides":{"ghost":{"recall.recall_at_k":{"min":0.1}}}}}',
    )
    assert f"taguru: evaluate: {err}" == (
        "taguru: evaluate: th.json: aggregate: unknown metric name 'not.a.metric'; "
        "cases.overrides: unknown case_id 'ghost'"
    )


@pytest.mark.parametrize(
    ("bound", "problem"),
    [
        (Bound(), "needs at least one of min/max"),
        (Bound(min=0.25), None),
        (Bound(max=0.25), None),
        (Bound(min=0.5, max=0.5), None),
        (Bound(min=3.0, max=2.0), "min 3 must be <= max 2"),
        (Bound(min=1e-07, max=1e-08), "min 0.0000001 must be <= max 0.00000001"),
        (Bound(min=1e16, max=1.5), "min 10000000000000000 must be <= max 1.5"),
        (Bound(min=0.0, max=-0.0), None),
    ],
)
def test_bound_problem(bound: Bound, problem: str | None) -> None:
    assert bound_problem(bound) == problem


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.9, "0.9"),
        (0.1, "0.1"),
        (1.0, "1"),
        (100.0, "100"),
        (-0.0, "-0"),
        (1e-07, "0.0000001"),
        (1e16, "10000000000000000"),
        (1.5e-5, "0.000015"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (math.nan, "NaN"),
    ],
)
def test_display_f64(value: float, text: str) -> None:
    assert display_f64(value) == text


# --------------------------------------------------------------------------- §4.6 identity


def test_identity_is_the_raw_bytes_not_canonical_json(workdir: Path) -> None:
    compact = load(workdir, MINIMAL).sha256
    spaced = load(workdir, '{ "taguru_evaluate_thresholds": 1 }').sha256
    assert compact != spaced
    assert spaced == sha256_hex(b'{ "taguru_evaluate_thresholds": 1 }')
    assert len(spaced) == 64
    assert spaced == spaced.lower()


def test_parse_thresholds_hashes_the_given_bytes() -> None:
    parsed = parse_thresholds(MINIMAL.encode(), "x.json")
    assert parsed.sha256 == "21913844c872603177f577ea2b9823dfb12bf84f0c579691447b47d6649d8beb"


# --------------------------------------------------------------------------- frames


def test_aggregate_bounds_frame(workdir: Path) -> None:
    loaded = load(
        workdir,
        with_aggregate('"recall.mrr":{"min":0.1,"max":0.9},"citations.resolved":{"max":1}'),
    )
    frame = loaded.aggregate_bounds
    assert frame.schema == pl.Schema(
        {"metric": pl.String, "bound": pl.String, "threshold": pl.Float64}
    )
    assert frame.rows() == [
        ("citations.resolved", "max", 1.0),
        ("recall.mrr", "min", 0.1),
        ("recall.mrr", "max", 0.9),
    ]


def test_case_bounds_replace_the_default_wholesale(workdir: Path) -> None:
    loaded = load(
        workdir,
        '{"taguru_evaluate_thresholds":1,"cases":{"default":'
        '{"recall.recall_at_k":{"min":0.5,"max":0.9},"citations.recall":{"min":1.0}},'
        '"overrides":{"c2":{"recall.recall_at_k":{"min":0.0},"recall.mrr":{"max":0.7}},'
        '"c9":{"recall.mrr":{"min":0.2}}}}}',
        case_ids=("c1", "c2", "c9"),
    )
    frame = loaded.case_bounds(["c2", "c1"])
    assert frame.schema == pl.Schema(
        {"case_id": pl.String, "metric": pl.String, "bound": pl.String, "threshold": pl.Float64}
    )
    assert frame.rows() == [
        # c2: the default's max 0.9 does not survive the override; mrr is added.
        ("c2", "citations.recall", "min", 1.0),
        ("c2", "recall.mrr", "max", 0.7),
        ("c2", "recall.recall_at_k", "min", 0.0),
        # c1: only the defaults; c2's override never leaks; c9 is not in this run.
        ("c1", "citations.recall", "min", 1.0),
        ("c1", "recall.recall_at_k", "min", 0.5),
        ("c1", "recall.recall_at_k", "max", 0.9),
    ]


def test_case_bounds_of_an_empty_run_or_file(workdir: Path) -> None:
    loaded = load(workdir, MINIMAL)
    assert loaded.case_bounds(["c1"]).height == 0
    assert loaded.case_bounds([]).height == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"taguru_evaluate_thresholds":1,"aggregate":{"recall.mrr":{"min":"',
            "th.json: Unterminated string starting at line 1 column 66",
        ),
        ('{"a":"\x01"}', "th.json: Invalid control character at line 1 column 7"),
        ('{"a":', "th.json: Expecting value at line 1 column 6"),
    ],
)
def test_a_syntax_error_names_its_position_once(workdir: Path, text: str, message: str) -> None:
    # Python's reason ends in "at" for some errors ("… starting at"): followed by
    # our own " at line …" it read "starting at at line 1".
    assert str(error_of(workdir, text)) == message
