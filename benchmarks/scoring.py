"""Benchmark recall@10 / MRR / nDCG scoring against ranx and pytrec_eval.

Builds N synthetic cases (default 1,000,000) x 10 hits with three graded
expectations each (relevance 1-3; two restricted to a single paragraph, the
third a wildcard "any paragraph of this source" in two cases out of three),
pre-built in every tool's own input form:

* ours: the ``hits`` and ``case_lanes`` frames of :class:`taguru_eval.tables.RunTables`
  and the eval set's ``expected`` frame (``tables.schemas.EXPECTED``), scored by
  the §4.2 path ``score_cases`` runs (:func:`taguru_eval.score.match.judged_items`
  then :func:`taguru_eval.score.recall.recall_blocks`)
  plus the three Distributions by :func:`taguru_eval.stats.distribution_frame`
  (one call per metric);
* ranx: ``Qrels`` / ``Run`` built from pandas frames, then
  ``evaluate(qrels, run, ["recall@10", "mrr", "ndcg@10"])`` (per-query scores kept);
* pytrec_eval: dict qrels / run, ``RelevanceEvaluator(qrels,
  {"recall.10", "recip_rank", "ndcg_cut.10"}).evaluate(run)``.

Building inputs is not timed. Each tool runs in its own fresh child process
(inputs built there, then REPEATS timed calls, median reported); the child's
peak resident set (VmHWM) is reset just before the first timed call through
``/proc/self/clear_refs``, so "peak" is the high-water mark while scoring
(inputs included, as they are resident) and "scoring +" is that peak minus the
resident set just before scoring. tracemalloc would miss Polars/Rust and numba
allocations.

The data is drawn so that taguru's definitions (EVALUATE.md §4.2: one credit
per expectation at its first satisfying rank, wildcard sources, linear gain)
and the peers' coincide: hits within a case are distinct sources, so a
wildcard expectation is satisfied by at most one hit and maps to the trec doc
id ``source#paragraph`` of that hit (``source#*`` when it was not retrieved).
The script checks that the per-case values agree; the timings compare
throughput of each tool's own implementation on the same data.

    .venv/bin/python benchmarks/scoring.py [--cases N] [--repeats R] [--only ours,ranx,trec]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from child import print_result, reset_peak, run_child, status_kib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HITS_PER_CASE = 10
EXPECTATIONS_PER_CASE = 3
SOURCE_POOL = 20_000
PARAGRAPHS = 40
SEED = 20_260_101
TOOLS = ("ours", "ranx", "trec")
TOOL_NAMES = {"ours": "taguru_eval", "ranx": "ranx", "trec": "pytrec_eval"}


# ---------------------------------------------------------------------------
# Synthetic data (numpy arrays; every tool's inputs are built from the same arrays)
# ---------------------------------------------------------------------------


def synthetic_arrays(cases: int) -> dict[str, Any]:
    """The run and its expectations as flat numpy arrays (deterministic)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    # Ten distinct sources per case: a random start and stride through the pool.
    start = rng.integers(0, SOURCE_POOL, size=cases)
    stride = rng.integers(1, 97, size=cases)
    ranks = np.arange(HITS_PER_CASE)
    hit_source = (start[:, None] + stride[:, None] * ranks[None, :]) % SOURCE_POOL
    hit_paragraph = rng.integers(0, PARAGRAPHS, size=(cases, HITS_PER_CASE))

    # Three distinct hit ranks per case; each expectation either points at
    # its rank's hit (found) or at a paragraph / source no hit has (missed).
    picked = np.argsort(rng.random((cases, HITS_PER_CASE)), axis=1)[:, :EXPECTATIONS_PER_CASE]
    found = rng.random((cases, EXPECTATIONS_PER_CASE)) < 0.6
    rows = np.arange(cases)[:, None]
    exp_source = hit_source[rows, picked]
    exp_paragraph = hit_paragraph[rows, picked]
    # A missed expectation: same source with an out-of-range paragraph, or
    # (for the wildcard) a source outside the pool.
    wildcard = np.zeros((cases, EXPECTATIONS_PER_CASE), dtype=bool)
    wildcard[:, 2] = (np.arange(cases) % 3) != 0
    missed_source = SOURCE_POOL + (exp_source % 1000)
    exp_source = np.where(~found & wildcard, missed_source, exp_source)
    exp_paragraph = np.where(~found & ~wildcard, PARAGRAPHS + picked, exp_paragraph)
    relevance = rng.integers(1, 4, size=(cases, EXPECTATIONS_PER_CASE))
    return {
        "cases": cases,
        "hit_source": hit_source,
        "hit_paragraph": hit_paragraph,
        "exp_source": exp_source,
        "exp_paragraph": exp_paragraph,
        "exp_found": found,
        "exp_wildcard": wildcard,
        "relevance": relevance,
    }


