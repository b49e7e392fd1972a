"""``--mlflow`` and ``taguru_eval.integrations.mlflow.log_run``: the demo run against the
reference server, logged to a real MLflow tracking store in a temporary directory
(a ``file:`` store) and read back through MLflow's own client.

The oracle is evaluation.json: every metric read back equals its scalar (and a
distribution's quantiles), every param its ``inputs``/``corpus`` value; a
comparison's deltas equal compare's. A tracking server that cannot be reached
is one warning line and the gate's exit code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "mlflow", reason="the 'mlflow' extra is not installed: pip install 'taguru_eval[mlflow]'"
)

from mlflow.tracking import MlflowClient
from support.paths import DATA

import taguru_eval
from taguru_eval.catalog import catalog_for, scalar_of
from taguru_eval.cli.main import main
from taguru_eval.contract import VERSION
from taguru_eval.integrations.mlflow import log_run
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"
THRESHOLDS = DATA / "sake" / "thresholds.json"
TOKEN = "mlflow-secret-token-7d3a"
PREFIX = "taguru: evaluate: "
QUANTILES = ("min", "p50", "p90", "p99", "max")


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A file: tracking store of its own (MLflow 3 keeps that backend behind a switch)."""
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    return uri


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        for name in ("GITHUB_STEP_SUMMARY", "TAGURU_API_TOKENS"):
            patch.delenv(name, raising=False)
        patch.setenv("TAGURU_API_TOKEN", TOKEN)
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def demo_args(url: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--eval", str(EVAL), "--context", "sake", "--url", url,
        "--out", str(tmp_path / "evaluation.json"), "--store", str(tmp_path / "runs"),
        "--no-step-summary", "--quiet", *extra,
    ]  # fmt: skip


def expected_metrics(doc: dict[str, Any]) -> dict[str, float]:
    """Each aggregate's scalar, and a distribution's quantiles, as evaluation.json has them."""
    catalog = catalog_for(must_refuse=False, answers=False)
    expected: dict[str, float] = {}
    for name, value in doc["metrics"].items():
        statistic = catalog[name].statistic
        scalar = scalar_of(value, statistic)
        if scalar is not None:
            expected[name] = scalar
        if statistic == "distribution":
            for field in QUANTILES:
                if value.get(field) is not None:
                    expected[f"{name}.{field}"] = float(value[field])
    return expected


def only_run(uri: str) -> Any:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("taguru_eval")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return client, runs[0]


def test_a_gated_run_is_logged_and_reads_back_equal_to_its_artifact(
    served: str, tmp_path: Path, store: str
) -> None:
    summary = tmp_path / "summary.md"
    args = demo_args(served, tmp_path, "--thresholds", str(THRESHOLDS), "--max-items", "20")
    code, _out, err = run_cli([*args, "--summary", str(summary), "--mlflow"])
    assert code == 0, err
    assert "warning" not in err
    doc = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    client, logged = only_run(store)
    assert logged.info.status == "FINISHED"

    metrics = expected_metrics(doc)
    assert logged.data.metrics == metrics
    assert {"recall.mrr", "recall.ndcg", "latency.passage_ms.p99"} <= set(metrics)

    revisions = {
        f"corpus.{side}.{key}": str(value)
        for side in ("revision_before", "revision_after")
        for key, value in doc["corpus"][side].items()
    }
    assert logged.data.params == {
        "context": "sake",
        "mode": "baseline",
        "eval.name": doc["inputs"]["eval"]["name"],
        "eval.cases": "16",
        "eval.sha256": hashlib.sha256(EVAL.read_bytes()).hexdigest(),
        "concurrency": "8",
        **{f"budget.{key}": str(value) for key, value in doc["inputs"]["budget"].items()},
        **revisions,
        "thresholds.sha256": doc["thresholds"]["sha256"],
    }
    assert doc["inputs"]["budget"]["max_items"] == 20

    tags = {k: v for k, v in logged.data.tags.items() if not k.startswith("mlflow.")}
    run_id = tags.pop("taguru_eval.run_id")
    assert run_id and logged.data.tags["mlflow.runName"] == run_id
    assert tags == {
        "taguru_eval.gate": "passed" if doc["thresholds"]["passed"] else "failed",
        "taguru_eval.version": VERSION,
        "taguru_eval.context": "sake",
    }

    artifacts = {item.path for item in client.list_artifacts(logged.info.run_id)}
    assert artifacts == {"evaluation.json", "summary.md"}
    downloaded = Path(
        client.download_artifacts(logged.info.run_id, "evaluation.json", str(tmp_path))
    )
    assert downloaded.read_bytes() == (tmp_path / "evaluation.json").read_bytes()

    logged_text = json.dumps([logged.data.params, logged.data.tags])
    assert TOKEN not in logged_text and served not in logged_text


