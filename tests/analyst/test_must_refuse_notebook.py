"""run_report.ipynb's must-refuse section, executed against a stored must-refuse run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.paths import DATA, PROJECT_ROOT

import taguru_eval
from taguru_refserver.serve import running_server

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = PROJECT_ROOT


def test_the_run_report_notebook_shows_both_populations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_server(DATA, vector_lane=True) as url:
        run = taguru_eval.run(
            DATA / "sake" / "eval.jsonl",
            "sake",
            url=url,
            out=tmp_path / "evaluation.json",
            store=tmp_path / "runs",
            env={},
            must_refuse=DATA / "sake" / "must_refuse.jsonl",
        )
    notebook = nbformat.read(ROOT / "notebooks" / "run_report.ipynb", as_version=4)
    probe = (
        '{"rows": trade_off.height, "cases": verdicts.height,'
        ' "false_refusal": trade_off.filter(pl.col("metric") =='
        ' "answerability.false_refusal_rate").get_column("numerator")[0],'
        ' "surfaced": verdicts.filter(pl.col("verdict") == "surfaced").height}'
    )
    notebook.cells.append(nbformat.v4.new_code_cell(f"import json\nprint(json.dumps({probe}))"))
    path = os.environ.get("PYTHONPATH", "")
    for key, value in {
        "TAGURU_EVAL_STORE": str(tmp_path / "runs"),
        "TAGURU_EVAL_CONTEXT": "sake",
        "TAGURU_EVAL_RUN": run.run_id,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
    }.items():
        monkeypatch.setenv(key, value)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    )
    client.execute()
    stream = [o for o in notebook.cells[-1].outputs if o.get("name") == "stdout"]
    result: dict[str, Any] = json.loads("".join(o["text"] for o in stream))
    metrics = run.doc["metrics"]
    assert result == {
        "rows": 7,
        "cases": run.refusal_cases.height,
        "false_refusal": metrics["answerability.false_refusal_rate"]["numerator"],
        "surfaced": run.doc["abstention"]["counts"]["surfaced"],
    }
    assert result["cases"] == 6 and result["surfaced"] == 2
