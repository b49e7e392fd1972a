"""The must-refuse gate end to end over loopback HTTP (ABSTENTION.md §3.13).

One reference server serves the same small English lease corpus twice:
``lease`` without a vector lane (the server reports it as not run) and
``lease-vec`` with the toy vector lane (``refserver-toy-hash-v1``, floor
0.35), so the default ``semantic`` rule is exercised both ways.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.layouts import stored_artifact
from support.must_refuse import EVAL, MUST_REFUSE, lease_data, write_jsonl
from support.run import run_args

import taguru_eval
from taguru_eval.artifact.build import dumps
from taguru_eval.artifact.layout import LaneBlocks
from taguru_eval.catalog import ABSTENTION_METRICS, CATALOG
from taguru_eval.cli.main import main
from taguru_eval.compare import compare
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.pipeline.finish import finish_run
from taguru_eval.run.console import Console
from taguru_eval.run.runner import network_phase
from taguru_eval.tables.shapes import LaneOutput
from taguru_refserver.serve import running_server

GATE = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {"abstention.out_of_corpus.refusal_rate": {"min": 1.0}},
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("must-refuse")
    lease_data(root)
    (root / "gate.json").write_text(json.dumps(GATE), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server(work: Path) -> Iterator[str]:
    with running_server(work / "data") as url:
        yield url


def _run(
    work: Path, url: str, context: str, name: str, *, rule: str | None = None, mr: str = "mr"
) -> taguru_eval.Run:
    return taguru_eval.run(
        work / "eval.jsonl",
        context,
        url=url,
        out=work / f"{name}.json",
        store=work / "runs",
        env={},
        must_refuse=work / f"{mr}.jsonl",
        refusal_rule=rule,
    )


@pytest.fixture(scope="module")
def semantic_vec(work: Path, server: str) -> taguru_eval.Run:
    return _run(work, server, "lease-vec", "semantic-vec")


@pytest.fixture(scope="module")
def any_vec(work: Path, server: str) -> taguru_eval.Run:
    return _run(work, server, "lease-vec", "any-vec", rule="any")


@pytest.fixture(scope="module")
def semantic_plain(work: Path, server: str) -> taguru_eval.Run:
    return _run(work, server, "lease", "semantic-plain")


def verdicts(run: taguru_eval.Run, column: str = "verdict") -> dict[str, Any]:
    return dict(run.refusal_cases.select("case_id", column).iter_rows())


def entry(run: taguru_eval.Run, case_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        case for case in run.doc["abstention"]["cases"] if case["case_id"] == case_id
    )
    return found


# ------------------------------------------------------------------ verdicts


def test_semantic_rule_with_the_vector_lane(semantic_vec: taguru_eval.Run) -> None:
    assert verdicts(semantic_vec) == {
        "mr-volcano": "abstained",
        "mr-pets": "abstained",
        "mr-insurance": "surfaced",
        "mr-tagged": "undetermined",
    }
    pets = entry(semantic_vec, "mr-pets")["passage"]
    # BM25-only hits are counted and listed, but are not support.
    assert pets["vector_ran"] is True and pets["floor"] == pytest.approx(0.35)
    assert pets["vector_hits"] == 0 and pets["bm25_only_hits"] == pets["hits_served"] > 0
    assert all("vector" not in hit["lanes"] for hit in pets["top"])
    assert len(pets["top"]) == 3 and pets["top_truncated"] == pets["hits_served"] - 3


def test_a_bm25_only_case_flips_between_the_rules(
    semantic_vec: taguru_eval.Run, any_vec: taguru_eval.Run
) -> None:
    assert verdicts(semantic_vec, "passage_verdict")["mr-pets"] == "abstained"
    assert verdicts(any_vec, "passage_verdict")["mr-pets"] == "surfaced"
    assert verdicts(any_vec, "passage_reason")["mr-pets"] == "passage_hit"
    # The volcano shares no term at all: zero hits abstain under both rules.
    assert verdicts(any_vec)["mr-volcano"] == "abstained"


def test_a_filter_with_no_eligible_source_is_undetermined_not_abstained(
    semantic_vec: taguru_eval.Run, any_vec: taguru_eval.Run
) -> None:
    for run in (semantic_vec, any_vec):
        row = run.refusal_cases.filter(pl.col("case_id") == "mr-tagged").row(0, named=True)
        assert (row["verdict"], row["reason"]) == ("undetermined", "no_eligible_sources")
        assert row["hits_served"] == 0


def test_without_a_vector_lane_the_semantic_rule_is_undetermined(
    semantic_plain: taguru_eval.Run,
) -> None:
    rows = semantic_plain.refusal_cases.filter(pl.col("case_id") != "mr-insurance")
    assert set(rows.get_column("verdict")) == {"undetermined"}
    volcano = entry(semantic_plain, "mr-volcano")
    assert volcano["reason"] == "vector_lane_not_run"
    assert volcano["passage"]["vector_reason"] == "no embedding provider is configured"
    block = semantic_plain.doc["abstention"]
    assert block["vector"] == {
        "provider_model": None,
        "passage_vectors": "off",
        "effective_floors": [],
        "floors_coherent": True,
    }
    assert any("vector lane did not run" in warning for warning in block["warnings"])
    # Undetermined never counts as abstained: no determinate case, no value.
    refusal = semantic_plain.doc["metrics"]["abstention.refusal_rate"]
    assert refusal == {"value": 0.0, "n": 1, "numerator": 0}  # mr-insurance alone
    assert semantic_plain.doc["metrics"]["abstention.passage.refusal_rate"]["n"] == 0


def test_the_structural_probe_reads_candidates_and_their_kinds(
    semantic_vec: taguru_eval.Run,
) -> None:
    insurance = entry(semantic_vec, "mr-insurance")
    assert insurance["reason"] == "structural_candidate"
    assert insurance["structural"]["cues"][0]["candidates"] == [
        {"name": "Landlord", "tier": "lexical", "kind": "containment"}
    ]
    structural = entry(semantic_vec, "mr-pets")["structural"]
    assert list(structural) == ["verdict", "cues"] and structural["verdict"] == "abstained"
    cue = structural["cues"][0]
    assert (cue["cue"], cue["candidates"], cue["candidates_truncated"]) == ("pet policy", [], 0)
    assert "structural" not in entry(semantic_vec, "mr-volcano")


def test_metrics_have_their_own_denominators(semantic_vec: taguru_eval.Run) -> None:
    metrics = semantic_vec.doc["metrics"]
    assert set(ABSTENTION_METRICS) <= set(metrics)
    assert set(metrics) == set(semantic_vec.doc["definitions"])
    assert metrics["abstention.refusal_rate"] == {"value": 2 / 3, "n": 3, "numerator": 2}
    assert metrics["abstention.false_answers"] == {"value": 1.0, "n": 3}
    assert metrics["abstention.undetermined_rate"] == {"value": 0.25, "n": 4, "numerator": 1}
    assert metrics["abstention.out_of_corpus.refusal_rate"]["n"] == 1  # mr-tagged is unspecified
    # The answerable population: three cases declare a source; one is BM25-only.
    offered = metrics["answerability.offered_rate"]
    supported = metrics["answerability.supported_rate"]
    unsupported = metrics["answerability.unsupported_offer_rate"]
    false_refusal = metrics["answerability.false_refusal_rate"]
    assert offered["n"] == supported["n"] == false_refusal["n"] == 3
    assert supported["numerator"] + unsupported["numerator"] + false_refusal["numerator"] == 3
    assert false_refusal["numerator"] == 1
    assert metrics["answerability.refused_with_expected_present"] == {"value": 1.0, "n": 1}
    cases = {case["case_id"]: case for case in semantic_vec.doc["cases"]}
    assert cases["late-fee"]["answerability"] == {"verdict": "abstained", "supported": True}
    assert "answerability" not in cases["no-expectation"]


def test_tables_carry_both_populations(semantic_vec: taguru_eval.Run) -> None:
    hits = semantic_vec.tables.hits
    assert set(hits.get_column("population")) == {"eval", "must_refuse"}
    probes = semantic_vec.tables.calls.filter(pl.col("population") == "must_refuse")
    assert probes.get_column("case_id").unique(maintain_order=True).to_list() == [
        case["case_id"] for case in MUST_REFUSE
    ]
    assert set(probes.get_column("lane")) == {"passage", "structural"}
    assert semantic_vec.tables.refusal_lanes.height == len(MUST_REFUSE)
    # Read back from the store and from the artifact: the same verdicts.
    assert semantic_vec.path is not None
    stored = taguru_eval.load_run(semantic_vec.path)
    assert stored.refusal_cases.equals(semantic_vec.refusal_cases)
    from_json = taguru_eval.load_run(stored_artifact(semantic_vec.path))
    columns = ["case_id", "kind", "verdict", "reason", "passage_verdict", "structural_verdict"]
    assert from_json.refusal_cases.select(columns).equals(
        semantic_vec.refusal_cases.select(columns)
    )
    assert from_json.cases.select("case_id", "offered", "supported").equals(
        semantic_vec.cases.select("case_id", "offered", "supported")
    )


# ------------------------------------------------------------------ a plain run is untouched


def test_a_plain_run_is_byte_identical_to_the_same_run_without_the_flag(
    work: Path, server: str, tmp_path: Path
) -> None:
    """One network phase, finished with and without the must-refuse file: the
    additive keys removed, the flagged artifact is the plain one byte for byte,
    and the plain one has exactly taguru's keys (31 metrics)."""
    plain_options = RunOptions(
        eval_path=str(work / "eval.jsonl"),
        context="lease-vec",
        url=server,
        out=str(tmp_path / "plain.json"),
        no_store=True,
    )
    flag_options = replace(
        plain_options, must_refuse=str(work / "mr.jsonl"), out=str(tmp_path / "flag.json")
    )
    flagged = prepare_run(flag_options, {}, stderr=lambda _line: None)
    plain = prepare_run(plain_options, {}, stderr=lambda _line: None)
    quiet = Console(stdout=io.StringIO(), stderr=io.StringIO())
    blocks = LaneBlocks()
    outputs: list[LaneOutput] = []

    def finished(output: LaneOutput) -> None:
        outputs.append(output)
        blocks.add(output)

    phase = asyncio.run(network_phase(flagged, console=quiet, on_finished=finished))
    # The eval cases ran first and exactly as without the flag.
    ordered = sorted(outputs, key=lambda output: output["case_index"])
    assert [output["case_id"] for output in ordered] == [case["case_id"] for case in EVAL]
    with_flag = finish_run(flagged, phase, quiet, blocks).doc
    without = finish_run(plain, replace(phase, refusal_outputs=[]), quiet, blocks).doc
    stripped = json.loads(dumps(with_flag))
    stripped.pop("abstention")
    stripped["inputs"].pop("must_refuse")
    stripped["inputs"]["out"] = without["inputs"]["out"]
    for name in ABSTENTION_METRICS:
        stripped["definitions"].pop(name)
        stripped["metrics"].pop(name)
    for case in stripped["cases"]:
        case.pop("answerability", None)
    stripped["generated_at"] = without["generated_at"]
    assert dumps(stripped) == dumps(without)
    assert set(without["definitions"]) == set(without["metrics"]) == set(CATALOG)
    assert "abstention" not in without and "must_refuse" not in without["inputs"]
    assert all("answerability" not in case for case in without["cases"])


