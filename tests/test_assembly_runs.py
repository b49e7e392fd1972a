"""``--assembly`` end to end over real loopback HTTP (EVALUATE.md §9.9, §7; HTTP.md §8).

The reference server serves small corpus folders in a background thread
(``running_server``); the CLI runs in-process. The §9.9 corpus: kura-a.md and
kura-b.md mention 青嶺酒造, kura-c.md does not but is the attribution of the
association 青嶺酒造 —杜氏→ 高瀬, unrelated.md is filler.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import DATA, EXAMPLES
from support.refserver import SMOKE_ASSOCIATIONS, SMOKE_PASSAGES
from support.run import run_args, strip_latency, write_eval, write_files

import taguru_eval.api as api
from taguru_eval.analyst import ingest
from taguru_eval.cli.main import main
from taguru_eval.store import scan_runs
from taguru_refserver.rerank import FAILURE_PROBE_PREFIX, MODEL
from taguru_refserver.serve import running_server

KURA = {
    "kura/corpus/kura-a.md": "青嶺酒造の蔵は雲居県霧沢町にある。\n",
    "kura/corpus/kura-b.md": "青嶺酒造は明治に創業した老舗である。\n",
    "kura/corpus/kura-c.md": "高瀬は南部杜氏の流れをくむ職人である。\n",
    "kura/corpus/unrelated.md": "梅雨明けの空に入道雲が広がった。\n",
    "kura/associations.jsonl": json.dumps(
        {
            "subject": "青嶺酒造",
            "label": "杜氏",
            "object": "高瀬",
            "weight": 1.0,
            "source": "corpus/kura-c.md",
            "paragraph": 0,
        },
        ensure_ascii=False,
    )
    + "\n",
    # HTTP.md §10.1's smoke corpus (the seed of contract/examples/evidence_evaluate_assembly.json).
    "sake/corpus/brewery.md": SMOKE_PASSAGES["passages"]["corpus/brewery.md"] + "\n",
    "sake/associations.jsonl": json.dumps(SMOKE_ASSOCIATIONS[0], ensure_ascii=False) + "\n",
    # Passages only, each its own source and wording: an evidence package of
    # this corpus holds exactly the search hits, in search order.
    "plain/corpus/p1.md": "蔵開きでは新酒の試飲と仕込み蔵の見学ができる。\n",
    "plain/corpus/p2.md": "蔵開きの日は駅から臨時の送迎バスが出ている。\n",
    "plain/corpus/p3.md": "蔵開きの限定酒は毎年すぐに売り切れてしまう。\n",
    "plain/corpus/p4.md": "雨の蔵開きでも甘酒の振る舞いは続けられた。\n",
    "plain/corpus/p5.md": "蔵開きに合わせて地元の農家が野菜を並べる。\n",
}

KURA_CASE = {
    "case_id": "kura",
    "query": "青嶺酒造",
    "cues": ["青嶺酒造"],
    "expected_sources": [
        {"source": "corpus/kura-a.md", "relevance": 3},
        {"source": "corpus/kura-b.md", "relevance": 2},
    ],
    "expected_citations": [{"source": "corpus/kura-a.md", "paragraph": 0}],
}
SMOKE_CASE = {"case_id": "smoke", "query": "青嶺", "cues": ["青嶺"], "options": {"limit": 10}}
PLAIN_CASE = {"case_id": "plain", "query": "蔵開き"}
BUDGET = ["--max-items", "3", "--max-bytes", "4096", "--max-tokens", "200"]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_files(tmp_path_factory.mktemp("assembly-corpus"), KURA)


@pytest.fixture(scope="module")
def server(corpus_dir: Path) -> Iterator[str]:
    with running_server(corpus_dir) as url:
        yield url


@pytest.fixture(scope="module")
def reranking_server(corpus_dir: Path) -> Iterator[str]:
    with running_server(corpus_dir, reranker=True) as url:
        yield url


class Ran:
    """One CLI run: exit code, stdout, stderr and the artifact it wrote."""

    def __init__(self, code: int, out: str, err: str, path: Path) -> None:
        self.code, self.out, self.err, self.path = code, out, err, path
        self.doc: dict[str, Any] = (
            json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        )

    @property
    def case(self) -> dict[str, Any]:
        first: dict[str, Any] = self.doc["cases"][0]
        return first


def run(
    capsys: pytest.CaptureFixture[str],
    url: str,
    work: Path,
    *flags: str,
    cases: list[dict[str, Any]] | None = None,
    context: str = "kura",
    name: str = "evaluation.json",
    store: bool = False,
) -> Ran:
    eval_path = write_eval(work / f"{name}.eval.jsonl", cases or [KURA_CASE], "assembly")
    out = work / name
    keep = ["--store", str(work / "runs")] if store else ["--no-store"]
    args = [*run_args(eval_path, context, url), "--out", str(out)]
    code = main([*args, *keep, *flags])
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err, out)


def locators(block: dict[str, Any]) -> list[tuple[str, int]]:
    return [(hit["source"], hit["paragraph"]) for hit in block["passage"]["hits"]]


# --------------------------------------------------------------------------- EVALUATE.md §9.9


def test_105_both_modes_record_the_same_budget(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = run(capsys, server, tmp_path, *BUDGET, name="base.json")
    assembly = run(capsys, server, tmp_path, *BUDGET, "--assembly", name="asm.json")
    assert (baseline.code, assembly.code) == (0, 0)
    assert baseline.doc["inputs"]["mode"] == "baseline"
    assert assembly.doc["inputs"]["mode"] == "assembly"
    limits = {"max_items": 3, "max_bytes": 4096, "max_tokens": 200}
    for ran in (baseline, assembly):
        assert ran.doc["inputs"]["budget"] == limits
        assert ran.case["budget"]["limits"] == limits
        assert "rerank" not in ran.doc["inputs"]
    assert "evidence" not in baseline.case
    assert assembly.case["evidence"]["outcome"] == "assembled"
    assert "plan" not in assembly.case["passage"]
    # The association alone costs 191 tokens: the two passages no longer fit.
    assert assembly.case["budget"] == {
        "items_used": 1,
        "bytes_used": 728,
        "tokens_used": 191,
        "limits": limits,
        "omitted_total": 2,
    }
    assert assembly.case["evidence"]["omitted_by_reason"] == {"budget_exceeded": 2}


def test_106_without_budget_flags(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = run(capsys, server, tmp_path, name="base.json")
    assembly = run(capsys, server, tmp_path, "--assembly", name="asm.json")
    assert "budget" not in baseline.doc["inputs"] and "budget" not in baseline.case
    assert not any(line.startswith("  budget over") for line in baseline.out.splitlines())
    defaults = {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000}
    assert assembly.doc["inputs"]["budget"] == defaults
    assert assembly.case["budget"]["limits"] == defaults
    assert assembly.doc["metrics"]["budget.items_used"]["n"] == 1
    assert (
        "  budget over 1 case(s): mean 3.0 item(s) / 1419.0 byte(s) / 373.0 token(s) used, "
        "budget-omitted rate 0.000"
    ) in assembly.out.splitlines()


def test_107_assembly_reaches_the_attributed_source(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = run(capsys, server, tmp_path, name="base.json")
    assembly = run(capsys, server, tmp_path, "--assembly", name="asm.json")
    assert baseline.case["diversity_sources"] <= 2
    assert assembly.case["diversity_sources"] == 3
    assert assembly.doc["metrics"]["diversity.sources"]["n"] == 1
    # The association's citation ref comes first, then the two passages.
    assert locators(assembly.case) == [
        ("corpus/kura-c.md", 0),
        ("corpus/kura-a.md", 0),
        ("corpus/kura-b.md", 0),
    ]
    assert assembly.case["recall"]["recall_at_k"] == 1.0
    assert assembly.case["recall"]["mrr"] == 0.5
    assert assembly.case["citations"]["checks"][0]["served"] is True
    items = assembly.case["evidence"]["items"]
    assert [item["kind"] for item in items] == ["association", "passage", "passage"]
    assert "source" not in items[0]
    assert items[0]["citation_refs"] == [{"source": "corpus/kura-c.md", "paragraph": 0}]
    assert assembly.doc["metrics"]["latency.evidence_ms"]["n"] == 1
    assert assembly.doc["metrics"]["latency.passage_ms"]["n"] == 1
    assert baseline.doc["metrics"]["latency.evidence_ms"]["n"] == 0
    assert (
        "  diversity over 1 case(s): mean 3.0 distinct source(s) in admitted evidence"
        in assembly.out.splitlines()
    )


def test_108_the_gate_reads_assembly_metrics(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = tmp_path / "thresholds.json"
    bounds = {
        "recall.recall_at_k": {"min": 0.5},
        "citations.recall": {"min": 1.0},
        "diversity.sources": {"min": 3},
    }
    thresholds.write_text(
        json.dumps({"taguru_evaluate_thresholds": 1, "aggregate": bounds}), encoding="utf-8"
    )
    gated = ["--thresholds", str(thresholds)]
    assembly = run(capsys, server, tmp_path, *gated, "--assembly", name="asm.json")
    baseline = run(capsys, server, tmp_path, *gated, name="base.json")
    assert assembly.code == 0 and assembly.doc["thresholds"]["passed"] is True
    assert baseline.code == 3 and baseline.doc["thresholds"]["passed"] is False
    [violation] = baseline.doc["thresholds"]["violations"]
    assert violation["metric"] == "diversity.sources" and violation["bound"] == "min"


def test_109_two_identical_assembly_runs_agree(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = run(capsys, server, tmp_path, "--assembly", "--max-items", "3", name="one.json")
    second = run(capsys, server, tmp_path, "--assembly", "--max-items", "3", name="two.json")
    for key in ("cases", "metrics"):
        assert strip_latency(first.doc[key]) == strip_latency(second.doc[key])


def test_110_one_item(server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = run(capsys, server, tmp_path, "--max-items", "1", name="base.json")
    assembly = run(capsys, server, tmp_path, "--max-items", "1", "--assembly", name="asm.json")
    for ran in (baseline, assembly):
        assert ran.case["budget"]["items_used"] == 1
        assert ran.case["budget"]["omitted_total"] >= 1
    assert assembly.case["evidence"]["omitted_by_reason"] == {"budget_exceeded": 2}
    # budget-only omissions over considered candidates: 2 of 3 and 1 of 2
    assert assembly.doc["metrics"]["budget.omitted_rate"] == {
        "value": 2 / 3,
        "n": 3,
        "numerator": 2,
    }
    assert baseline.doc["metrics"]["budget.omitted_rate"] == {"value": 0.5, "n": 2, "numerator": 1}


def test_111_a_reranker_that_cannot_run_degrades(
    reranking_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = f"{FAILURE_PROBE_PREFIX}timeout"
    ran = run(capsys, reranking_server, tmp_path, "--assembly", "--rerank", model)
    assert ran.code == 0
    assert ran.doc["inputs"]["rerank"] == model
    assert list(ran.doc["inputs"])[-3:] == ["budget", "rerank", "concurrency"]
    assert ran.case["evidence"]["reranker"] == {
        "configured": True,
        "ran": False,
        "reason": "timeout",
    }
    assert ran.doc["metrics"]["rerank.ran"] == {"value": 0.0, "n": 1, "numerator": 0}
    assert f"  rerank '{model}' over 1 attempted case(s): 0 ran, 1 degraded" in ran.out.splitlines()


def test_a_configured_reranker_that_runs(
    reranking_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(capsys, reranking_server, tmp_path, "--assembly", "--rerank", MODEL)
    assert ran.case["evidence"]["reranker"] == {"configured": True, "ran": True, "model": MODEL}
    assert ran.doc["metrics"]["rerank.ran"] == {"value": 1.0, "n": 1, "numerator": 1}
    assert f"  rerank '{MODEL}' over 1 attempted case(s): 1 ran, 0 degraded" in ran.out.splitlines()


def test_49_a_server_reranker_is_not_a_rerank_attempt(
    reranking_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(capsys, reranking_server, tmp_path, "--assembly")
    assert ran.case["evidence"]["reranker"] == {"configured": True, "ran": False}
    assert ran.doc["metrics"]["rerank.ran"] == {"value": None, "n": 0, "numerator": None}
    assert not any(line.startswith("  rerank ") for line in ran.out.splitlines())


def test_112_no_reranker_and_no_provider(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(capsys, server, tmp_path, "--assembly")
    assert ran.doc["corpus"]["embeddings"] == {"provider_model": None}
    assert ran.case["evidence"]["reranker"] == {"configured": False, "ran": False}


def test_113_compare_warns_that_the_budgets_differ(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = run(capsys, server, tmp_path, name="base.json")
    assembly = run(capsys, server, tmp_path, "--assembly", "--max-items", "2", name="asm.json")
    code = main(["compare", str(baseline.path), str(assembly.path), "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 0
    assert (
        "taguru: evaluate: budget differs: BASE none (untruncated baseline) vs HEAD "
        "max_items=2 max_bytes=65536 max_tokens=4000 — not an equal-budget comparison"
    ) in err.splitlines()


# --------------------------------------------------------------------------- the assembly example


def test_the_recorded_assembly_example_end_to_end(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = json.loads(
        (EXAMPLES / "evidence_evaluate_assembly.json").read_text(encoding="utf-8")
    )["response"]["result"]
    ran = run(capsys, server, tmp_path, "--assembly", cases=[SMOKE_CASE], context="sake")
    assert ran.case["budget"] == {**example["budget"], "omitted_total": 0}
    assert ran.case["evidence"]["items"] == [
        {
            "candidate_id": "association\u0000青嶺酒造\u0000醸造元\u0000蔵元",
            "kind": "association",
            "fused_rank": 1,
            "citation_refs": [{"source": "corpus/brewery.md", "paragraph": 0}],
        },
        {
            "candidate_id": "passage\u0000sake\u0000corpus/brewery.md\u00000",
            "kind": "passage",
            "fused_rank": 2,
            "source": "corpus/brewery.md",
            "paragraph": 0,
            "citation_refs": [],
        },
    ]
    assert ran.case["evidence"]["selection"] == example["plan"]["selection"]
    assert locators(ran.case) == [("corpus/brewery.md", 0), ("corpus/brewery.md", 0)]
    text = ran.path.read_text(encoding="utf-8")
    assert "青嶺は青嶺酒造が造る銘柄です" not in text  # no body text, ever
    assert '"candidate_id": "passage\\u0000sake\\u0000corpus/brewery.md\\u00000"' in text
    # HTTP.md §8 / examples README: the same hit as a one-hit baseline page.
    baseline = run(
        capsys, server, tmp_path, "--max-items", "40", cases=[SMOKE_CASE], context="sake"
    )
    assert baseline.case["budget"]["bytes_used"] == 345
    assert baseline.case["budget"]["tokens_used"] == 90


def test_a_tagged_case_runs_with_a_recorded_warning(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = dict(KURA_CASE, options={"tags": ["蔵"], "since": 1})
    ran = run(capsys, server, tmp_path, "--assembly", cases=[tagged])
    warning = (
        "case 'kura': options.tags/since/until are not applied under --assembly "
        "(POST /contexts/{name}/evidence has no such request fields)"
    )
    assert ran.code == 0
    assert ran.doc["warnings"] == [warning]
    assert f"taguru: evaluate: {warning}" in ran.err.splitlines()
    assert ran.case["evidence"]["outcome"] == "assembled"  # the case still ran


# --------------------------------------------------------------------------- equal budgets


def test_equal_flags_spend_the_same_budget_on_the_same_passages(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A passage-only package is the search hits, so the client's truncation of
    the baseline hits must spend exactly what the server's assembly spends."""
    for flags in (["--max-bytes", "1000"], ["--max-tokens", "200"], ["--max-items", "2"]):
        baseline = run(capsys, server, tmp_path, *flags, cases=[PLAIN_CASE], context="plain")
        assembly = run(
            capsys, server, tmp_path, *flags, "--assembly", cases=[PLAIN_CASE], context="plain"
        )
        assert baseline.case["budget"]["omitted_total"] >= 1, flags  # the budget bit
        assert assembly.case["evidence"]["items"], flags
        assert baseline.case["budget"] == assembly.case["budget"], flags
        assert locators(baseline.case) == locators(assembly.case), flags


