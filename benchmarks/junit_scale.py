"""Benchmark the JUnit report at scale: test cases and bytes, ``--junit-cases failing`` vs ``all``.

Builds one synthetic run of ``--cases`` cases (default 20,000) with
:mod:`taguru_eval.demo.synthetic` — template cases scored by the real table
builder and scorer, repeated under new ids; ``--step`` picks the run of the
synthetic history, i.e. how many cases miss — and gates it with the real gate
against a thresholds file of nine aggregate bound sides and four per-case
sides for every case (recall@k ≥ 0.5, source diversity ≥ 2, passage latency
within 1..95 ms): 20,000 × 4 + 9 + 1 (corpus) = 80,010 checks, the shape of
the report that measured "80,010 test cases (12.2 MB)". Then it renders
``junit_xml`` both ways (median seconds of ``--repeats``) and prints, for
each, the test cases written (counted by parsing the document back), failures,
skipped, bytes, and the elision properties.

    .venv/bin/python benchmarks/junit_scale.py [--cases 20000] [--step 9] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

THRESHOLDS = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {
        "recall.recall_at_k": {"min": 0.8, "max": 1.0},
        "recall.mrr": {"min": 0.5},
        "recall.ndcg": {"min": 0.5},
        "coverage.concepts": {"min": 0.5},
        "citations.recall": {"min": 0.5},
        "citations.locator_validity": {"min": 0.5},
        "passage.failure_rate": {"max": 0.05},
        "latency.passage_ms": {"max": 1000},
    },
    "cases": {
        "default": {
            "recall.recall_at_k": {"min": 0.5},
            "diversity.sources": {"min": 2},
            "latency.passage_ms": {"min": 1, "max": 95},
        }
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--step", type=int, default=9, help="synthetic history step (0-9)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from taguru_eval.analyst.junit import junit_xml
    from taguru_eval.demo.synthetic import assignment, build_templates, repeat_tables
    from taguru_eval.gate import case_values_from_cases_frame, evaluate_gate
    from taguru_eval.inputs.thresholds import parse_thresholds
    from taguru_eval.score.aggregate import aggregate
    from taguru_eval.tables.schemas import RunTables, metrics_frame

    run_id = "junit-scale"
    assigned = assignment(args.cases, args.step)
    frames = repeat_tables(build_templates(), assigned, run_id)
    tables = RunTables.from_frames(run_id, frames)
    metrics = metrics_frame(aggregate(frames["cases"], tables), run_id)
    thresholds = parse_thresholds(json.dumps(THRESHOLDS).encode(), "thresholds.json")
    report = evaluate_gate(
        thresholds,
        metrics,
        case_values_from_cases_frame(frames["cases"]),
        stable=True,
        case_ids=assigned.get_column("case_id").to_list(),
    )
    case_violations = sum(1 for v in report.violations if v.scope == "case")
    print(
        f"{args.cases:,} cases (synthetic step {args.step}): "
        f"{len(report.violations):,} violations ({case_violations:,} per-case), "
        f"{len(report.skipped):,} skipped per-case checks"
    )
    for listed in ("failing", "all"):
        seconds: list[float] = []
        text = ""
        for _ in range(args.repeats):
            start = time.perf_counter()
            text = junit_xml(
                thresholds,
                report,
                metrics,
                frames["cases"],
                run_id=run_id,
                context="synthetic",
                generated_at="2026-12-04T09:00:00Z",
                junit_cases=listed,
            )
            seconds.append(time.perf_counter() - start)
        root = ET.fromstring(text.encode("utf-8"))
        written = len(list(root.iter("testcase")))
        assert str(written) == root.get("tests"), (written, root.get("tests"))
        properties = {p.get("name"): p.get("value") for p in root.iter("property")}
        size = len(text.encode("utf-8"))
        print(
            f"--junit-cases {listed:<7}: {written:>6,} test cases, "
            f"{root.get('failures')} failures, {root.get('skipped')} skipped, "
            f"{size:>12,} bytes ({size / 1e6:.2f} MB), "
            f"{statistics.median(seconds):.3f} s; checks {properties['taguru_eval.checks']}, "
            f"elided passing {properties['taguru_eval.elided_passing_case_checks']}, "
            f"elided skipped {properties['taguru_eval.elided_skipped_case_checks']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