# ------------------------------------------------------------------ the gate


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = main(["run", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _gate_args(work: Path, url: str, context: str, mr: str, out: str) -> list[str]:
    return [
        *run_args(work / "eval.jsonl", context, url),
        "--must-refuse", str(work / f"{mr}.jsonl"), "--thresholds", str(work / "gate.json"),
        "--out", str(work / out), "--no-store",
    ]  # fmt: skip


def test_the_gate_fails_when_a_must_refuse_question_surfaces_vector_evidence(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, _gate_args(work, server, "lease-vec", "surfacing", "g1.json"))
    assert code == 3
    assert (
        "    [aggregate] abstention.out_of_corpus.refusal_rate: 0.000000 < min 1.000000"
        " — cases: mr-deposit-refund" in out.splitlines()
    )
    assert (
        "taguru: evaluate: must-refuse case 'mr-deposit-refund' (out_of_corpus) surfaced by "
        "passage: corpus/deposit.md paragraph 1 (bm25 rank 1, vector rank 1)" in err.splitlines()
    )
    doc = json.loads((work / "g1.json").read_text("utf-8"))
    violation = doc["thresholds"]["violations"][0]
    assert violation["reason"].endswith(" — cases: mr-deposit-refund")


def test_the_gate_passes_when_nothing_cleared_the_floor(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, _gate_args(work, server, "lease-vec", "clean", "g2.json"))
    assert code == 0, out
    assert "  thresholds: PASS" in out
    assert (
        "taguru: evaluate: must-refuse: 1 case(s), rule semantic, floor 0.35 — 1 abstained, "
        "0 surfaced, 0 undetermined, 0 failed" in err.splitlines()
    )


def test_without_a_vector_lane_the_same_gate_cannot_pass(
    work: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _cli(capsys, _gate_args(work, server, "lease", "clean", "g3.json"))
    assert code == 3
    assert (
        "    [aggregate] abstention.out_of_corpus.refusal_rate: no samples for this metric (n=0)"
        in out.splitlines()
    )


# ------------------------------------------------------------------ exit 2 before any network


def test_bad_inputs_exit_2_before_any_network(
    work: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    nowhere = "http://127.0.0.1:9"  # a network call would be exit 1, not 2
    clash = write_jsonl(
        tmp_path / "clash.jsonl",
        {"taguru_eval_must_refuse": 1},
        [{"case_id": "late-fee", "query": "q"}],
    )
    base = [*run_args(work / "eval.jsonl", "lease", nowhere)]
    out_file = tmp_path / "never.json"
    code, _out, err = _cli(capsys, [*base, "--must-refuse", clash, "--out", str(out_file)])
    assert code == 2
    assert err == (
        f"taguru: evaluate: {clash}: line 2: case_id 'late-fee' is also an eval.jsonl case_id "
        "(the must-refuse and eval case_ids must be disjoint)\n"
    )
    code, _out, err = _cli(
        capsys, [*base, "--thresholds", str(work / "gate.json"), "--out", str(out_file)]
    )
    assert code == 2
    assert err == (
        f"taguru: evaluate: {work / 'gate.json'}: aggregate: metric name "
        "'abstention.out_of_corpus.refusal_rate' is measured only with --must-refuse\n"
    )
    code, _out, err = _cli(capsys, [*base, "--refusal-rule", "any"])
    assert code == 2 and "--refusal-rule requires --must-refuse" in err
    assert not out_file.exists()


# ------------------------------------------------------------------ compare


def test_compare_lists_flips_in_its_own_header_block(
    semantic_vec: taguru_eval.Run, any_vec: taguru_eval.Run
) -> None:
    assert semantic_vec.path is not None and any_vec.path is not None
    from_store = compare(semantic_vec.path, any_vec.path)
    from_json = compare(stored_artifact(semantic_vec.path), stored_artifact(any_vec.path))
    for comparison in (from_store, from_json):
        assert comparison.abstention is not None
        block = comparison.abstention.to_json()
        assert block["changes"] == [
            {
                "case_id": "mr-pets",
                "kind": "adjacent",
                "base": "abstained",
                "head": "surfaced",
                "direction": "regressed",
            },
            {
                "case_id": "mr-tagged",
                "kind": "unspecified",
                "base": "undetermined",
                "head": "undetermined",
                "direction": "not_comparable",
            },
        ]
        assert block["counts"] == {
            "improved": 0,
            "regressed": 1,
            "unchanged": 2,
            "added": 0,
            "removed": 0,
            "not_comparable": 1,
        }
        assert block["warnings"] == ["refusal rule differs: BASE 'semantic' vs HEAD 'any'"]
        # The per-case lines stay eval.jsonl cases only.
        records = comparison.records()
        assert {record["case_id"] for record in records} <= {case["case_id"] for case in EVAL}
    assert from_store.header("t")["abstention"] == from_json.header("t")["abstention"]


def test_compare_against_a_base_without_the_block(semantic_vec: taguru_eval.Run) -> None:
    base = json.loads(json.dumps(dict(semantic_vec.doc)))
    for key in ("abstention",):
        base.pop(key)
    base["inputs"].pop("must_refuse")
    base["inputs"].pop("concurrency")  # as taguru writes it
    comparison = compare(base, semantic_vec.doc)
    assert comparison.abstention is not None
    block = comparison.abstention.to_json()
    assert block["counts"]["not_comparable"] == len(MUST_REFUSE)
    assert {change["direction"] for change in block["changes"]} == {"not_comparable"}
    assert [change["base"] for change in block["changes"]] == [None] * len(MUST_REFUSE)
    assert block["warnings"] == [
        "BASE has no abstention block (a run without --must-refuse, or a file taguru wrote): "
        "the 4 must-refuse case(s) of HEAD are not comparable"
    ]
    # Neither side with the block: no header block at all.
    assert compare(base, base).header("t").get("abstention") is None


def test_compare_counts_a_repeated_must_refuse_case_once_and_warns(
    semantic_vec: taguru_eval.Run, any_vec: taguru_eval.Run
) -> None:
    base = json.loads(json.dumps(dict(semantic_vec.doc)))
    cases = base["abstention"]["cases"]
    (pets,) = [case for case in cases if case["case_id"] == "mr-pets"]
    earlier = {**pets, "verdict": "surfaced"}
    cases.insert(0, earlier)  # an edited document: the last occurrence is the one that counts
    cases.append(json.loads(json.dumps(pets)))
    block = compare(base, any_vec.doc).abstention
    assert block is not None
    expected = compare(semantic_vec.doc, any_vec.doc).abstention
    assert expected is not None
    assert block.to_json()["counts"] == expected.to_json()["counts"]
    assert block.to_json()["changes"] == expected.to_json()["changes"]
    assert block.warnings == (
        "BASE: duplicate must-refuse case_id 'mr-pets' — using the last occurrence",
        *expected.warnings,
    )


def test_the_compare_command_prints_the_flips_and_writes_the_block(
    semantic_vec: taguru_eval.Run,
    any_vec: taguru_eval.Run,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert semantic_vec.path is not None and any_vec.path is not None
    out = tmp_path / "changes.jsonl"
    code = main(["compare", str(semantic_vec.path), str(any_vec.path), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert (
        "taguru: evaluate: abstention: refusal rule differs: BASE 'semantic' vs HEAD 'any'"
        in captured.err.splitlines()
    )
    assert "  must-refuse: 0 improved, 1 regressed, 2 unchanged, 0 added, 0 removed, " in (
        captured.out
    )
    assert "    regressed: mr-pets (adjacent) abstained -> surfaced" in captured.out.splitlines()
    header = json.loads(out.read_text("utf-8").splitlines()[0])
    keys = list(header)
    assert keys.index("abstention") == keys.index("metrics") + 1
    assert header["abstention"]["counts"]["regressed"] == 1


def test_the_library_refuses_a_rule_without_a_file(tmp_path: Path) -> None:
    with pytest.raises(taguru_eval.UsageError, match="--refusal-rule requires --must-refuse"):
        taguru_eval.run(tmp_path / "missing.jsonl", "c", refusal_rule="any", no_store=True)
    with pytest.raises(taguru_eval.UsageError, match="must be 'semantic' or 'any'"):
        taguru_eval.run(tmp_path / "e.jsonl", "c", must_refuse="m", refusal_rule="strict")


def test_the_trec_export_keeps_to_eval_cases(semantic_vec: taguru_eval.Run, work: Path) -> None:
    qrels, run_map = taguru_eval.to_ir_measures(semantic_vec, work / "eval.jsonl")
    assert set(run_map) <= {case["case_id"] for case in EVAL}
    assert not any(case_id.startswith("mr-") for case_id in run_map)
    assert set(qrels) <= set(run_map) | {"no-expectation"}
