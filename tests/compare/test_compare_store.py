"""``compare`` of stored run directories through their Parquet tables.

The fast path (cases.parquet + metrics.parquet + the head of evaluation.json)
must give exactly the Comparison the evaluation.json path gives for the same
run: same frames, warnings, counts, identities and changes.jsonl bytes. The
runs here are real: the sake demo evaluated against the reference server over
loopback HTTP and written to the store by ``taguru_eval.api.run``, and a
regressed copy of it imported with ``ingest``.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from support.layouts import artifact_text, stored_artifact, to_old_layout
from support.paths import DATA

from taguru_eval import api
from taguru_eval.analyst.ingest import ingest
from taguru_eval.cli.compare import main
from taguru_eval.compare import Comparison, compare
from taguru_eval.compare import parquet as store_reader
from taguru_eval.compare.load import read_view as load_read_view
from taguru_eval.compare.parquet import head_of
from taguru_refserver.serve import running_server

NOW = "2026-07-29T00:00:00Z"
PREFIX = "taguru: evaluate: "


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two stored runs: the demo run and a regressed import of its artifact."""
    work = tmp_path_factory.mktemp("compare-store")
    store = work / "runs"
    with running_server(DATA) as url:
        result = api.run(
            DATA / "sake" / "eval.jsonl",
            "sake",
            url=url,
            out=work / "evaluation.json",
            store=store,
            env={},
        )
    assert result.path is not None
    base = Path(result.path)
    doc = json.loads(artifact_text(base))
    with_mrr = [c for c in doc["cases"] if (c.get("recall") or {}).get("mrr", 0) > 0.5]
    assert len(with_mrr) >= 2, "the demo needs cases with a recall block"
    with_mrr[0]["recall"]["mrr"] = 0.0  # regressed
    with_mrr[1]["recall"]["ndcg"] = 1.0 if with_mrr[1]["recall"]["ndcg"] < 1.0 else 0.5
    removed = doc["cases"].pop()  # a removed case
    added = json.loads(json.dumps(with_mrr[0]))
    added["case_id"] = "zz-added"
    doc["cases"].append(added)
    doc["metrics"]["recall.mrr"]["mean"] = 0.125  # an aggregate delta
    doc["generated_at"] = "2026-07-29T09:30:00Z"
    doc["corpus"]["stable"] = False  # a mismatch warning
    regressed_json = work / "regressed.json"
    regressed_json.write_text(json.dumps(doc, indent=2, ensure_ascii=False), "utf-8")
    head = ingest(regressed_json, store).path
    return {
        "base": base,
        "head": Path(head),
        "removed": Path(str(removed["case_id"])),
        "work": work,
    }


