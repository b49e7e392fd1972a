"""The three notebooks run top to bottom against a freshly generated demo history.

The history is real: the reference server serves data/sake, the demo eval set
runs five times, and :func:`taguru_eval.history.mutate_corpus` changes the
corpus through the HTTP write API between runs. Each notebook is executed
with nbclient; a probe cell appended at the end prints what the notebook
computed, and the test checks those values against the store and compare.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.layouts import stored_artifact
from support.notebooks import (
    chart_outputs,
    execute_notebook,
    external_urls,
    notebook_env,
    output_texts,
)

from taguru_eval import store
from taguru_eval.analyst import drift, offline
from taguru_eval.artifact.codec import read_artifact
from taguru_eval.compare import compare
from taguru_eval.demo import history
from taguru_eval.errors import InputError

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

RUNS = 5


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return history.demo_history(tmp_path_factory.mktemp("demo"), RUNS)


def _execute(name: str, probe: str, env: dict[str, str]) -> dict[str, Any]:
    seen, notebook = execute_notebook(name, probe, env)
    # Every chart carries the vendored libraries; nothing reaches off the machine.
    charts = chart_outputs(notebook)
    assert charts, f"{name} showed no chart"
    bundle = offline.javascript_bundle()
    assert all(bundle in chart for chart in charts)
    for text in output_texts(notebook):
        assert external_urls(text, bundle) == [], name
    return seen


def _env(store_dir: Path) -> dict[str, str]:
    return notebook_env(store_dir)


def test_run_report_notebook(demo_store: Path) -> None:
    probe = (
        '{"run": RUN, "cases": per_case.height, "missed": missed.height,'
        ' "lanes": sorted(latency.get_column("lane").unique().to_list()),'
        ' "crosstab": int(crosstab.get_column("cases").sum()),'
        ' "mrr": metrics.filter(pl.col("metric") == "recall.mrr").get_column("scalar")[0],'
        ' "tags": tag_slices.get_column("tag").to_list()}'
    )
    seen = _execute("run_report", probe, _env(demo_store))
    runs = drift.run_index(demo_store, "sake")
    newest = runs.get_column("run")[-1]
    assert seen["run"] == newest
    cases = store.read_tables(store.run_dir(demo_store, "sake", newest))["cases"]
    assert seen["cases"] == cases.height == 16
    assert seen["missed"] == int(cases.get_column("missed").list.len().sum())
    assert seen["lanes"] == ["citation", "passage", "query", "resolve"]
    assert seen["crosstab"] > 0
    artifact = read_artifact(stored_artifact(store.run_dir(demo_store, "sake", newest)))
    assert seen["mrr"] == artifact["metrics"]["recall.mrr"]["mean"]  # type: ignore[index]
    # A real run recorded the eval set's options.tags (data/sake tags two cases).
    assert seen["tags"] == ["(all cases)", "商品", "製法", "(no tag)"]


def test_drift_notebook_sees_every_run_and_the_drift(demo_store: Path) -> None:
    probe = (
        '{"runs": drift_table.height,'
        ' "recall": drift_table.get_column("recall.recall_at_k").to_list(),'
        ' "scan_recall": recall_by_run.get_column("mean_recall_at_k").to_list(),'
        ' "revisions": drift_table.get_column("revision").to_list(),'
        ' "bounds": bounds.height, "heat_cells": recall_cells.height}'
    )
    seen = _execute("drift", probe, _env(demo_store))
    assert seen["runs"] == RUNS
    # The corpus was written between every two runs, and the metrics really moved.
    assert len(set(seen["revisions"])) == RUNS
    assert len(set(seen["recall"])) > 1
    # The raw lazy scan and the metrics table agree on every run's mean recall@k.
    assert seen["scan_recall"] == pytest.approx(seen["recall"], abs=1e-12)
    stored = (
        drift.metric_history(demo_store, "sake")
        .filter(pl.col("metric") == "recall.recall_at_k")
        .get_column("scalar")
        .to_list()
    )
    assert seen["recall"] == stored
    assert seen["bounds"] == 9  # data/sake/thresholds.json: nine aggregate min/max bounds
    cases = drift.case_history(demo_store, "sake")
    assert seen["heat_cells"] == cases.height


def test_compare_notebook_matches_compare(demo_store: Path) -> None:
    probe = (
        '{"base": BASE, "head": HEAD, "counts": counts,'
        ' "changed": sorted(set(changed.get_column("case_id").to_list()))}'
    )
    seen = _execute("compare", probe, _env(demo_store))
    ids = drift.run_index(demo_store, "sake").get_column("run").to_list()
    assert (seen["base"], seen["head"]) == (ids[-2], ids[-1])
    expected = compare(
        store.run_dir(demo_store, "sake", ids[-2]), store.run_dir(demo_store, "sake", ids[-1])
    )
    assert seen["counts"] == dict(expected.counts)
    assert seen["changed"] == sorted(
        expected.cases.filter(pl.col("kind").is_in(["improved", "regressed"]))
        .get_column("case_id")
        .to_list()
    )
    # The last step repaired an edit, so something did change between the last two runs.
    assert seen["changed"]


@pytest.fixture(scope="module")
def demo_command_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store the README's demo command leaves (``python -m taguru_eval demo``)."""
    from taguru_eval.demo.run import run_demo

    out = tmp_path_factory.mktemp("demo-out")
    assert run_demo(out) == 0
    return out / "runs"


@pytest.mark.parametrize(
    ("name", "probe"),
    [
        ("run_report", '{"run": RUN}'),
        ("drift", '{"runs": drift_table.height}'),
        ("compare", '{"base": BASE, "head": HEAD}'),
    ],
)
def test_every_notebook_runs_after_the_demo_command(
    demo_command_store: Path, name: str, probe: str
) -> None:
    seen = _execute(name, probe, _env(demo_command_store))
    ids = drift.run_index(demo_command_store, "sake").get_column("run").to_list()
    assert len(ids) == 3
    expected = {
        "run_report": {"run": ids[-1]},
        "drift": {"runs": 3},
        "compare": {"base": ids[-2], "head": ids[-1]},
    }
    assert seen == expected[name]


def test_a_comparison_of_one_run_says_what_to_run(demo_store: Path) -> None:
    runs = drift.run_index(demo_store, "sake").head(1)
    with pytest.raises(InputError) as caught:
        drift.pick_pair(runs, "sake", env={})
    assert str(caught.value) == (
        "a comparison needs two stored runs of context 'sake' and the store has 1: run "
        "'python -m taguru_eval demo' (it stores three) or evaluate the context once more"
    )
    # A notebook shows that one line, not a traceback (IPython asks the error for it).
    assert caught.value._render_traceback_() == [f"InputError: {caught.value}"]
    pair = drift.pick_pair(runs, "sake", env={"TAGURU_EVAL_BASE": "a", "TAGURU_EVAL_HEAD": "b"})
    assert pair == ("a", "b")
