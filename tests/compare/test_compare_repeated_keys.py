"""``compare`` refuses a key repeated inside an object it reads (issue 12, item 9).

GATE_AND_COMPARE.md §1.2: taguru decodes evaluation.json into structs, and
serde refuses a field given twice in one (``duplicate field `x```), a
``null`` first occurrence included; a repeated key of a free-keyed map
(``definitions``, ``metrics``) or of an object compare does not read is
fine. The check runs on whole files (small ones parsed by ``json``, large ones
by pyarrow's JSON reader first) and on the head the run-store reader decodes.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.documents import evaluation_document, write_document
from support.layouts import to_old_layout

from taguru_eval.analyst import ingest
from taguru_eval.catalog import CATALOG
from taguru_eval.cli.compare import main
from taguru_eval.compare.load import _compared_paths, _view_decoder
from taguru_eval.compare.repeats import (
    SMALL,
    Each,
    Fixed,
    arrow_finds_repeat,
    first_repeat,
    shape_of,
)

PREFIX = "taguru: evaluate: "
TWIN = "__twin__"
"""A key suffix removed after serialising: ``{"k__twin__": 1, "k": 2}`` becomes
``{"k": 1, "k": 2}``, a JSON text no dict can hold."""

SHAPE = shape_of(_view_decoder(_compared_paths(CATALOG)).type)


def dumps(document: Any) -> bytes:
    return json.dumps(document, indent=2, ensure_ascii=False).replace(TWIN, "").encode("utf-8")


def twin_first(block: dict[str, Any], key: str, first: Any) -> dict[str, Any]:
    """``block`` with ``key`` given once more before its own occurrence."""
    return {f"{key}{TWIN}": first, **block}


def document() -> dict[str, Any]:
    return evaluation_document()


def compare_cli(tmp_path: Path, base: bytes, head: bytes) -> tuple[int, str]:
    (tmp_path / "base.json").write_bytes(base)
    (tmp_path / "head.json").write_bytes(head)
    err = io.StringIO()
    code = main(
        [str(tmp_path / "base.json"), str(tmp_path / "head.json"), "--out",
         str(tmp_path / "changes.jsonl")],
        stdout=io.StringIO(), stderr=err,
    )  # fmt: skip
    return code, err.getvalue()


def repeated_in(where: str) -> tuple[bytes, str]:
    """A document with one key repeated at ``where``, and compare's detail for it."""
    doc = document()
    if where == "corpus":
        doc["corpus"][f"stable{TWIN}"] = False
        return dumps(doc), "corpus: duplicate field `stable`"
    if where == "case block":
        doc["cases"][1] = twin_first(doc["cases"][1], "recall", None)  # null first
        return dumps(doc), "cases[1]: duplicate field `recall`"
    if where == "case recall":
        doc["cases"][2]["recall"][f"mrr{TWIN}"] = 0.25
        return dumps(doc), "cases[2].recall: duplicate field `mrr`"
    if where == "citation validity":
        citations = doc["cases"][0].setdefault("citations", {})
        citations["validity"] = {"expected_total": 1, "valid": 1, "value": 1.0}
        citations["validity"][f"value{TWIN}"] = 0.0
        return dumps(doc), "cases[0].citations.validity: duplicate field `value`"
    if where == "top level":
        doc[f"generated_at{TWIN}"] = "2026-01-01T00:00:00Z"
        return dumps(doc), "duplicate field `generated_at`"
    if where == "budget":
        doc["inputs"]["budget"] = {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}
        doc["inputs"]["budget"][f"max_items{TWIN}"] = 41
        return dumps(doc), "inputs.budget: duplicate field `max_items`"
    # one definition's ``statistic``
    name = next(iter(doc["definitions"]))
    doc["definitions"][name][f"statistic{TWIN}"] = "ratio"
    return dumps(doc), f"definitions.{name}: duplicate field `statistic`"


@pytest.mark.parametrize(
    "where",
    ["corpus", "case block", "case recall", "citation validity", "top level", "budget",
     "definition"],
)  # fmt: skip
def test_a_repeated_key_in_an_object_compare_reads_exits_2_with_one_line(
    tmp_path: Path, where: str
) -> None:
    data, detail = repeated_in(where)
    code, err = compare_cli(tmp_path, dumps(document()), data)
    assert code == 2
    assert err == f"{PREFIX}HEAD {tmp_path / 'head.json'}: malformed evaluation.json: {detail}\n"
    assert not (tmp_path / "changes.jsonl").exists()


def test_base_is_refused_first(tmp_path: Path) -> None:
    data, detail = repeated_in("corpus")
    code, err = compare_cli(tmp_path, data, data)
    assert code == 2
    assert err == f"{PREFIX}BASE {tmp_path / 'base.json'}: malformed evaluation.json: {detail}\n"