@pytest.fixture()
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail if a stored run directory is read through its whole evaluation.json."""
    real = load_read_view

    def refuse_directories(source: Any, **kwargs: Any) -> Any:
        if Path(source).is_dir():
            raise AssertionError(f"the whole evaluation.json of {source} was decoded")
        return real(source, **kwargs)

    monkeypatch.setattr(store_reader, "read_view", refuse_directories)
    yield


def both_ways(base: Path, head: Path) -> tuple[Comparison, Comparison]:
    """The same comparison from the directories and from their evaluation.json."""
    from_json = compare(
        stored_artifact(base), stored_artifact(head), base_label="B", head_label="H"
    )
    from_store = compare(base, head, base_label="B", head_label="H")
    return from_store, from_json


def assert_same(left: Comparison, right: Comparison) -> None:
    assert left.cases.equals(right.cases, null_equal=True)
    assert left.cases.schema == right.cases.schema
    assert left.metrics.equals(right.metrics, null_equal=True)
    assert left.warnings == right.warnings
    assert left.counts == right.counts
    for a, b in ((left.base, right.base), (left.head, right.head)):
        assert a.identity() == b.identity()
        assert a.budget == b.budget
        assert dict(a.statistics) == dict(b.statistics)
        assert a.duplicate_case_ids == b.duplicate_case_ids
        assert a.cases.equals(b.cases, null_equal=True)
    assert left.changes_jsonl(NOW) == right.changes_jsonl(NOW)
    assert left.summary("out") == right.summary("out")


def test_the_stored_runs_have_their_tables(stored: dict[str, Path]) -> None:
    for side in ("base", "head"):
        assert (stored[side] / "cases.parquet").is_file()
        assert (stored[side] / "metrics.parquet").is_file()


def test_parquet_and_json_give_the_same_comparison(
    stored: dict[str, Path], no_fallback: None
) -> None:
    from_store, from_json = both_ways(stored["base"], stored["head"])
    assert_same(from_store, from_json)
    counts = from_store.counts
    assert counts["regressed"] >= 1
    assert counts["improved"] + counts["regressed"] >= 1
    assert counts["added"] == 1
    assert counts["removed"] == 1
    assert counts["cases_base"] == counts["cases_head"] > 10
    assert any("corpus.stable is false" in warning for warning in from_store.warnings)
    mrr = from_store.metrics.filter(pl.col("metric") == "recall.mrr").row(0, named=True)
    assert mrr["head"] == 0.125
    kinds = dict(from_store.cases.select("case_id", "kind").iter_rows())
    assert kinds["zz-added"] == "added"
    assert kinds[str(stored["removed"])] == "removed"


def test_a_run_compared_with_itself_is_the_same_both_ways(
    stored: dict[str, Path], no_fallback: None
) -> None:
    for side in ("base", "head"):
        from_store, from_json = both_ways(stored[side], stored[side])
        assert_same(from_store, from_json)
        assert from_store.counts["unchanged"] == from_store.counts["cases_base"]


def test_reversed_and_mixed_forms_agree(stored: dict[str, Path], no_fallback: None) -> None:
    from_store, from_json = both_ways(stored["head"], stored["base"])
    assert_same(from_store, from_json)
    mixed = compare(stored["head"], stored_artifact(stored["base"]), base_label="B", head_label="H")
    assert_same(mixed, from_json)


def test_the_cli_writes_the_same_bytes_apart_from_generated_at(
    stored: dict[str, Path], tmp_path: Path, no_fallback: None
) -> None:
    def run(base: str, head: str, out: Path) -> tuple[str, str, list[str]]:
        stdout, stderr = io.StringIO(), io.StringIO()
        assert main([base, head, "--out", str(out)], stdout=stdout, stderr=stderr) == 0
        return stdout.getvalue(), stderr.getvalue(), out.read_text("utf-8").splitlines()

    # Same argument strings on both runs, so the header paths match too: the
    # directories are compared through their tables, then (tables removed)
    # through their evaluation.json.
    copies = {}
    for side in ("base", "head"):
        copies[side] = tmp_path / side
        shutil.copytree(stored[side], copies[side])
    fast = run(str(copies["base"]), str(copies["head"]), tmp_path / "fast.jsonl")
    for side in ("base", "head"):
        (copies[side] / "cases.parquet").unlink()
    slow_out = tmp_path / "slow.jsonl"
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_reader, "read_view", load_read_view)  # the fallback is the point here
        code = main(
            [str(copies["base"]), str(copies["head"]), "--out", str(slow_out)],
            stdout=stdout,
            stderr=stderr,
        )
    assert code == 0
    slow = (stdout.getvalue(), stderr.getvalue(), slow_out.read_text("utf-8").splitlines())
    assert fast[0].replace("fast.jsonl", "X") == slow[0].replace("slow.jsonl", "X")
    assert fast[1] == slow[1]
    fast_header, slow_header = json.loads(fast[2][0]), json.loads(slow[2][0])
    fast_header.pop("generated_at")
    slow_header.pop("generated_at")
    assert fast_header == slow_header
    assert fast[2][1:] == slow[2][1:]
    assert len(fast[2]) > 1


# ------------------------------------------------------------------ damaged stores


def copy_run(stored: dict[str, Path], tmp_path: Path, side: str = "base") -> Path:
    target = tmp_path / f"copy-{side}"
    shutil.copytree(stored[side], target)
    # The tests below edit the artifact's text by hand: a plain file, as a run
    # stored before compression holds it.
    to_old_layout(target)
    return target


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_corrupt_cases_table_exits_2_naming_the_file(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    (run_dir / "cases.parquet").write_bytes(b"PAR1 not really parquet")
    code, out, err = cli([str(stored["base"]), str(run_dir), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert out == ""
    assert err.startswith(f"{PREFIX}HEAD {run_dir}/cases.parquet: malformed run-store table: "), err
    assert err.count("\n") == 1
    assert not (tmp_path / "c.jsonl").exists()


def test_a_metrics_table_without_a_column_exits_2_naming_file_and_column(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    table = pq.read_table(run_dir / "metrics.parquet").drop_columns(["mean"])
    pq.write_table(table, run_dir / "metrics.parquet")
    code, _out, err = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert err.startswith(f"{PREFIX}BASE {run_dir}/metrics.parquet: malformed run-store table: ")
    assert "mean" in err


def test_a_wrongly_typed_case_column_exits_2(stored: dict[str, Path], tmp_path: Path) -> None:
    run_dir = copy_run(stored, tmp_path)
    frame = pl.read_parquet(run_dir / "cases.parquet").with_columns(pl.col("mrr").cast(pl.String))
    frame.write_parquet(run_dir / "cases.parquet")
    code, _out, err = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert err == (
        f"{PREFIX}BASE {run_dir}/cases.parquet: malformed run-store table: "
        "mrr: expected a numeric column, got String\n"
    )


@pytest.mark.parametrize("missing", ["cases.parquet", "metrics.parquet"])
def test_a_directory_without_both_tables_falls_back_to_its_evaluation_json(
    stored: dict[str, Path], tmp_path: Path, missing: str
) -> None:
    run_dir = copy_run(stored, tmp_path)
    (run_dir / missing).unlink()
    fallback = compare(run_dir, stored["head"], base_label="B", head_label="H")
    reference = compare(
        stored_artifact(stored["base"]), stored["head"], base_label="B", head_label="H"
    )
    assert_same(fallback, reference)


def test_a_missing_evaluation_json_errors_like_the_json_path(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    (run_dir / "evaluation.json").unlink()
    code, _out, err = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert err == (
        # Neither layout's file is there: the message names today's.
        f"{PREFIX}BASE reading {run_dir}/evaluation.json.zst: No such file or directory "
        "(os error 2)\n"
    )


def test_an_out_of_range_stamp_in_the_head_errors_like_the_json_path(
    stored: dict[str, Path], tmp_path: Path, no_fallback: None
) -> None:
    run_dir = copy_run(stored, tmp_path)
    path = run_dir / "evaluation.json"
    text = path.read_text("utf-8")
    assert text.startswith('{\n  "taguru_evaluation": 1,')
    path.write_text(text.replace('"taguru_evaluation": 1,', '"taguru_evaluation": 7,', 1), "utf-8")
    code, _out, err = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert err == (
        f"{PREFIX}BASE {run_dir}/evaluation.json: taguru_evaluation must be within 1..=1, got 7\n"
    )


def test_a_malformed_head_field_errors_like_the_json_path(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    path = run_dir / "evaluation.json"
    doc = json.loads(path.read_text("utf-8"))
    doc["corpus"]["stable"] = "yes"
    path.write_text(json.dumps(doc, indent=2), "utf-8")
    fast = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    (run_dir / "cases.parquet").unlink()
    slow = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert fast == slow
    assert fast[0] == 2
    assert "malformed evaluation.json" in fast[2]
    assert "corpus.stable" in fast[2]


def test_another_key_order_falls_back_and_still_agrees(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    path = run_dir / "evaluation.json"
    doc = json.loads(path.read_text("utf-8"))
    reordered = {"cases": doc.pop("cases"), **doc}  # cases before every header key
    path.write_text(json.dumps(reordered, indent=2, ensure_ascii=False), "utf-8")
    assert head_of(path.read_bytes()) is None
    from_dir = compare(run_dir, stored["head"], base_label="B", head_label="H")
    from_json = compare(
        stored_artifact(stored["base"]), stored["head"], base_label="B", head_label="H"
    )
    assert_same(from_dir, from_json)


# ------------------------------------------------------------------ the head scanner


@pytest.mark.parametrize(
    ("text", "head"),
    [
        (
            '{"taguru_evaluation": 1, "generated_at": "x", "inputs": {"cases": []},'
            ' "corpus": {}, "thresholds": null, "definitions": {"a\\"{[": {}},'
            ' "cases": [1, 2], "metrics": {}}',
            '{"taguru_evaluation": 1, "generated_at": "x", "inputs": {"cases": []},'
            ' "corpus": {}, "thresholds": null, "definitions": {"a\\"{[": {}}}',
        ),
        (
            ' \n{"taguru_evaluation":1,"generated_at":"","inputs":{},"corpus":{},'
            '"thresholds":null,"warnings":["\\"cases\\": ]}"],"definitions":{},"cases":[',
            ' \n{"taguru_evaluation":1,"generated_at":"","inputs":{},"corpus":{},'
            '"thresholds":null,"warnings":["\\"cases\\": ]}"],"definitions":{}}',
        ),
        # A header key missing before "cases" might follow it: no shortcut.
        ('{"taguru_evaluation":1,"cases":[],"generated_at":""}', None),
        ('{"cases":[]}', None),
        # An escaped spelling of a key is left to the real decoder.
        (
            '{"taguru_evaluation":1,"generated_at":"","inputs":{},"corpus":{},'
            '"thresholds":null,"definitions":{},"ca\\u0073es":[]}',
            None,
        ),
        # No "cases" key at all, or not yet within the bytes read.
        ('{"taguru_evaluation":1}', None),
        ('{"taguru_evaluation":1,"generated_at":"unterminated', None),
        ("[1, 2]", None),
        ("", None),
    ],
)
def test_head_of(text: str, head: str | None) -> None:
    found = head_of(text.encode("utf-8"))
    assert found == (None if head is None else head.encode("utf-8"))
    if found is not None:
        json.loads(found)


def test_the_head_read_is_bounded(
    stored: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head longer than the limit is not searched further: the whole file is
    decoded instead, with the same result."""
    run_dir = copy_run(stored, tmp_path)
    monkeypatch.setattr(store_reader, "FIRST_READ", 64)
    monkeypatch.setattr(store_reader, "HEAD_LIMIT", 256)
    calls: list[Path] = []
    real = load_read_view

    def counting(source: Any, **kwargs: Any) -> Any:
        if Path(source).is_dir():
            calls.append(Path(source))
        return real(source, **kwargs)

    monkeypatch.setattr(store_reader, "read_view", counting)
    head_json = stored_artifact(stored["head"])
    bounded = compare(run_dir, head_json, base_label="B", head_label="H")
    assert calls == [run_dir]
    monkeypatch.setattr(store_reader, "HEAD_LIMIT", 1 << 30)
    grown = compare(run_dir, head_json, base_label="B", head_label="H")
    assert calls == [run_dir]  # found by growing the read, no fallback
    assert_same(bounded, grown)


def test_evaluation_json_is_checked_before_the_tables(
    stored: dict[str, Path], tmp_path: Path
) -> None:
    run_dir = copy_run(stored, tmp_path)
    (run_dir / "cases.parquet").write_bytes(b"not parquet")
    path = run_dir / "evaluation.json"
    text = path.read_text("utf-8")
    path.write_text(text.replace('"taguru_evaluation": 1,', '"taguru_evaluation": 0,', 1), "utf-8")
    code, _out, err = cli([str(run_dir), str(stored["head"]), "--out", str(tmp_path / "c.jsonl")])
    assert code == 2
    assert err == (
        f"{PREFIX}BASE {run_dir}/evaluation.json: taguru_evaluation must be within 1..=1, got 0\n"
    )
