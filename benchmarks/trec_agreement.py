"""Do IR tools agree with taguru? The TREC export read back by ir_measures and ranx.

Two 20,000-case runs (``--cases``) are exported with ``python -m taguru_eval
export RUN --trec DIR`` (``cli.export.main``), once as before (``--wildcards
drop``, the default) and once with ``--wildcards taguru``; ir_measures
(``read_trec_qrels``/``read_trec_run``; ``SetR``, ``RR``, ``nDCG``) and ranx
(``Qrels.from_file``/``Run.from_file``; ``recall``, ``mrr``, ``ndcg``,
``make_comparable=True``) read both files back, and every case taguru scored
is compared with taguru's recall@k, MRR and nDCG (tolerance 1e-9):

* **demo-shaped**: the demo run against the reference server, repeated under
  fresh ids (``synthetic.artifact_document``, the 16 demo cases 1,250 times
  each), loaded back from its evaluation.json — the run behind the figure
  "recall and MRR agree on all 20,000 cases but nDCG differs on 3,750
  (0.9577 vs 0.9684)";
* **random**: ``tests/support/trec_cases.random_inputs``, shapes the demo lacks
  (paragraph lists, duplicate entries, relevance 0, passages served twice,
  limits 1–20, no hits, failed lanes), scored by taguru's own scorer.

Prints, per run and mode, the cases that differ per metric and tool, the
means (taguru's and each tool's), how many cases hold a hit that is the first
to satisfy two or more expectations (the one shape TREC cannot hold) and the
export's seconds.

    .venv/bin/python benchmarks/trec_agreement.py [--cases 20000] [--only demo,random]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

MODES = ("drop", "taguru")


@dataclasses.dataclass(frozen=True)
class Subject:
    """A run to export: taguru's per-case frame, its tables, its eval.jsonl, and
    the RUN argument of the command (None: the library path the command takes)."""

    cases: Any
    tables: Any
    eval_path: Path
    run_arg: str | None


def demo_run(cases: int, work: Path) -> Subject:
    """The demo-shaped run, loaded back from its evaluation.json."""
    from synthetic import artifact_document, write_eval

    from taguru_eval.api import load_run
    from taguru_eval.artifact.build import write_json_atomic

    write_json_atomic(work / "evaluation.json", artifact_document(cases))
    run = load_run(work / "evaluation.json")
    eval_path = write_eval(work / "eval.jsonl", cases)
    return Subject(run.cases, run.tables, eval_path, str(work / "evaluation.json"))


def random_run(cases: int, work: Path) -> Subject:
    """The random-shaped run, its cases scored by taguru's own scorer."""
    from support.trec_cases import random_inputs, taguru_values

    from taguru_eval.inputs.dataset import load_eval_text

    text, tables = random_inputs(cases)
    eval_path = work / "eval.jsonl"
    eval_path.write_text(text, encoding="utf-8")
    return Subject(
        taguru_values(load_eval_text(text, "eval.jsonl"), tables), tables, eval_path, None
    )


def export(subject: Subject, directory: Path, mode: str) -> tuple[float, str]:
    """``export RUN --trec DIR --eval FILE --wildcards MODE`` (the command's own main),
    or for a run not on disk the three library calls it makes; seconds and stderr."""
    from taguru_eval.analyst.export import qrels_text, run_text, trec_frames
    from taguru_eval.cli.export import main
    from taguru_eval.inputs.dataset import load_eval

    err = io.StringIO()
    start = time.perf_counter()
    if subject.run_arg is not None:
        argv = [subject.run_arg, "--trec", str(directory), "--eval", str(subject.eval_path)]
        code = main([*argv, "--wildcards", mode], stdout=io.StringIO(), stderr=err)
        assert code == 0, err.getvalue()
    else:
        frames = trec_frames(load_eval(str(subject.eval_path)).expected, subject.tables, mode)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "run.trec").write_text(run_text(frames.run, "random"), "utf-8")
        (directory / "qrels.trec").write_text(qrels_text(frames.qrels), "utf-8")
    return time.perf_counter() - start, err.getvalue()


def agreement(cases: Any, directory: Path, shared: set[str]) -> dict[str, Any]:
    """Per tool: the differing cases per metric, how many cases differ on any
    metric without being ``shared`` cases, and the tool's means."""
    import ir_measures
    import ranx
    from support.trec_cases import differing, ir_measures_values, ranx_values

    qrels, ranked = str(directory / "qrels.trec"), str(directory / "run.trec")
    values = {
        "ir_measures": ir_measures_values(
            ir_measures.read_trec_qrels(qrels), ir_measures.read_trec_run(ranked)
        ),
        "ranx": ranx_values(
            ranx.Qrels.from_file(qrels, kind="trec"), ranx.Run.from_file(ranked, kind="trec")
        ),
    }
    out: dict[str, Any] = {}
    for tool, theirs in values.items():
        found = differing(cases, theirs)
        out[tool] = {
            "differing": {metric: len(ids) for metric, ids in found.items()},
            "outside": len(set().union(*found.values()) - shared),
            "means": {metric: statistics.fmean(v.values()) for metric, v in theirs.items()},
        }
    return out


def shared_cases(subject: Subject) -> set[str]:
    from taguru_eval.analyst.export import taguru_frames
    from taguru_eval.inputs.dataset import load_eval

    expected = load_eval(str(subject.eval_path)).expected
    return set(taguru_frames(expected, subject.tables).shared_cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--only", default="demo,random")
    args = parser.parse_args()
    import polars as pl

    builders = {"demo": demo_run, "random": random_run}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            work = Path(tmp) / name
            work.mkdir()
            start = time.perf_counter()
            subject = builders[name](args.cases, work)
            built = time.perf_counter() - start
            shared = shared_cases(subject)
            scored = subject.cases.filter(pl.col("recall_at_k").is_not_null())
            ours = {
                metric: scored.get_column(column).mean()
                for metric, column in (("recall", "recall_at_k"), ("mrr", "mrr"), ("ndcg", "ndcg"))
            }
            print(
                f"{name}: {subject.cases.height:,} cases, {scored.height:,} scored (built in "
                f"{built:.1f} s); {len(shared):,} with a hit first for two or "
                "more expectations"
            )
            print(
                "  taguru means: "
                + ", ".join(f"{metric} {value:.4f}" for metric, value in ours.items())
            )
            for mode in MODES:
                seconds, note = export(subject, work / mode, mode)
                found = agreement(subject.cases, work / mode, shared)
                print(f"  --wildcards {mode}: export {seconds:.2f} s")
                for tool, result in found.items():
                    differs = ", ".join(
                        f"{metric} {count:,}" for metric, count in result["differing"].items()
                    )
                    means = ", ".join(
                        f"{metric} {value:.4f}" for metric, value in result["means"].items()
                    )
                    print(
                        f"    {tool:<11} differing cases: {differs} ({result['outside']:,} cases "
                        f"without a shared hit); means {means}"
                    )
                if note:
                    print(f"    stderr: {note.strip()}")


if __name__ == "__main__":
    main()
