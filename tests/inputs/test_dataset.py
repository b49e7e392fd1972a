"""eval.jsonl loader: every rule of EVALUATE.md §1 (and §0.1/§0.2 as it applies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from taguru_eval._base.text import to_f32
from taguru_eval.errors import InputError
from taguru_eval.inputs.dataset import (
    ABSENT,
    CaseOptions,
    EvalSet,
    load_eval,
    load_eval_strict,
    load_eval_text,
    validate_limits,
)
from taguru_eval.tables import EXPECTED as EXPECTED_SCHEMA

HEADER = '{"taguru_eval":1,"name":"sake retrieval cases"}'
FULL_CASE = {
    "case_id": "brand-origin-001",
    "query": "青嶺はどこの蔵の酒か",
    "cues": ["青嶺"],
    "expected_sources": [{"source": "corpus/brewery.md", "paragraphs": [0], "relevance": 3}],
    "expected_concepts": ["青嶺酒造"],
    "options": {"limit": 10},
}


def text_of(*cases: dict[str, Any] | str, header: str = HEADER) -> str:
    lines = [header] + [
        c if isinstance(c, str) else json.dumps(c, ensure_ascii=False) for c in cases
    ]
    return "\n".join(lines) + "\n"


def load(*cases: dict[str, Any] | str, header: str = HEADER) -> EvalSet:
    return load_eval_text(text_of(*cases, header=header), "eval.jsonl")


def error_of(*cases: dict[str, Any] | str, header: str = HEADER) -> InputError:
    with pytest.raises(InputError) as info:
        load(*cases, header=header)
    assert info.value.exit_code == 2
    return info.value


def case(**fields: Any) -> dict[str, Any]:
    return {"case_id": "c1", "query": "q", **fields}


# --------------------------------------------------------------------------- §9.1 scenarios


def test_s1_well_formed_file_loads_name_and_case() -> None:
    eval_set = load(FULL_CASE)
    assert eval_set.name == "sake retrieval cases"
    assert len(eval_set.cases) == 1
    assert eval_set.cases[0].has_expectations
    loaded = eval_set.cases[0]
    assert loaded.cues == ("青嶺",)
    assert loaded.expected_sources[0].paragraphs == (0,)
    assert loaded.expected_sources[0].relevance == 3
    assert loaded.options.limit == 10


def test_s2_wrong_version_refused_by_equality() -> None:
    error = error_of(case(), header='{"taguru_eval":2}')
    assert str(error) == "eval.jsonl: line 1: taguru_eval must be 1, got 2"
    assert (error.path, error.line, error.field) == ("eval.jsonl", 1, "taguru_eval")
    assert "taguru_eval must be 1, got 0" in str(error_of(case(), header='{"taguru_eval":0}'))


def test_s3_typo_field_rejected() -> None:
    error = error_of(case(expcted_sources=[]))
    assert str(error).startswith("eval.jsonl: line 2: not a valid eval case: ")
    assert "expcted_sources" in str(error)
    assert error.line == 2


def test_s7_interpret_rejects_malformed_extension() -> None:
    error = error_of(case(expected_citations=42))
    assert str(error).startswith("eval.jsonl: line 2: case 'c1': expected_citations: ")
    assert "integer `42`" in str(error)
    assert error.field == "expected_citations"


def test_s9_interpret_types_labels_associations_citations() -> None:
    loaded = load(
        case(
            expected_labels=["好き"],
            expected_associations=[{"subject": "青嶺", "label": "好き", "object": "日本酒"}],
            expected_citations=[{"source": "corpus/brewery.md", "paragraph": 3}],
        )
    ).cases[0]
    assert loaded.expected_labels == ("好き",)
    assert (loaded.expected_associations[0].subject, loaded.expected_associations[0].object) == (
        "青嶺",
        "日本酒",
    )
    assert loaded.expected_citations[0].paragraph == 3
    assert loaded.runs_structural_lane and loaded.runs_citation_lane


def test_s10_interpret_types_options() -> None:
    options = (
        load(
            case(options={"limit": 5, "floor": 0.4, "tags": ["brand"], "since": 100, "until": 200})
        )
        .cases[0]
        .options
    )
    assert options == CaseOptions(limit=5, floor=to_f32(0.4), tags=("brand",), since=100, until=200)
    assert options.floor != 0.4  # binary32, not the double


def test_s11_section_three_valued() -> None:
    citations = (
        load(
            case(
                expected_citations=[
                    {"source": "s", "paragraph": 0},
                    {"source": "s", "paragraph": 1, "section": None},
                    {"source": "s", "paragraph": 2, "section": "沿革"},
                ]
            )
        )
        .cases[0]
        .expected_citations
    )
    assert citations[0].section is ABSENT and not citations[0].section_declared
    assert citations[1].section is None and citations[1].section_declared
    assert citations[2].section == "沿革"


def test_s12_floor_out_of_range() -> None:
    assert str(error_of(case(options={"floor": 1.5}))) == (
        "eval.jsonl: line 2: case 'c1': options.floor must be 0.0..=1.0, got 1.5"
    )


def test_s13_empty_association_subject() -> None:
    error = error_of(
        case(expected_associations=[{"subject": "", "label": "好き", "object": "日本酒"}])
    )
    assert str(error) == (
        "eval.jsonl: line 2: case 'c1': expected_associations: "
        "subject/label/object must not be empty"
    )


def test_s14_options_sources_retired() -> None:
    with pytest.raises(InputError, match=r"not a valid eval case: .*`sources`"):
        load(case(options={"sources": ["a"]}))


def test_s16_duplicate_case_id() -> None:
    error = error_of(case(), case(query="q2"))
    assert str(error) == "eval.jsonl: line 3: duplicate case_id 'c1'"


def test_s17_whitespace_case_id() -> None:
    assert str(error_of(case(case_id="  "))) == "eval.jsonl: line 2: case_id must not be empty"


def test_s18_whitespace_query() -> None:
    assert (
        str(error_of(case(query="  "))) == "eval.jsonl: line 2: case 'c1': query must not be empty"
    )


def test_s19_relevance_out_of_range() -> None:
    error = error_of(case(expected_sources=[{"source": "s", "relevance": 4}]))
    assert (
        str(error)
        == "eval.jsonl: line 2: case 'c1': expected_sources relevance must be 0..=3, got 4"
    )
    assert error.field == "expected_sources[0].relevance"


def test_s20_header_only() -> None:
    with pytest.raises(InputError) as info:
        load_eval_text(HEADER + "\n", "eval.jsonl")
    assert (
        str(info.value) == "eval.jsonl: no cases: expected at least one case line after the header"
    )


@pytest.mark.parametrize("text", ["", "\n\n", "  \t\n\u3000\n"])
def test_s21_empty_file(text: str) -> None:
    with pytest.raises(InputError) as info:
        load_eval_text(text, "eval.jsonl")
    assert str(info.value) == "eval.jsonl: empty file: expected a taguru_eval header line"


def test_s22_blank_lines_skipped_but_counted() -> None:
    text = "\n" + HEADER + "\n\n" + json.dumps(FULL_CASE) + "\n\n"
    eval_set = load_eval_text(text, "eval.jsonl")
    assert len(eval_set.cases) == 1
    assert eval_set.cases[0].line == 4
    with pytest.raises(
        InputError, match=r"^eval\.jsonl: line 4: case 'c1': query must not be empty$"
    ):
        load_eval_text(
            "\n" + HEADER + "\n\n" + json.dumps(case(query="\u3000")) + "\n", "eval.jsonl"
        )


def test_s23_case_without_expectations() -> None:
    loaded = load(case()).cases[0]
    assert not loaded.has_expectations
    assert not loaded.declares_source_expectation
    assert not loaded.runs_structural_lane and not loaded.runs_citation_lane


# --------------------------------------------------------------------------- §1.1 file level


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(InputError) as info:
        load_eval(str(missing))
    assert str(info.value).startswith(f"cannot read {missing}: ")
    assert "No such file" in str(info.value)


def test_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^cannot read "):
        load_eval(tmp_path)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(HEADER.encode() + b'\n{"case_id":"c\xff1","query":"q"}\n')
    with pytest.raises(InputError) as info:
        load_eval(path, "e.jsonl")
    assert str(info.value).startswith("cannot read e.jsonl: ")
    assert info.value.line == 2


def test_label_is_the_argument_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("sub").mkdir()
    Path("sub/e.jsonl").write_text(text_of(case(query=" ")), encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_eval("sub/../sub/e.jsonl")
    assert str(info.value).startswith("sub/../sub/e.jsonl: line 2: ")
    assert info.value.path == "sub/../sub/e.jsonl"


def test_file_path_loads(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_text(text_of(FULL_CASE), encoding="utf-8")
    eval_set = load_eval(path)
    assert eval_set.label == str(path)
    assert eval_set.case_ids == ["brand-origin-001"]


@pytest.mark.parametrize(
    "line",
    [
        "{",
        "not json",
        '{"case_id":"c1","query":"q"} x',
        "NaN",
        '{"case_id":"c1","query":NaN}',
        '{"case_id":"c1","query":"q","options":{"floor":Infinity}}',
        '{"case_id":"c1","query":"q","options":{"floor":-Infinity}}',
        '{"case_id":"c1","query":"q","options":{"floor":1e400}}',
        '{"case_id":"c1","query":"\\ud800"}',
        "[" * 200 + "]" * 200,
    ],
)
def test_not_json(line: str) -> None:
    error = error_of(line)
    assert str(error).startswith("eval.jsonl: line 2: not JSON: ")
    assert error.line == 2


def test_first_error_in_file_order_wins() -> None:
    error = error_of(case(query=" "), case(case_id="c2", bogus=1))
    assert str(error) == "eval.jsonl: line 2: case 'c1': query must not be empty"


def test_first_line_case_is_not_a_header() -> None:
    error = error_of(case(), header=json.dumps(FULL_CASE))
    assert str(error).startswith("eval.jsonl: line 1: not a valid eval header: ")
    assert "case_id" in str(error)


def test_crlf_and_unicode_line_separators() -> None:
    # U+2028 / U+0085 inside a line must not split it (no str.splitlines).
    text = HEADER + "\r\n" + json.dumps(case(query="a\u2028b\x85c"), ensure_ascii=False) + "\r\n"
    assert load_eval_text(text, "eval.jsonl").cases[0].query == "a\u2028b\x85c"


def test_trim_is_unicode_white_space_only() -> None:
    # U+001C..U+001F are not White_Space (str.strip would remove them); nor is U+FEFF.
    assert load(case(case_id="\x1c")).cases[0].case_id == "\x1c"
    assert load(case(query="\ufeff")).cases[0].query == "\ufeff"
    assert load(case(query="\u200b")).cases[0].query == "\u200b"
    for blank in ["\u3000", "\u00a0", "\u2029", "\t\n\x0b\x0c\r", "\u1680\u205f\u202f"]:
        assert "query must not be empty" in str(error_of(case(query=blank)))


def test_bom_at_file_start_is_not_json() -> None:
    error = error_of(case(), header="\ufeff" + HEADER)
    assert str(error).startswith("eval.jsonl: line 1: not JSON: ")


# --------------------------------------------------------------------------- §1.2 header


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ("[1]", "sequence"),
        ("1", "integer"),
        ("{}", "missing field `taguru_eval`"),
        ('{"taguru_eval":1,"nmae":"x"}', "unknown field `nmae`"),
        ('{"taguru_eval":"1"}', "taguru_eval"),
        ('{"taguru_eval":1.0}', "floating point"),
        ('{"taguru_eval":true}', "boolean"),
        ('{"taguru_eval":-1}', "taguru_eval"),
        ('{"taguru_eval":null}', "null"),
        ('{"taguru_eval":1,"name":5}', "name"),
    ],
)
def test_invalid_header(header: str, fragment: str) -> None:
    error = error_of(case(), header=header)
    assert str(error).startswith("eval.jsonl: line 1: not a valid eval header: ")
    assert fragment in str(error)


def test_header_name_null_and_default_target_ignored() -> None:
    eval_set = load(case(), header='{"taguru_eval":1,"name":null,"default_target":{"any":[1,2]}}')
    assert eval_set.name is None
    assert load(case(), header='{"taguru_eval":1}').name is None


def test_header_stamp_huge_is_equality_checked() -> None:
    assert "got 18446744073709551615" in str(
        error_of(case(), header='{"taguru_eval":18446744073709551615}')
    )
    assert "not a valid eval header" in str(
        error_of(case(), header='{"taguru_eval":18446744073709551616}')
    )


def test_duplicate_keys_last_wins() -> None:
    eval_set = load(
        '{"case_id":"a","query":"q","case_id":"b"}', header='{"taguru_eval":2,"taguru_eval":1}'
    )
    assert eval_set.case_ids == ["b"]


# --------------------------------------------------------------------------- §1.3 step A


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"case_id": 5}, "case_id"),
        ({"query": None}, "query"),
        ({"cues": None}, "cues"),
        ({"cues": "a"}, "cues"),
        ({"cues": ["a", 1]}, "cues[1]"),
        ({"expected_sources": None}, "expected_sources"),
        ({"expected_sources": [{"paragraphs": [1]}]}, "expected_sources[0]"),
        ({"expected_sources": [{"source": "a", "paragraph": 1}]}, "expected_sources[0]"),
        (
            {"expected_sources": [{"source": "a", "paragraphs": None}]},
            "expected_sources[0].paragraphs",
        ),
        (
            {"expected_sources": [{"source": "a", "paragraphs": [1.0]}]},
            "expected_sources[0].paragraphs[0]",
        ),
        (
            {"expected_sources": [{"source": "a", "paragraphs": [-1]}]},
            "expected_sources[0].paragraphs[0]",
        ),
        (
            {"expected_sources": [{"source": "a", "paragraphs": [4294967296]}]},
            "expected_sources[0].paragraphs[0]",
        ),
        (
            {"expected_sources": [{"source": "a", "relevance": None}]},
            "expected_sources[0].relevance",
        ),
        (
            {"expected_sources": [{"source": "a", "relevance": 256}]},
            "expected_sources[0].relevance",
        ),
        ({"expected_sources": [{"source": "a", "relevance": -1}]}, "expected_sources[0].relevance"),
        (
            {"expected_sources": [{"source": "a", "relevance": True}]},
            "expected_sources[0].relevance",
        ),
        (
            {"expected_sources": [{"source": "a", "relevance": 2.0}]},
            "expected_sources[0].relevance",
        ),
        ({"expected_concepts": None}, "expected_concepts"),
        ({"expected_concepts": [1]}, "expected_concepts[0]"),
        ({"options": None}, "options"),
        ({"options": []}, "options"),
        ({"options": {"limt": 5}}, "options"),
        ({"options": {"limit": "5"}}, "options.limit"),
        ({"options": {"limit": 5.0}}, "options.limit"),
        ({"options": {"limit": -5}}, "options.limit"),
        ({"options": {"limit": 18446744073709551616}}, "options.limit"),
        ({"target": "x"}, ""),
    ],
)
def test_step_a_typing(fields: dict[str, Any], field: str) -> None:
    error = error_of(case(**fields))
    assert str(error).startswith("eval.jsonl: line 2: not a valid eval case: ")
    assert (error.field or "") == field


def test_step_a_missing_fields_and_non_objects() -> None:
    assert "missing field `query`" in str(error_of({"case_id": "c1"}))
    assert "missing field `case_id`" in str(error_of({"query": "q"}))
    assert "not a valid eval case" in str(error_of("[]"))
    assert "not a valid eval case" in str(error_of('"c1"'))


def test_step_a_relevance_exponent_is_not_an_integer() -> None:
    text = '{"case_id":"c1","query":"q","expected_sources":[{"source":"a","relevance":3e0}]}'
    assert "not a valid eval case" in str(error_of(text))


def test_step_a_defaults_and_opaque_extension_fields() -> None:
    loaded = load(case(expected_sources=[{"source": "a"}], cues=["", " "])).cases[0]
    assert loaded.expected_sources[0].paragraphs == ()
    assert loaded.expected_sources[0].relevance == 1
    assert loaded.cues == ("", " ")  # cue entries are not checked
    assert load(case(expected_concepts=[""])).cases[0].expected_concepts == ("",)
    assert load(case(expected_sources=[{"source": "a", "paragraphs": [2, 2]}])).cases[
        0
    ].expected_sources[0].paragraphs == (2, 2)


def test_step_a_runs_before_later_steps() -> None:
    # an unknown key wins over an empty case_id (B) and a malformed extension (F)
    assert "not a valid eval case" in str(
        error_of(case(case_id=" ", bogus=1, expected_citations=42))
    )


# --------------------------------------------------------------------------- steps B–E order


def test_step_b_before_c_before_d() -> None:
    assert str(error_of(case(case_id=" ", query=" "))).endswith("case_id must not be empty")
    assert str(error_of(case(), case(query=" "))).endswith("case 'c1': query must not be empty")


def test_duplicate_compares_untrimmed_exact() -> None:
    assert load(case(), case(case_id="c1 "), case(case_id="C1")).case_ids == ["c1", "c1 ", "C1"]


def test_step_e_checks_per_entry_in_order() -> None:
    sources = [{"source": "a", "relevance": 5}, {"source": " "}]
    error = error_of(case(expected_sources=sources))
    assert str(error).endswith("expected_sources relevance must be 0..=3, got 5")
    sources = [{"source": " ", "relevance": 5}]
    error = error_of(case(expected_sources=sources))
    assert str(error) == "eval.jsonl: line 2: case 'c1': expected_sources: source must not be empty"
    assert error.field == "expected_sources[0].source"


def test_step_e_before_step_f() -> None:
    error = error_of(
        case(expected_sources=[{"source": "a", "relevance": 4}], expected_citations=42)
    )
    assert "relevance must be 0..=3" in str(error)


def test_duplicate_before_step_e() -> None:
    error = error_of(case(), case(expected_sources=[{"source": " "}]))
    assert str(error) == "eval.jsonl: line 3: duplicate case_id 'c1'"


# --------------------------------------------------------------------------- step F


PREFIX = "eval.jsonl: line 2: case 'c1': "


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"expected_labels": ["ok", "\t"]}, "expected_labels: entries must not be empty"),
        (
            {"expected_associations": [{"subject": "a", "label": "b", "object": "\u3000"}]},
            "expected_associations: subject/label/object must not be empty",
        ),
        (
            {"expected_associations": [{"subject": "a", "label": " ", "object": "c"}]},
            "expected_associations: subject/label/object must not be empty",
        ),
        (
            {"expected_citations": [{"source": "", "paragraph": 0}]},
            "expected_citations: source must not be empty",
        ),
        (
            {"expected_citations": [{"source": "a", "paragraph": 0, "quote": "  "}]},
            "expected_citations: quote must not be empty",
        ),
        ({"options": {"floor": -0.5}}, "options.floor must be 0.0..=1.0, got -0.5"),
        ({"options": {"floor": 2}}, "options.floor must be 0.0..=1.0, got 2"),
        ({"options": {"floor": 1.0000001}}, "options.floor must be 0.0..=1.0, got 1.0000001"),
    ],
)
def test_step_f_semantic_messages(fields: dict[str, Any], message: str) -> None:
    assert str(error_of(case(**fields))) == PREFIX + message


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"expected_labels": "x"}, "expected_labels"),
        ({"expected_labels": [1]}, "expected_labels"),
        ({"expected_associations": [{"subject": "a", "label": "b"}]}, "expected_associations"),
        (
            {"expected_associations": [{"subject": "a", "label": "b", "object": "c", "w": 1}]},
            "expected_associations",
        ),
        ({"expected_associations": {"subject": "a"}}, "expected_associations"),
        ({"expected_citations": [{"source": "a"}]}, "expected_citations"),
        ({"expected_citations": [{"source": "a", "paragraph": -1}]}, "expected_citations"),
        (
            {"expected_citations": [{"source": "a", "paragraph": 0, "section": 5}]},
            "expected_citations",
        ),
        (
            {"expected_citations": [{"source": "a", "paragraph": 0, "quote": 5}]},
            "expected_citations",
        ),
        (
            {"expected_citations": [{"source": "a", "paragraph": 0, "page": 5}]},
            "expected_citations",
        ),
        ({"options": {"floor": "0.5"}}, "options.floor"),
        ({"options": {"floor": True}}, "options.floor"),
        ({"options": {"tags": "brand"}}, "options.tags"),
        ({"options": {"tags": [1]}}, "options.tags"),
        ({"options": {"since": -1}}, "options.since"),
        ({"options": {"since": 1.5}}, "options.since"),
        ({"options": {"until": True}}, "options.until"),
        ({"options": {"until": "200"}}, "options.until"),
    ],
)
def test_step_f_typing_names_field(fields: dict[str, Any], field: str) -> None:
    error = error_of(case(**fields))
    assert str(error).startswith(f"{PREFIX}{field}: ")
    assert error.field is not None and error.field.startswith(field)


def test_step_f_order() -> None:
    both = {"expected_labels": [1], "expected_citations": 42}
    assert str(error_of(case(**both))).startswith(PREFIX + "expected_labels: ")
    both = {"expected_associations": 1, "expected_citations": 42}
    assert str(error_of(case(**both))).startswith(PREFIX + "expected_associations: ")
    # citation typing (whole array) precedes the per-entry emptiness checks
    citations = [{"source": "", "paragraph": 0}, {"source": "a"}]
    assert "missing field `paragraph`" in str(error_of(case(expected_citations=citations)))
    assert str(error_of(case(expected_citations=42, options={"floor": 9}))).startswith(
        PREFIX + "expected_citations: "
    )
    assert "options.floor" in str(error_of(case(options={"floor": 9, "tags": 1})))
    assert str(error_of(case(options={"tags": 1, "since": -1}))).startswith(
        PREFIX + "options.tags: "
    )
    assert str(error_of(case(options={"since": -1, "until": -1}))).startswith(
        PREFIX + "options.since: "
    )


def test_step_f_nulls_are_absent_and_floor_f32() -> None:
    loaded = load(
        case(
            expected_labels=None,
            expected_associations=None,
            expected_citations=[{"source": "a", "paragraph": 0, "quote": None}],
            options={"limit": None, "floor": 1.00000001, "tags": None, "since": None, "until": 0},
        )
    ).cases[0]
    assert loaded.expected_labels == () and loaded.expected_associations == ()
    assert loaded.expected_citations[0].quote is None
    assert loaded.options == CaseOptions(limit=None, floor=1.0, tags=(), since=None, until=0)
    assert load(case(options={"floor": 0})).cases[0].options.floor == 0.0
    assert (
        load(case(options={"since": 300, "until": 100})).cases[0].options.since == 300
    )  # no order check


# --------------------------------------------------------------------------- §1.5 validate_limits


@pytest.mark.parametrize("limit", [0, 1001, 18446744073709551615])
def test_validate_limits_out_of_range(limit: int) -> None:
    eval_set = load(
        case(case_id="ok", options={"limit": 3}),
        case(options={"limit": limit}),
        case(case_id="c3", options={"limit": 0}),
    )
    with pytest.raises(InputError) as info:
        validate_limits(eval_set)
    assert str(info.value) == (
        f"eval.jsonl: line 3: case 'c1': options.limit: must be 1..=1000, got {limit}"
    )
    assert info.value.exit_code == 2
    assert (info.value.path, info.value.line, info.value.field) == (
        "eval.jsonl",
        3,
        "options.limit",
    )


@pytest.mark.parametrize("mode", ["interpret", "strict"])
@pytest.mark.parametrize(
    ("written", "floor"),
    [("1.0000000596046449", 1.0), ("0.4", to_f32(0.4)), ("0.50000002980232238", 0.5)],
)
def test_a_floor_is_read_as_taguru_reads_it(mode: str, written: str, floor: float) -> None:
    """ERRATA row 24: taguru reads ``1.0000000596046449`` with two roundings, just
    below the binary32 midpoint above 1.0, so the floor is 1.0 and in range (the
    nearest double would round up to 1.0000001 and be refused)."""
    text = f'{HEADER}\n{{"case_id": "c1", "query": "q", "options": {{"floor": {written}}}}}\n'
    loaded = (
        load_eval_text(text, "e.jsonl")
        if mode == "interpret"
        else load_eval_strict(text, "e.jsonl")
    )
    assert loaded.cases[0].options.floor == floor


@pytest.mark.parametrize("mode", ["interpret", "strict"])
def test_validate_limits_names_the_physical_line(mode: str) -> None:
    """Blank lines count (ERRATA row 19): the case on the file's fifth line is line 5,
    whichever reader loaded the file."""
    text = f"\n{HEADER}\n\n" + json.dumps({"case_id": "c1", "query": "q"}) + "\n"
    text += json.dumps({"case_id": "c2", "query": "q", "options": {"limit": 1001}}) + "\n\n"
    eval_set = (
        load_eval_text(text, "sets/my eval.jsonl")
        if mode == "interpret"
        else load_eval_strict(text, "sets/my eval.jsonl")
    )
    with pytest.raises(InputError) as info:
        validate_limits(eval_set)
    assert str(info.value) == (
        "sets/my eval.jsonl: line 5: case 'c2': options.limit: must be 1..=1000, got 1001"
    )


@pytest.mark.parametrize("limit", [1, 1000, None])
def test_validate_limits_in_range(limit: int | None) -> None:
    eval_set = load(case(options={"limit": limit}))
    validate_limits(eval_set)
    assert eval_set.cases[0].effective_limit == (10 if limit is None else limit)


def test_limit_range_not_checked_by_the_loader() -> None:
    assert load(case(options={"limit": 0})).cases[0].options.limit == 0


# --------------------------------------------------------------------------- §1.6 predicates


def test_declares_source_expectation_needs_relevance_one() -> None:
    only_zero = load(case(expected_sources=[{"source": "a", "relevance": 0}])).cases[0]
    assert only_zero.has_expectations and not only_zero.declares_source_expectation
    mixed = load(case(expected_sources=[{"source": "a", "relevance": 0}, {"source": "b"}])).cases[0]
    assert mixed.declares_source_expectation
    assert load(case(expected_concepts=["x"])).cases[0].runs_structural_lane
    assert (
        load(case(expected_associations=[{"subject": "a", "label": "b", "object": "c"}]))
        .cases[0]
        .runs_structural_lane
    )


# --------------------------------------------------------------------------- expected table


def test_expected_frame_rows() -> None:
    eval_set = load(
        case(
            expected_sources=[
                {"source": "a.md", "paragraphs": [2, 5, 2], "relevance": 3},
                {"source": "b.md", "relevance": 0},
            ],
            expected_concepts=["X"],
            expected_labels=["L"],
            expected_associations=[{"subject": "s", "label": "l", "object": "o"}],
            expected_citations=[
                {"source": "a.md", "paragraph": 1},
                {"source": "a.md", "paragraph": 2, "section": None},
                {"source": "a.md", "paragraph": 3, "section": "沿革", "quote": "q"},
            ],
        ),
        case(case_id="c2", expected_concepts=["Y", "Y"]),
    )
    frame = eval_set.expected
    assert frame.schema == EXPECTED_SCHEMA
    sources = frame.filter(pl.col("kind") == "source")
    assert sources.select(
        "entry_index", "item_index", "source", "paragraph", "relevance"
    ).rows() == [
        (0, 0, "a.md", 2, 3),
        (0, 1, "a.md", 5, 3),
        (1, 2, "b.md", None, 0),
    ]
    citations = frame.filter(pl.col("kind") == "citation")
    assert citations.select("paragraph", "section_declared", "section", "quote").rows() == [
        (1, False, None, None),
        (2, True, None, None),
        (3, True, "沿革", "q"),
    ]
    association = frame.filter(pl.col("kind") == "association").row(0, named=True)
    assert (association["subject"], association["label"], association["object"]) == ("s", "l", "o")
    assert frame["kind"].to_list() == (
        ["source"] * 3 + ["concept", "label", "association"] + ["citation"] * 3 + ["concept"] * 2
    )
    c2 = frame.filter(pl.col("case_id") == "c2")
    assert c2["case_index"].to_list() == [1, 1]
    assert c2["text"].to_list() == ["Y", "Y"]
    assert c2["item_index"].to_list() == [0, 1]


def test_expected_frame_empty_keeps_schema() -> None:
    frame = load(case()).expected
    assert frame.height == 0
    assert frame.schema == EXPECTED_SCHEMA