def _source_names(codes: Any) -> Any:
    import numpy as np

    return np.char.add("corpus/doc", np.char.zfill(codes.astype(str), 5)) + ".md"


def build_ours(arrays: dict[str, Any]) -> tuple[Any, Any]:
    """(eval-set-like object with ``expected``, RunTables) in the scorer's own schemas."""
    from types import SimpleNamespace

    import numpy as np
    import polars as pl

    from taguru_eval.tables.flatten import build_tables
    from taguru_eval.tables.schemas import CASE_LANES, HITS, conform
    from taguru_eval.tables.schemas import EXPECTED as EXPECTED_SCHEMA

    cases = arrays["cases"]
    case_index = np.arange(cases, dtype=np.int64)
    case_ids = pl.Series("case_id", np.char.add("case-", case_index.astype(str)))
    pool = pl.Series(_source_names(np.arange(SOURCE_POOL + 1000)))

    def names(codes: Any) -> pl.Series:
        return pool.gather(pl.Series(codes.ravel()).cast(pl.UInt32))

    hits = pl.DataFrame(
        {
            "run_id": pl.Series(["bench"] * (cases * HITS_PER_CASE)),
            "case_index": np.repeat(case_index, HITS_PER_CASE).astype(np.int32),
            "case_id": case_ids.gather(np.repeat(case_index, HITS_PER_CASE)),
            "rank": np.tile(np.arange(HITS_PER_CASE, dtype=np.int32), cases),
            "source": names(arrays["hit_source"]),
            "paragraph": arrays["hit_paragraph"].ravel().astype(np.int64),
            "score": np.tile((HITS_PER_CASE - np.arange(HITS_PER_CASE)).astype(np.float32), cases),
        }
    )
    wildcard = arrays["exp_wildcard"].ravel()
    expected = pl.DataFrame(
        {
            "case_id": case_ids.gather(np.repeat(case_index, EXPECTATIONS_PER_CASE)),
            "case_index": np.repeat(case_index, EXPECTATIONS_PER_CASE).astype(np.uint32),
            "kind": pl.Series(["source"] * (cases * EXPECTATIONS_PER_CASE)),
            "entry_index": np.tile(np.arange(EXPECTATIONS_PER_CASE, dtype=np.uint32), cases),
            "item_index": np.tile(np.arange(EXPECTATIONS_PER_CASE, dtype=np.uint32), cases),
            "source": names(arrays["exp_source"]),
            "paragraph": pl.Series(arrays["exp_paragraph"].ravel().astype(np.uint32)).scatter(
                np.flatnonzero(wildcard), None
            ),
            "relevance": arrays["relevance"].ravel().astype(np.uint8),
        }
    )
    lanes = pl.DataFrame(
        {
            "run_id": pl.Series(["bench"] * cases),
            "case_index": case_index.astype(np.int32),
            "case_id": case_ids,
            "limit": np.full(cases, HITS_PER_CASE, dtype=np.int64),
            "passage_outcome": pl.Series(["searched"] * cases),
            "passage_latency_ms": np.full(cases, 5, dtype=np.int64),
            "hit_count": np.full(cases, HITS_PER_CASE, dtype=np.int64),
            "structural_ran": np.zeros(cases, dtype=bool),
            "citation_count": np.zeros(cases, dtype=np.int64),
        }
    )
    # Every other table stays empty, whatever tables a run gains later.
    tables = dataclasses.replace(
        build_tables([], "bench"), case_lanes=conform(lanes, CASE_LANES), hits=conform(hits, HITS)
    )
    eval_set = SimpleNamespace(expected=conform(expected, EXPECTED_SCHEMA))
    return eval_set, tables