def test_repeats_compare_does_not_read_are_fine(tmp_path: Path) -> None:
    doc = document()
    doc["inputs"][f"mode{TWIN}"] = "assembly"  # a key compare does not read
    name = next(iter(doc["metrics"]))
    doc["metrics"] = {f"{name}{TWIN}": {"n": 0}, **doc["metrics"]}  # a free-keyed map
    doc["definitions"] = {f"{name}{TWIN}": {"statistic": "count"}, **doc["definitions"]}
    doc["cases"][0]["passage"][f"outcome{TWIN}"] = "failed"  # inside an unread block
    doc["cases"][0]["recall"][f"matched{TWIN}"] = 7  # a key of a read object no view reads
    code, err = compare_cli(tmp_path, dumps(document()), dumps(doc))
    assert code == 0, err


def large(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with enough cases to pass :data:`SMALL` (Arrow looks first)."""
    template = doc["cases"][0]
    doc["cases"] = [{**template, "case_id": f"case-{n:05d}"} for n in range(1500)]
    return doc


def test_a_large_file_is_checked_by_arrow_then_named_by_json(tmp_path: Path) -> None:
    clean = dumps(large(document()))
    assert len(clean) > SMALL
    assert arrow_finds_repeat(clean, SHAPE) is False
    doc = large(document())
    doc["cases"][1400] = twin_first(doc["cases"][1400], "case_id", "other")
    data = dumps(doc)
    assert arrow_finds_repeat(data, SHAPE) is True
    code, err = compare_cli(tmp_path, clean, data)
    assert code == 2
    assert err.endswith("malformed evaluation.json: cases[1400]: duplicate field `case_id`\n")
    code, err = compare_cli(tmp_path, clean, clean)
    assert code == 0, err


def test_the_run_store_reader_applies_the_rule_to_the_head(tmp_path: Path) -> None:
    stored = ingest.ingest(write_document(tmp_path / "e.json", document()), tmp_path / "runs")
    run_dir = tmp_path / "run"
    shutil.copytree(stored.path, run_dir)
    artifact = to_old_layout(run_dir)  # edited as text
    doc = json.loads(artifact.read_text(encoding="utf-8"))
    first = {"graph": 0, "passages": 0, "config": 0}
    doc["corpus"] = twin_first(doc["corpus"], "revision_after", first)
    artifact.write_bytes(dumps(doc))
    other = tmp_path / "other.json"
    other.write_bytes(dumps(document()))
    err = io.StringIO()
    code = main(
        [str(other), str(run_dir), "--out", str(tmp_path / "c.jsonl")],
        stdout=io.StringIO(), stderr=err,
    )  # fmt: skip
    assert code == 2
    assert err.getvalue() == (
        f"{PREFIX}HEAD {artifact}: malformed evaluation.json: "
        "corpus: duplicate field `revision_after`\n"
    )


# ------------------------------------------------------------------ json and Arrow agree

Obj = tuple[str, list[tuple[str, Any]]]
"""An object as its members in order, repeats kept: ``("object", [(key, value), …])``."""

NUMBER = st.one_of(
    st.none(), st.integers(0, 1000), st.floats(allow_nan=False, allow_infinity=False)
)
ANY_JSON = st.recursive(
    st.one_of(NUMBER, st.booleans(), st.text(max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(
            st.tuples(st.sampled_from(["mrr", "value", "case_id", "x"]), inner), max_size=3
        ).map(lambda pairs: ("object", pairs)),
    ),
    max_leaves=8,
)


def members(keys: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Obj]:
    """An object whose keys (repeats allowed) come from ``keys``, each with its values."""
    pair = st.sampled_from(sorted(keys)).flatmap(lambda key: st.tuples(st.just(key), keys[key]))
    return st.lists(pair, max_size=5).map(lambda pairs: ("object", pairs))


SCORE = members({"value": NUMBER, "x": ANY_JSON})
CASE = members(
    {
        "case_id": st.text(max_size=3),
        "recall": st.one_of(st.none(), members({"mrr": NUMBER, "ndcg": NUMBER, "x": ANY_JSON})),
        "citations": st.one_of(st.none(), members({"recall": SCORE, "validity": SCORE})),
        "diversity_sources": NUMBER,
        "query": ANY_JSON,
    }
)


def render(value: Any) -> str:
    """JSON text of a generated value; an object keeps every member, repeats too."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{json.dumps(k)}:{render(v)}" for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render(item) for item in value) + "]"
    return json.dumps(value)


def repeats(value: Any, shape: Any) -> bool:
    """The oracle: does a checked object below ``value`` give one of its keys twice?"""
    if isinstance(shape, Each):
        return isinstance(value, list) and any(repeats(item, shape.item) for item in value)
    if not (isinstance(shape, Fixed) and isinstance(value, tuple)):
        return False
    read = [key for key, _ in value[1] if key in shape.fields]
    if len(read) != len(set(read)):
        return True
    return any(repeats(v, shape.fields[k]) for k, v in value[1] if k in shape.fields)


@settings(max_examples=300, deadline=None)
@given(st.lists(CASE, max_size=4))
def test_json_and_arrow_agree_with_serde_on_every_case_block(cases: list[Obj]) -> None:
    document = ("object", [("cases", cases)])
    data = render(document).encode("utf-8")
    expected = repeats(document, SHAPE)
    assert (first_repeat(data, SHAPE) is not None) is expected
    assert arrow_finds_repeat(data, SHAPE) is expected
