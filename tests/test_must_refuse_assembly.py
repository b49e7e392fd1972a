"""The evidence probe (``--assembly``, ABSTENTION.md §3.4–§3.5) end to end over loopback.

The same lease corpus as test_must_refuse_e2e, evaluated with ``--assembly``:
the must-refuse probes send exactly the evidence request the eval cases send,
and their verdicts read the package — admitted items, their lanes, and the
budget's ``omitted_total`` — never a score.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.layouts import stored_artifact
from support.must_refuse import MUST_REFUSE, lease_data

import taguru_eval
from taguru_refserver.serve import running_server


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("must-refuse-assembly")
    lease_data(root)
    return root


@pytest.fixture(scope="module")
def server(work: Path) -> Iterator[str]:
    with running_server(work / "data") as url:
        yield url


def _run(work: Path, url: str, context: str, name: str, **options: Any) -> taguru_eval.Run:
    return taguru_eval.run(
        work / "eval.jsonl",
        context,
        url=url,
        out=work / f"{name}.json",
        store=work / "runs",
        env={},
        must_refuse=work / "mr.jsonl",
        assembly=True,
        **options,
    )


def rows(run: taguru_eval.Run) -> dict[str, tuple[Any, ...]]:
    frame = run.refusal_cases.select("case_id", "verdict", "passage_verdict", "passage_reason")
    return {row[0]: row[1:] for row in frame.iter_rows()}


@pytest.fixture(scope="module")
def vector_run(work: Path, server: str) -> taguru_eval.Run:
    return _run(work, server, "lease-vec", "assembly-vec")


def test_the_evidence_probe_reads_admitted_items_and_their_lanes(
    vector_run: taguru_eval.Run,
) -> None:
    assert rows(vector_run) == {
        "mr-volcano": ("abstained", "abstained", None),
        # BM25-only passages are admitted, but are not vector evidence.
        "mr-pets": ("abstained", "abstained", None),
        # The cue's anchor brings association items: graph evidence surfaces.
        "mr-insurance": ("surfaced", "surfaced", "evidence_graph_item"),
        # Tags cannot be sent under --assembly, so the filtered query is served.
        "mr-tagged": ("surfaced", "surfaced", "evidence_vector_passage"),
    }
    block = vector_run.doc["abstention"]
    entries = {entry["case_id"]: entry for entry in block["cases"]}
    pets = entries["mr-pets"]["evidence"]
    assert "passage" not in entries["mr-pets"]
    assert pets["items_admitted"] == pets["bm25_only_passages"] > 0
    assert (pets["vector_passages"], pets["omitted_total"], pets["budget_hid"]) == (0, 0, False)
    assert all(item["lanes"] == ["passage_bm25"] for item in pets["top"])
    insurance = entries["mr-insurance"]["evidence"]["top"]
    assert insurance[0]["kind"] == "association"
    # A must-refuse filter --assembly cannot send is said, with the assembly caveat.
    assert block["warnings"][0] == (
        "must-refuse case 'mr-tagged': options.tags/since/until are not applied under "
        "--assembly (POST /contexts/{name}/evidence has no such request fields)"
    )
    assert any("recommended in baseline mode" in warning for warning in block["warnings"])
    assert block["vector"]["passage_vectors"] == "ready"


def test_the_probe_rows_join_the_run_tables(vector_run: taguru_eval.Run) -> None:
    calls = vector_run.tables.calls.filter(pl.col("population") == "must_refuse")
    assert set(calls.get_column("lane")) == {"evidence", "structural"}
    items = vector_run.tables.evidence_items
    assert set(items.get_column("population")) == {"eval", "must_refuse"}
    lanes = vector_run.tables.refusal_lanes
    assert set(lanes.get_column("evidence_outcome")) == {"assembled"}
    assert lanes.get_column("omitted_total").to_list() == [0, 0, 0, 0]
    # Read back from evaluation.json: the same verdicts.
    assert vector_run.path is not None
    again = taguru_eval.load_run(stored_artifact(vector_run.path))
    columns = ["case_id", "verdict", "reason", "passage_verdict", "surfaced_by", "hits_served"]
    assert again.refusal_cases.select(columns).equals(vector_run.refusal_cases.select(columns))


def test_answerable_cases_are_judged_by_their_own_package(vector_run: taguru_eval.Run) -> None:
    answerable = {
        case_id: (verdict, reason, supported)
        for case_id, verdict, reason, supported in vector_run.cases.select(
            "case_id", "answerability_verdict", "answerability_reason", "supported"
        ).iter_rows()
    }
    assert answerable["rent-due"] == ("surfaced", "evidence_vector_passage", True)
    assert answerable["late-fee"] == ("abstained", None, True)
    assert answerable["no-expectation"] == (None, None, None)


def test_without_ready_passage_vectors_the_probe_cannot_judge_passages(
    work: Path, server: str
) -> None:
    run = _run(work, server, "lease", "assembly-plain")
    assert rows(run) == {
        "mr-volcano": ("undetermined", "undetermined", "passage_vectors_not_ready"),
        "mr-pets": ("undetermined", "undetermined", "passage_vectors_not_ready"),
        # An association item is evidence whatever the vectors' state.
        "mr-insurance": ("surfaced", "surfaced", "evidence_graph_item"),
        "mr-tagged": ("undetermined", "undetermined", "passage_vectors_not_ready"),
    }
    block = run.doc["abstention"]
    assert block["vector"]["passage_vectors"] == "off"
    assert any("no ready passage vectors" in warning for warning in block["warnings"])


@pytest.mark.parametrize(
    ("rule", "verdict", "reason"),
    [("semantic", "undetermined", "budget_omitted"), ("any", "surfaced", "budget_hid")],
)
def test_a_budget_that_hides_every_candidate_is_not_an_abstention(
    work: Path, server: str, rule: str, verdict: str, reason: str
) -> None:
    """A one-token budget admits nothing and omits everything (the max_items: 0
    case of ABSTENTION.md §2.4): an empty package is abstention only when
    ``omitted_total == 0``."""
    run = _run(work, server, "lease-vec", f"hidden-{rule}", refusal_rule=rule, max_tokens=1)
    pets = run.refusal_cases.filter(pl.col("case_id") == "mr-pets").row(0, named=True)
    assert (pets["verdict"], pets["passage_reason"], pets["hits_served"]) == (verdict, reason, 0)
    entry = next(e for e in run.doc["abstention"]["cases"] if e["case_id"] == "mr-pets")
    assert entry["evidence"]["items_admitted"] == 0
    assert entry["evidence"]["omitted_total"] > 0 and entry["evidence"]["budget_hid"] is True
    # The volcano question has no candidate at all: an empty pool is an abstention.
    volcano = run.refusal_cases.filter(pl.col("case_id") == "mr-volcano").row(0, named=True)
    assert volcano["verdict"] == "abstained"
    assert len(run.refusal_cases) == len(MUST_REFUSE)