def _trec_docs(arrays: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(query ids, run doc ids, qrels doc ids) as numpy string arrays."""
    import numpy as np

    cases = arrays["cases"]
    qids = np.char.add("q", np.arange(cases).astype(str))
    hit_docs = np.char.add(
        np.char.add(_source_names(arrays["hit_source"]), "#"), arrays["hit_paragraph"].astype(str)
    )
    # A found wildcard is the one hit of its source; a missed one matches nothing.
    paragraph = np.where(
        arrays["exp_wildcard"] & ~arrays["exp_found"], "*", arrays["exp_paragraph"].astype(str)
    )
    qrel_docs = np.char.add(np.char.add(_source_names(arrays["exp_source"]), "#"), paragraph)
    return qids, hit_docs, qrel_docs


def build_trec(arrays: dict[str, Any]) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """pytrec_eval's dict qrels and run."""
    qids, hit_docs, qrel_docs = _trec_docs(arrays)
    scores = [float(HITS_PER_CASE - rank) for rank in range(HITS_PER_CASE)]
    relevance = arrays["relevance"].tolist()
    qrels = {
        qid: dict(zip(docs, rels, strict=True))
        for qid, docs, rels in zip(qids.tolist(), qrel_docs.tolist(), relevance, strict=True)
    }
    run = {
        qid: dict(zip(docs, scores, strict=True))
        for qid, docs in zip(qids.tolist(), hit_docs.tolist(), strict=True)
    }
    return qrels, run


def build_ranx(arrays: dict[str, Any]) -> tuple[Any, Any]:
    """ranx Qrels / Run built from pandas frames (its fast constructor)."""
    import numpy as np
    import pandas as pd
    from ranx import Qrels, Run

    qids, hit_docs, qrel_docs = _trec_docs(arrays)
    cases = arrays["cases"]
    qrels_df = pd.DataFrame(
        {
            "q_id": np.repeat(qids, EXPECTATIONS_PER_CASE),
            "doc_id": qrel_docs.ravel(),
            "score": arrays["relevance"].ravel().astype(np.int64),
        }
    )
    run_df = pd.DataFrame(
        {
            "q_id": np.repeat(qids, HITS_PER_CASE),
            "doc_id": hit_docs.ravel(),
            "score": np.tile((HITS_PER_CASE - np.arange(HITS_PER_CASE)).astype(float), cases),
        }
    )
    # ranx asserts object-dtype id columns (pandas 3 infers its string dtype).
    for frame in (qrels_df, run_df):
        frame["q_id"] = frame["q_id"].astype(object)
        frame["doc_id"] = frame["doc_id"].astype(object)
    return Qrels.from_df(qrels_df), Run.from_df(run_df)


# ---------------------------------------------------------------------------
# The timed work, one function per tool: (inputs) -> per-case values for the check
# ---------------------------------------------------------------------------


def score_ours(inputs: tuple[Any, Any]) -> tuple[Any, Any]:
    """Per-case recall@k/MRR/nDCG and the three Distributions."""
    import polars as pl

    from taguru_eval.score.match import judged_items
    from taguru_eval.score.recall import recall_blocks, searched_cases
    from taguru_eval.score.stats import distribution_frame

    eval_set, tables = inputs
    items = judged_items(eval_set.expected, searched_cases(tables), tables.hits)
    per_case = recall_blocks(items)
    distributions = pl.concat(
        [
            distribution_frame(per_case, column).select(pl.lit(column).alias("metric"), pl.all())
            for column in ("recall_at_k", "mrr", "ndcg")
        ]
    )
    return per_case, distributions


def score_ranx(inputs: tuple[Any, Any]) -> Any:
    from ranx import evaluate

    qrels, run = inputs
    evaluate(qrels, run, ["recall@10", "mrr", "ndcg@10"], make_comparable=False)
    return run


def score_trec(inputs: tuple[dict[str, dict[str, int]], dict[str, Any]]) -> Any:
    import pytrec_eval

    qrels, run = inputs
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recall.10", "recip_rank", "ndcg_cut.10"})
    return evaluator.evaluate(run)


def _warm_up(tool: str) -> None:
    """Compile numba kernels / load modules on a tiny input before timing."""
    tiny = synthetic_arrays(50)
    if tool == "ours":
        score_ours(build_ours(tiny))
    elif tool == "ranx":
        score_ranx(build_ranx(tiny))
    else:
        score_trec(build_trec(tiny))


# ---------------------------------------------------------------------------
# Agreement check: the definitions coincide on this data, so the values must
# ---------------------------------------------------------------------------


def _means(tool: str, result: Any, inputs: Any) -> dict[str, float]:
    import numpy as np

    if tool == "ours":
        per_case = result[0]
        return {
            "recall@10": float(per_case["recall_at_k"].mean()),
            "mrr": float(per_case["mrr"].mean()),
            "ndcg@10": float(per_case["ndcg"].mean()),
        }
    if tool == "ranx":
        run = result
        return {
            "recall@10": float(np.mean(list(run.scores["recall@10"].values()))),
            "mrr": float(np.mean(list(run.scores["mrr"].values()))),
            "ndcg@10": float(np.mean(list(run.scores["ndcg@10"].values()))),
        }
    values = list(result.values())
    return {
        "recall@10": float(np.mean([v["recall_10"] for v in values])),
        "mrr": float(np.mean([v["recip_rank"] for v in values])),
        "ndcg@10": float(np.mean([v["ndcg_cut_10"] for v in values])),
    }


# ---------------------------------------------------------------------------
# Child process: build, warm up, time, report
# ---------------------------------------------------------------------------


def child(tool: str, cases: int, repeats: int) -> None:
    builders: dict[str, Callable[[dict[str, Any]], Any]] = {
        "ours": build_ours,
        "ranx": build_ranx,
        "trec": build_trec,
    }
    scorers: dict[str, Callable[[Any], Any]] = {
        "ours": score_ours,
        "ranx": score_ranx,
        "trec": score_trec,
    }
    _warm_up(tool)
    started = time.perf_counter()
    inputs = builders[tool](synthetic_arrays(cases))
    build_seconds = time.perf_counter() - started
    resident_before = status_kib("VmRSS")
    peak_reset = reset_peak()
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    result: Any = None
    for _ in range(repeats):
        result = None  # drop the previous result so repeats do not stack up
        started, cpu_started = time.perf_counter(), time.process_time()
        result = scorers[tool](inputs)
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu_started)
    values = {
        "tool": tool,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "build_seconds": build_seconds,
        "resident_before_kib": resident_before,
        "peak_kib": status_kib("VmHWM"),
        "peak_reset": peak_reset,
        "means": _means(tool, result, inputs),
    }
    if tool == "ours":
        values["distributions"] = result[1].to_dicts()
    print_result(values)