# --------------------------------------------------------------------------- tables and store


def test_evidence_rows_in_the_store_and_read_back(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = run(capsys, server, tmp_path, "--assembly", "--max-items", "2", store=True)
    rows = scan_runs(tmp_path / "runs", "evidence_items").collect().sort("item_index")
    assert rows["admitted"].to_list() == [True, True, False]
    assert rows["kind"].to_list() == ["association", "passage", "passage"]
    assert rows["omitted_reason"].to_list() == [None, None, "budget_exceeded"]
    assert rows["lane_ranks"][0].to_list() == [{"lane": "graph_activate", "rank": 1}]
    assert rows["citation_refs"][0].to_list() == [{"source": "corpus/kura-c.md", "paragraph": 0}]
    assert rows["source"].to_list()[:2] == [None, "corpus/kura-a.md"]
    calls = scan_runs(tmp_path / "runs", "calls").collect()
    evidence = calls.filter(pl.col("lane") == "evidence")
    assert evidence.select("endpoint", "outcome", "http_status").rows() == [
        ("POST /contexts/{name}/evidence", "assembled", 200)
    ]
    assert calls.filter(pl.col("lane") == "passage").height == 0

    # The artifact keeps the admitted items; lane ranks and omissions stay in the store.
    back = api.load_run(ran.path).tables.evidence_items
    columns = [name for name in back.columns if name not in ("run_id", "lane_ranks")]
    stored = rows.filter(pl.col("admitted")).select(columns)
    assert back.select(columns).equals(stored)
    assert back["lane_ranks"].null_count() == back.height
    imported = ingest.ingest(ran.path, tmp_path / "imported")
    again = pl.read_parquet(imported.path / "evidence_items.parquet")
    assert again.select(columns).equals(stored)
    reread = pl.read_parquet(imported.path / "calls.parquet").filter(pl.col("lane") == "evidence")
    assert reread["outcome"].to_list() == ["assembled"]


def test_a_baseline_run_stores_an_empty_evidence_table(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, server, tmp_path, store=True)
    [path] = list((tmp_path / "runs").glob("context=kura/run=*/evidence_items.parquet"))
    assert pl.read_parquet(path).height == 0


# --------------------------------------------------------------------------- the demo pair


def test_the_demo_pair_compares_both_modes_at_one_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", "--assembly", "--out", str(tmp_path / "pair"), "--max-tokens", "1000"])
    out = capsys.readouterr().out
    assert code == 0
    base = tmp_path / "pair" / "evaluation-baseline.json"
    head = tmp_path / "pair" / "evaluation-assembly.json"
    docs = [json.loads(path.read_text(encoding="utf-8")) for path in (base, head)]
    assert [doc["inputs"]["mode"] for doc in docs] == ["baseline", "assembly"]
    assert docs[0]["inputs"]["budget"] == docs[1]["inputs"]["budget"]
    assert len(docs[1]["cases"]) == 16
    lines = out.splitlines()
    title = lines.index(
        "baseline vs --assembly at one budget (max_items 40, max_bytes 65536, max_tokens 1000):"
    )
    assert lines[title + 1].split() == ["metric", "baseline", "assembly", "delta"]
    assert any(line.split()[0] == "diversity.sources" for line in lines[title + 3 :] if line)
    assert f"the same comparison again: python -m taguru_eval compare {base} {head} --out " in out

    changes = tmp_path / "changes.jsonl"
    assert main(["compare", str(base), str(head), "--out", str(changes)]) == 0
    captured = capsys.readouterr()
    assert "budget differs" not in captured.err
    header = json.loads(changes.read_text(encoding="utf-8").splitlines()[0])
    assert "warnings" not in header
    pair = (tmp_path / "pair" / "changes.jsonl").read_text(encoding="utf-8").splitlines()
    assert changes.read_text(encoding="utf-8").splitlines()[1:] == pair[1:]


def test_the_report_shows_mode_and_budget_of_a_pair(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = run(capsys, server, tmp_path, *BUDGET, name="base.json")
    assembly = run(capsys, server, tmp_path, *BUDGET, "--assembly", "--rerank", "m", name="a.json")
    page_path = tmp_path / "report.html"
    args = [str(assembly.path), "--base", str(baseline.path), "-o", str(page_path)]
    assert main(["report", *args]) == 0
    page = page_path.read_text(encoding="utf-8")
    budget = "max_items=3 max_bytes=4096 max_tokens=200"
    assert "<th>mode</th><td>assembly</td>" in page
    assert f"<th>budget</th><td>{budget}</td>" in page
    assert "<th>rerank</th><td>m</td>" in page
    assert (
        f"<tr><td>BASE</td><td>baseline</td><td>{budget}</td></tr>"
        f"<tr><td>RUN</td><td>assembly</td><td>{budget}</td></tr>"
    ) in page


def test_the_demo_data_runs_in_assembly_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(DATA) as url:
        ran = run(
            capsys,
            url,
            tmp_path,
            "--assembly",
            cases=[
                json.loads(line)
                for line in (DATA / "sake" / "eval.jsonl")
                .read_text(encoding="utf-8")
                .splitlines()[1:]
            ],
            context="sake",
        )
    assert ran.code == 0
    assert {case["evidence"]["outcome"] for case in ran.doc["cases"]} == {"assembled"}
    assert len(ran.doc["warnings"]) == 3  # the three cases with tags/since/until
    assert set(ran.doc["metrics"]) == set(ran.doc["definitions"]) and len(ran.doc["metrics"]) == 31


def test_the_library_runs_assembly_too(server: str, tmp_path: Path) -> None:
    from taguru_eval.errors import UsageError

    eval_path = write_eval(tmp_path / "eval.jsonl", [KURA_CASE])
    out = tmp_path / "evaluation.json"
    ran = api.run(
        eval_path,
        "kura",
        url=server,
        out=out,
        assembly=True,
        max_items=2,
        rerank="m",
        env={},
        no_store=True,
    )
    assert ran.exit_code == 0
    assert ran.doc["inputs"]["mode"] == "assembly" and ran.doc["inputs"]["rerank"] == "m"
    assert ran.doc["inputs"]["budget"]["max_items"] == 2
    assert ran.table("evidence_items").height == 3  # 2 admitted, 1 omitted
    # The library refuses what the command line refuses, in its words (§2.2).
    with pytest.raises(UsageError, match=r"^--rerank requires --assembly$"):
        api.run(eval_path, "kura", url=server, out=out, rerank="m", env={}, no_store=True)
    with pytest.raises(UsageError, match=r"^--max-tokens needs a positive integer$"):
        api.run(eval_path, "kura", url=server, out=out, max_tokens=0, env={}, no_store=True)
