"""A public BEIR-format collection end to end: import, serve, run, nDCG@10 beside BM25's.

The collection is read from ``TAGURU_EVAL_BEIR_DIR`` (a folder with
``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``, e.g. BEIR's
``scifact`` unzipped); nothing is downloaded. Without it the script says so
and exits 0. The path a user takes, each step its own process:

1. ``python -m taguru_eval import-qrels DIR`` writes the eval set and the
   context folder (one source per document, its title the first paragraph);
2. ``python -m taguru_eval serve`` hosts the folder (the reference server's
   float32 BM25), and the run asks each query's 10 best passages;
3. with ``TAGURU_BIN`` set, ``load`` puts the same folder into a fresh real
   taguru and the same run goes against it.

For each server it prints nDCG@10 as BEIR computes it (ir_measures
``nDCG@10`` on ``export --trec --wildcards taguru``: a document credited
once, at its first passage; the ideal cut at 10), taguru's own mean nDCG
(its ideal over every judged document), recall@10 and MRR, and the published
BM25 figure of the collection. The figures differ by design: taguru ranks
paragraphs (a document's title and its text compete for the ten places), and
the published BM25 ranks whole documents with Elasticsearch's analyzer.

    TAGURU_EVAL_BEIR_DIR=~/beir/scifact [TAGURU_BIN=…] \\
        .venv/bin/python benchmarks/beir_collection.py [--split test] [--keep DIR] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import taguru_eval

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the real-taguru harness of the differential tests

ENV_DIR = "TAGURU_EVAL_BEIR_DIR"
PUBLISHED_SOURCE = (
    "Thakur et al., BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information "
    "Retrieval Models (NeurIPS 2021 Datasets and Benchmarks, arXiv:2104.08663), Table 2, "
    "BM25 column (nDCG@10)"
)
PUBLISHED_BM25_NDCG10 = {
    "scifact": 0.665,
    "nfcorpus": 0.325,
    "fiqa": 0.236,
    "arguana": 0.315,
    "scidocs": 0.158,
    "trec-covid": 0.656,
}
"""The collection's folder name (as BEIR's zips unpack) -> its published BM25 nDCG@10."""


def taguru_eval_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "taguru_eval", *args]


@contextmanager
def reference_server(contexts: Path, work: Path) -> Iterator[str]:
    ready = work / "serve.ready"
    server = subprocess.Popen(
        taguru_eval_command("serve", str(contexts), "--port", "0", "--ready-file", str(ready)),
        stdout=subprocess.DEVNULL,
    )
    try:
        waited = subprocess.run(
            taguru_eval_command("wait", "--ready-file", str(ready), "--timeout", "600"),
            check=True,
            capture_output=True,
            text=True,
        )
        yield waited.stdout.strip()
    finally:
        server.terminate()
        server.wait(timeout=30)


def measured(
    label: str, eval_path: Path, context: str, url: str, work: Path, concurrency: int
) -> dict[str, object]:
    started = time.perf_counter()
    run = taguru_eval.run(
        eval_path,
        context,
        url=url,
        out=work / f"{label}.json",
        store=work / "runs",
        concurrency=concurrency,
        env={},
    )
    seconds = time.perf_counter() - started
    means = dict(run.metrics.select("metric", "mean").iter_rows())
    row: dict[str, object] = {
        "server": label,
        "cases": run.cases.height,
        "ndcg_taguru": means["recall.ndcg"],
        "recall_at_10": means["recall.recall_at_k"],
        "mrr": means["recall.mrr"],
        "seconds": seconds,
    }
    try:
        per_case = taguru_eval.measures(run, "nDCG@10", eval_path=eval_path)
        row["ndcg_at_10"] = statistics.fmean(per_case.get_column("value").to_list())
    except ImportError as missing:  # the `ir` extra brings ir_measures
        print(f"  ({label}: nDCG@10 by ir_measures skipped: {missing})")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test")
    parser.add_argument("--keep", type=Path, help="write the work files here and keep them")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    folder = os.environ.get(ENV_DIR)
    if not folder or not Path(folder).is_dir():
        print(
            f"{ENV_DIR} does not name a BEIR-format folder ({folder or 'unset'}): unzip a BEIR "
            "collection (e.g. scifact) and point it there; nothing is downloaded"
        )
        return 0
    collection = Path(folder)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        return report(collection, args.keep, args)
    with tempfile.TemporaryDirectory(prefix="beir-bench-") as scratch:
        return report(collection, Path(scratch), args)


def report(collection: Path, work: Path, args: argparse.Namespace) -> int:
    """Import, serve and run ``collection`` with its work files in ``work``; print the table."""
    name = collection.resolve().name
    corpus = work / "contexts" / name
    eval_path = work / f"{name}.eval.jsonl"
    started = time.perf_counter()
    subprocess.run(
        taguru_eval_command(
            "import-qrels",
            str(collection),
            "--split",
            args.split,
            "--corpus-out",
            str(corpus),
            "--eval-out",
            str(eval_path),
            "--report-out",
            str(work / "import-report.json"),
        ),
        check=True,
    )
    import_seconds = time.perf_counter() - started
    imported = json.loads((work / "import-report.json").read_text(encoding="utf-8"))
    print(
        f"{name}: {imported['counts']['cases']} case(s), {imported['documents']['written']} "
        f"document(s), imported in {import_seconds:.1f} s (work files: {work})"
    )
    rows = []
    with reference_server(corpus.parent, work) as url:
        rows.append(measured("reference server", eval_path, name, url, work, args.concurrency))
    if os.environ.get("TAGURU_BIN"):
        from support.taguru import RealTaguru, populate, require_taguru

        with RealTaguru(require_taguru()) as server:
            started = time.perf_counter()
            populate(server.url, corpus)
            print(f"loaded into taguru in {time.perf_counter() - started:.1f} s")
            rows.append(measured("taguru", eval_path, name, server.url, work, args.concurrency))
    header = ("nDCG@10", 8), ("taguru nDCG", 12), ("recall@10", 10), ("MRR", 7), ("run s", 7)
    print(f"{'server':<18} " + " ".join(f"{title:>{width}}" for title, width in header))
    for row in rows:
        ndcg10 = row.get("ndcg_at_10")
        print(
            f"{row['server']:<18} {'-' if ndcg10 is None else f'{ndcg10:.3f}':>8} "
            f"{row['ndcg_taguru']:>12.3f} {row['recall_at_10']:>10.3f} {row['mrr']:>7.3f} "
            f"{row['seconds']:>7.1f}"
        )
    published = PUBLISHED_BM25_NDCG10.get(name.casefold())
    if published is None:
        known = ", ".join(PUBLISHED_BM25_NDCG10)
        print(f"published BM25: none declared for '{name}' (known: {known})")
    else:
        print(f"published BM25 {published:.3f}  ({PUBLISHED_SOURCE})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
