"""``measures RUN MEASURE…`` and :func:`taguru_eval.analyst.measures.measures`.

The sake demo run (reference server over loopback, stored) is measured by
ir_measures through the library function and the command: ``SetR``, ``RR`` and
``nDCG`` are taguru's own values (but nDCG on the two cases with a shared hit,
see tests/analyst/test_export_trec.py), any other measure is ir_measures' own
value on the exported qrels and run, and a measure ir_measures cannot take,
or a missing ``ir`` extra, is one line and exit 2.
"""

from __future__ import annotations

import importlib.util
import io
import math
import sys
from pathlib import Path
from typing import Any

import ir_measures
import polars as pl
import pytest
from support.paths import DATA

import taguru_eval
from taguru_eval.analyst.measures import aggregate
from taguru_eval.api import measures
from taguru_eval.cli import main as cli_main
from taguru_eval.cli.measures import main
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"
PREFIX = "taguru: evaluate: "
SHARED = {"toji-lineage-002", "rice-variety-003"}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> taguru_eval.Run:
    work = tmp_path_factory.mktemp("measures")
    with running_server(DATA) as url:
        run = taguru_eval.run(
            EVAL, "sake", url=url, out=work / "e.json", store=work / "runs", env={}
        )
    assert run.path is not None
    return run


def test_setr_rr_and_ndcg_are_taguru_and_the_rest_is_ir_measures(
    stored: taguru_eval.Run,
) -> None:
    frame = measures(stored.path or "", "SetR", "RR", "nDCG", "AP", "P@5", eval_path=EVAL)
    assert frame.schema == pl.Schema(
        {"case_id": pl.String, "measure": pl.String, "value": pl.Float64}
    )
    cases = stored.cases.get_column("case_id").to_list()
    names = ["SetR", "RR", "nDCG", "AP", "P@5"]
    assert frame.select("case_id", "measure").rows() == [
        (case_id, name) for case_id in cases for name in names
    ]
    values = {(case_id, name): value for case_id, name, value in frame.iter_rows()}
    for row in stored.cases.iter_rows(named=True):
        case_id = row["case_id"]
        assert values[(case_id, "SetR")] == pytest.approx(row["recall_at_k"], abs=1e-9)
        assert values[(case_id, "RR")] == pytest.approx(row["mrr"], abs=1e-9)
        if case_id not in SHARED:
            assert values[(case_id, "nDCG")] == pytest.approx(row["ndcg"], abs=1e-9)
    qrels, run = taguru_eval.to_ir_measures(stored, EVAL, wildcards="taguru")
    theirs = {
        (metric.query_id, str(metric.measure)): metric.value
        for metric in ir_measures.iter_calc([ir_measures.AP, ir_measures.P @ 5], qrels, run)
    }
    assert {key: value for key, value in values.items() if key[1] in ("AP", "P@5")} == theirs
    means = aggregate(frame)
    assert means.get_column("measure").to_list() == names
    assert means.get_column("n").to_list() == [16] * 5
    assert means.filter(pl.col("measure") == "SetR").item(0, "mean") == pytest.approx(
        stored.cases.get_column("recall_at_k").mean()
    )


def test_a_loaded_run_and_its_recorded_eval_set_do(stored: taguru_eval.Run) -> None:
    by_path = measures(stored.path or "", "nDCG@5", wildcards="drop")
    assert measures(stored, "nDCG@5", wildcards="drop").equals(by_path)
    assert by_path.height == 16


def test_the_command_prints_the_table_and_writes_the_cases(
    stored: taguru_eval.Run, tmp_path: Path
) -> None:
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "per_case.parquet"
    argv = [str(stored.path), "RR", "nDCG@10", "--eval", str(EVAL), "--per-case", str(target)]
    assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
    expected = measures(stored.path or "", "RR", "nDCG@10", eval_path=EVAL)
    ndcg = expected.filter(pl.col("measure") == "nDCG@10").get_column("value").mean()
    assert isinstance(ndcg, float) and not math.isnan(ndcg)
    assert out.getvalue() == (
        "  measure    mean   n\n"
        "  RR       1.0000  16\n"
        f"  nDCG@10  {ndcg:.4f}  16\n"
        f"  wrote {target} (32 row(s))\n"
    )
    assert err.getvalue() == ""
    assert pl.read_parquet(target).equals(expected)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["AP", "Bogus"],
            "measure 'Bogus': ir_measures cannot parse it (NameError: measure not found: Bogus)",
        ),
        (["R"], "measure 'R' needs its cutoff parameter (write R@k)"),
        (["P(foo=1)@5"], "measure 'P(foo=1)@5': unsupported params found: ['foo']"),
        (
            ["alpha_nDCG@5"],
            "measure 'alpha_nDCG@5': no installed ir_measures provider computes it; "
            "pyndeval (pip install ir-measures[pyndeval]) would",
        ),
    ],
)
def test_a_measure_ir_measures_cannot_take_is_one_line_and_exit_2(
    stored: taguru_eval.Run, tmp_path: Path, names: list[str], message: str
) -> None:
    if names == ["alpha_nDCG@5"] and importlib.util.find_spec("pyndeval") is not None:
        pytest.skip("pyndeval is installed: alpha_nDCG is computed")
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "p.parquet"
    argv = [str(stored.path), *names, "--eval", str(EVAL), "--per-case", str(target)]
    assert main(argv, stdout=out, stderr=err) == 2
    assert err.getvalue() == f"{PREFIX}{message}\n"
    assert out.getvalue() == ""
    assert not target.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "measures takes a RUN and at least one MEASURE"),
        (["r"], "measures needs at least one MEASURE after RUN (e.g. AP P@5 nDCG@10)"),
        (["r", "AP", "--wildcards", "x"], "--wildcards must be drop or taguru, got 'x'"),
        (["r", "AP", "--per-case"], "--per-case needs a file path"),
        (["r", "AP", "--per-case", "r"], "--per-case 'r' is the same file as RUN"),
        (["r", "AP", "--bogus"], "unknown flag '--bogus' for measures"),
    ],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    err = io.StringIO()
    assert main(argv, stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == f"{PREFIX}{message} — try 'python -m taguru_eval measures --help'\n"


def test_without_the_ir_extra_the_command_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A module set to None in sys.modules is what an import of a missing one raises for.
    monkeypatch.setitem(sys.modules, "ir_measures", None)
    assert cli_main.main(["measures", "run-dir", "AP"]) == 2
    captured: Any = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "taguru: measures: needs the 'ir' extra, which is not installed (no module "
        "'ir_measures'): pip install 'taguru_eval[ir]'\n"
    )