def test_a_comparison_logs_compare_deltas_counts_and_verdicts(
    served: str, tmp_path: Path, store: str
) -> None:
    base_out, head_out = tmp_path / "base.json", tmp_path / "head.json"
    base = taguru_eval.run(EVAL, "sake", url=served, out=base_out, no_store=True)
    head = taguru_eval.run(EVAL, "sake", url=served, out=head_out, no_store=True, max_items=2)
    comparison = taguru_eval.compare(base.doc, head.doc)
    tests = taguru_eval.significance(comparison)
    report = tmp_path / "report.html"
    report.write_text("<html></html>", encoding="utf-8")
    run_id = log_run(
        head, comparison=comparison, significance=tests, report=report, experiment="taguru_eval"
    )
    client, logged = only_run(store)
    assert logged.info.run_id == run_id
    deltas = {
        f"compare.{metric}.delta": float(delta)
        for metric, delta in comparison.metrics.select("metric", "delta").iter_rows()
        if delta is not None
    }
    assert deltas and all(logged.data.metrics[key] == value for key, value in deltas.items())
    assert any(value != 0 for value in deltas.values())  # max_items=2 moved something
    counts = {f"compare.cases.{kind}": float(n) for kind, n in comparison.counts.items()}
    assert {k: logged.data.metrics[k] for k in counts} == counts
    whole = tests.frame.filter(tests.frame["tag"].is_null())
    verdicts = dict(whole.select("metric", "verdict").iter_rows())
    assert {
        key.removeprefix("compare.").removesuffix(".verdict"): value
        for key, value in logged.data.tags.items()
        if key.endswith(".verdict")
    } == verdicts
    head_doc = json.loads(head_out.read_text(encoding="utf-8"))
    plain = {k: v for k, v in logged.data.metrics.items() if not k.startswith("compare.")}
    assert plain == expected_metrics(head_doc)
    assert {item.path for item in client.list_artifacts(run_id)} == {"head.json", "report.html"}


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_tracking_server_is_one_warning_and_the_gate_exit_code(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://user:hunter22@127.0.0.1:{closed_port()}")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    code, out, err = run_cli(
        demo_args(served, tmp_path, "--thresholds", str(THRESHOLDS), "--mlflow")
    )
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "MLflow" in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(
        f"{PREFIX}warning: MLflow logging to http://[REDACTED]@127.0.0.1:"
    )
    assert warnings[0].endswith("; the run's exit code is unchanged")
    assert "hunter22" not in err and "Traceback" not in err
    assert "thresholds: PASS" in out
    assert (tmp_path / "evaluation.json").is_file()


def test_mlflow_without_a_tracking_uri_is_a_usage_error_before_the_run(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    code, _out, err = run_cli(demo_args(served, tmp_path, "--mlflow"))
    assert code == 2
    assert err.startswith(f"{PREFIX}--mlflow needs MLFLOW_TRACKING_URI")
    assert not (tmp_path / "evaluation.json").exists()


def test_without_the_extra_the_flag_is_one_line_naming_it(
    served: str, tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    code, _out, err = run_cli(demo_args(served, tmp_path, "--mlflow"))
    assert code == 2
    assert err.splitlines() == [
        f"{PREFIX}--mlflow needs the 'mlflow' extra, which is not installed (no module "
        "'mlflow'): pip install 'taguru_eval[mlflow]'"
    ]
    assert not (tmp_path / "evaluation.json").exists()