# ---------------------------------------------------------------------------
# Parent: run each tool in its own child, print the table
# ---------------------------------------------------------------------------


def _available(tool: str) -> str | None:
    """None when the tool can be imported, else why not."""
    module = {"ours": "polars", "ranx": "ranx", "trec": "pytrec_eval"}[tool]
    probe = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"import {module} failed"


def _run_child(tool: str, cases: int, repeats: int) -> dict[str, Any] | str:
    return run_child(__file__, [tool, "--cases", str(cases), "--repeats", str(repeats)])


def _mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--peer-repeats",
        type=int,
        default=None,
        help="repeats for ranx / pytrec_eval (default: --repeats)",
    )
    parser.add_argument("--only", default=",".join(TOOLS), help="comma-separated: ours,ranx,trec")
    parser.add_argument("--child", choices=TOOLS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.cases, args.repeats)
        return 0

    tools = [tool for tool in args.only.split(",") if tool]
    peer_repeats = args.peer_repeats or args.repeats
    print(
        f"scoring benchmark: {args.cases:,} cases x {HITS_PER_CASE} hits, "
        f"{EXPECTATIONS_PER_CASE} graded expectations per case "
        f"(rel 1-3; 2 single-paragraph + 1 wildcard in 2/3 of cases); "
        f"{os.cpu_count()} CPU(s); inputs pre-built, not timed"
    )
    print(
        "note: each peer computes ITS OWN definitions (ranx recall@10/mrr/ndcg@10, trec_eval "
        "recall_10/recip_rank/ndcg_cut_10); taguru's (one credit per expectation at its first "
        "satisfying rank, wildcard sources, linear gain) coincide with them on this data only "
        "because hits are distinct sources and wildcards map to 'source#paragraph' doc ids. "
        "The comparison is of throughput."
    )
    reports: dict[str, dict[str, Any]] = {}
    for tool in tools:
        missing = _available(tool)
        if missing:
            print(f"{TOOL_NAMES[tool]:<12} NOT INSTALLED ({missing}); skipped")
            continue
        repeats = args.repeats if tool == "ours" else peer_repeats
        outcome = _run_child(tool, args.cases, repeats)
        if isinstance(outcome, str):
            print(f"{TOOL_NAMES[tool]:<12} FAILED: {outcome}")
            continue
        reports[tool] = outcome

    print()
    header = (
        f"{'tool':<12} {'median s':>9} {'runs (s)':<20} {'cpu s':>6} {'peak RSS':>10} "
        f"{'scoring +':>10} {'build s':>8}  means recall@10 / mrr / ndcg@10"
    )
    print(header)
    print(
        "  (median s = median wall-clock of the timed calls; cpu s = median process CPU time, "
        "all threads; peak RSS = VmHWM while scoring, inputs included; scoring + = peak RSS "
        "minus the resident set just before scoring; build s = input building, not timed)"
    )
    for tool, report in reports.items():
        runs = ", ".join(f"{value:.2f}" for value in report["seconds"])
        means = report["means"]
        peak = report["peak_kib"]
        extra = peak - report["resident_before_kib"]
        print(
            f"{TOOL_NAMES[tool]:<12} {statistics.median(report['seconds']):>9.3f} {runs:<20} "
            f"{statistics.median(report['cpu_seconds']):>6.2f} "
            f"{_mib(peak):>10} {_mib(extra):>10} {report['build_seconds']:>8.1f}  "
            f"{means['recall@10']:.6f} / {means['mrr']:.6f} / {means['ndcg@10']:.6f}"
        )
        if not report["peak_reset"]:
            print(f"  ({TOOL_NAMES[tool]}: could not reset VmHWM; peak includes input building)")
    if "ours" in reports:
        print()
        print("ours, Distributions (EVALUATE.md §5.1):")
        for row in reports["ours"]["distributions"]:
            print(
                f"  {row['metric']:<12} n={row['n']:,} min={row['min']} p50={row['p50']} "
                f"p90={row['p90']} p99={row['p99']} max={row['max']} mean={row['mean']:.6f}"
            )
        ours = statistics.median(reports["ours"]["seconds"])
        print()
        print(f"target: ours <= 3.0 s -> {'MET' if ours <= 3.0 else 'NOT MET'} ({ours:.3f} s)")
        for tool in ("ranx", "trec"):
            if tool not in reports:
                print(f"ratio vs {TOOL_NAMES[tool]}: n/a (not measured)")
                continue
            peer = statistics.median(reports[tool]["seconds"])
            speedup = peer / ours
            print(
                f"ratio vs {TOOL_NAMES[tool]}: {speedup:.1f}x faster "
                f"({peer:.3f} s / {ours:.3f} s) -> target >= 5x "
                f"{'MET' if speedup >= 5 else 'NOT MET'}"
            )
        disagree = [
            f"{TOOL_NAMES[tool]} {metric}: {value!r} vs ours {reports['ours']['means'][metric]!r}"
            for tool in ("ranx", "trec")
            if tool in reports
            for metric, value in reports[tool]["means"].items()
            if abs(value - reports["ours"]["means"][metric]) > 1e-9
        ]
        print(
            "agreement of mean values with the peers: "
            + ("OK (|diff| <= 1e-9)" if not disagree else "DIFFERS: " + "; ".join(disagree))
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
