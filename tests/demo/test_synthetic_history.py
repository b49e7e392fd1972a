"""demo.synthetic: a generated history whose tables, artifact and metrics agree."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.layouts import stored_artifact

from taguru_eval.analyst import drift
from taguru_eval.artifact.codec import read_artifact
from taguru_eval.artifact.read import tables_from_artifact
from taguru_eval.compare import compare
from taguru_eval.demo import synthetic
from taguru_eval.store import read_tables


def test_stored_tables_agree_with_the_evaluation_json_and_compare(tmp_path: Path) -> None:
    runs = synthetic.synthetic_history(tmp_path / "runs", cases=600, runs=3)
    assert runs == [synthetic.stored_run(tmp_path / "runs", step) for step in range(3)]
    newest = runs[-1]
    document = read_artifact(stored_artifact(newest))
    assert len(document["cases"]) == document["inputs"]["eval"]["cases"] == 600
    loaded = tables_from_artifact(document, "x")
    stored = read_tables(newest)
    # The artifact, read back, is exactly the stored per-case and aggregate tables.
    assert loaded.scores.cases.drop("run_id").equals(stored["cases"].drop("run_id"))
    assert loaded.scores.metrics_frame.drop("run_id").equals(stored["metrics"].drop("run_id"))
    # compare gives the same from the Parquet store and from the evaluation.json files.
    fast = compare(runs[0], newest)
    slow = compare(stored_artifact(runs[0]), stored_artifact(newest))
    assert fast.cases.equals(slow.cases)
    assert fast.counts["improved"] > 0 and fast.counts["regressed"] > 0
    # Tags are recorded for slices; the gate verdict and revisions move over runs.
    tags = stored["case_lanes"].get_column("tags").explode().drop_nulls().unique().to_list()
    assert set(tags) == set(synthetic.TAGS)
    index = drift.run_index(tmp_path / "runs", synthetic.SYNTHETIC_CONTEXT)
    assert index.get_column("cases").to_list() == [600, 600, 600]
    assert index.get_column("thresholds_passed").to_list() == [
        read_artifact(stored_artifact(run))["thresholds"]["passed"] for run in runs
    ]
    mrr = stored["metrics"].filter(pl.col("metric") == "recall.mrr").get_column("mean").item()
    # (the scorer sums sequentially, Polars' mean pairwise: equal to the last bits)
    assert mrr == pytest.approx(stored["cases"].get_column("mrr").mean(), rel=1e-12)
