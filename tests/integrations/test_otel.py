"""``--otlp``: the demo run against the reference server, exported to a loopback OTLP/HTTP
receiver that decodes the protobuf payloads (``opentelemetry-proto``).

Every attribute of every span and event is checked against evaluation.json (the
oracle the export never reads: values are followed down the artifact's case
blocks by the catalog's paths, verdicts read from its ``thresholds`` block):
one suite span, one case span per case, one ``gen_ai.evaluation.result`` event
per per-case metric a case computed and per side of every aggregate bound. An
unreachable collector is one warning line and the gate's exit code.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.sdk",
    reason="the 'otel' extra is not installed: pip install 'taguru_eval[otel]'",
)
pytest.importorskip(
    "opentelemetry.proto",
    reason="opentelemetry-proto (the receiver's decoder, the 'otel' extra) is not installed",
)

from support.otlp import OtlpReceiver, Received
from support.paths import DATA

from taguru_eval.api import load_run
from taguru_eval.catalog import CATALOG, catalog_for, scalar_of
from taguru_eval.cli.main import main
from taguru_eval.inputs.thresholds import parse_thresholds
from taguru_eval.integrations.otel import export_run
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"
TOKEN = "otlp-secret-token-91c2"
PREFIX = "taguru: evaluate: "
EVENT = "gen_ai.evaluation.result"
OPERATOR = {"min": ">=", "max": "<="}

FAILING = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {
        "recall.mrr": {"min": 0.5, "max": 0.99},
        "recall.recall_at_k": {"min": 0.99},
        "coverage.labels": {"min": 0.5},
    },
    "cases": {
        "default": {"recall.recall_at_k": {"min": 1.0}, "citations.recall": {"min": 1.0}},
        "overrides": {"known-miss-012": {"recall.mrr": {"min": 0.5, "max": 2.0}}},
    },
}
"""Bounds some cases and aggregates fail and some pass, two sides on one metric."""


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


def run_cli(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        for name in ("GITHUB_STEP_SUMMARY", "TAGURU_API_TOKENS", "OTEL_SERVICE_NAME"):
            patch.delenv(name, raising=False)
        patch.setenv("TAGURU_API_TOKEN", TOKEN)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def demo_args(url: str, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--eval", str(EVAL), "--context", "sake", "--url", url,
        "--out", str(tmp_path / "evaluation.json"), "--store", str(tmp_path / "runs"),
        "--no-step-summary", "--quiet", *extra,
    ]  # fmt: skip


def write_thresholds(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def follow(block: Any, path: tuple[str, ...]) -> float | None:
    for key in path:
        if not isinstance(block, dict):
            return None
        block = block.get(key)
    if isinstance(block, bool) or not isinstance(block, int | float):
        return None
    return float(block)


def explanation(metric: str, bound: dict[str, float]) -> str:
    return " and ".join(
        f"{metric} {OPERATOR[side]} {float(bound[side])!r}"
        for side in ("min", "max")
        if side in bound
    )


def case_bounds(thresholds: dict[str, Any], case_id: str) -> dict[str, dict[str, float]]:
    cases = thresholds.get("cases", {})
    return {**cases.get("default", {}), **cases.get("overrides", {}).get(case_id, {})}


def check_export(
    received: Received, doc: dict[str, Any], thresholds: dict[str, Any] | None
) -> None:
    """Every span and event of one exported run, against its evaluation.json."""
    block = doc.get("thresholds")
    violations = block.get("violations", []) if block else []
    failed_cases = {v["case_id"] for v in violations if v["scope"] == "case"}
    failed_pairs = {(v["case_id"], v["metric"]) for v in violations if v["scope"] == "case"}

    suites = [span for span in received.spans if span.name == "taguru_eval run"]
    assert len(suites) == 1
    suite = suites[0]
    assert suite.parent_span_id == b""
    verdict = "report-only" if block is None else "passed" if block["passed"] else "failed"
    expected_suite = {
        "test.suite.name": doc["inputs"]["eval"]["name"],
        "test.suite.run.status": "failure" if verdict == "failed" else "success",
        "taguru_eval.context": "sake",
        "taguru_eval.gate": verdict,
        "taguru_eval.cases": len(doc["cases"]),
        "taguru_eval.mode": "baseline",
        "taguru_eval.generated_at": doc["generated_at"],
    }
    if block is not None:
        expected_suite["taguru_eval.thresholds.sha256"] = block["sha256"]
    run_id = suite.attributes.pop("taguru_eval.run_id")
    assert isinstance(run_id, str) and run_id
    assert suite.attributes == expected_suite
    assert suite.resource["service.name"] == "taguru_eval"
    assert suite.scope == "taguru_eval"

    cases = [span for span in received.spans if span.name == "taguru_eval case"]
    assert len(received.spans) == len(cases) + 1
    assert [span.attributes for span in cases] == [
        {
            "test.case.name": case["case_id"],
            "test.case.result.status": "fail" if case["case_id"] in failed_cases else "pass",
            "taguru_eval.case.index": index,
        }
        for index, case in enumerate(doc["cases"])
    ]
    assert {span.trace_id for span in received.spans} == {suite.trace_id}
    assert {span.parent_span_id for span in cases} == {suite.span_id}
    span_of = {span.attributes["test.case.name"]: span.span_id for span in cases}

    assert {record.event_name for record in received.records} == {EVENT}
    assert {record.trace_id for record in received.records} == {suite.trace_id}
    assert all(record.body is None for record in received.records)
    case_events = [r for r in received.records if r.attributes["taguru_eval.scope"] == "case"]
    expected_case_events = []
    for case in doc["cases"]:
        bounds = case_bounds(thresholds or {}, case["case_id"])
        for metric, field in CATALOG.per_case.items():
            value = follow(case, field.path)
            if value is None:
                continue
            attributes: dict[str, Any] = {
                "gen_ai.evaluation.name": metric,
                "gen_ai.evaluation.score.value": value,
            }
            if metric in bounds:
                failed = (case["case_id"], metric) in failed_pairs
                attributes["gen_ai.evaluation.score.label"] = "fail" if failed else "pass"
                attributes["gen_ai.evaluation.explanation"] = explanation(metric, bounds[metric])
            attributes |= {"taguru_eval.scope": "case", "test.case.name": case["case_id"]}
            expected_case_events.append((span_of[case["case_id"]], attributes))
    assert [(r.span_id, r.attributes) for r in case_events] == expected_case_events

    aggregate_events = [r for r in received.records if r.attributes["taguru_eval.scope"] != "case"]
    statistics = {name: metric.statistic for name, metric in catalog_for(
        must_refuse=False, answers=False).items()}  # fmt: skip
    expected_aggregate = []
    for metric, bound in sorted((thresholds or {}).get("aggregate", {}).items()):
        actual = scalar_of(doc["metrics"][metric], statistics[metric])
        for side in ("min", "max"):
            if side not in bound:
                continue
            failed = any(
                v["scope"] == "aggregate"
                and v["metric"] == metric
                and v.get("bound") in (side, None)
                for v in violations
            )
            expected_aggregate.append(
                {
                    "gen_ai.evaluation.name": metric,
                    "gen_ai.evaluation.score.value": actual,
                    "gen_ai.evaluation.score.label": "fail" if failed else "pass",
                    "gen_ai.evaluation.explanation": explanation(metric, {side: bound[side]}),
                    "taguru_eval.scope": "aggregate",
                }
            )
    assert [r.attributes for r in aggregate_events] == expected_aggregate
    assert {r.span_id for r in aggregate_events} <= {suite.span_id}


def exported_strings(received: Received) -> list[str]:
    strings: list[str] = []
    for item in [*received.spans, *received.records]:
        for mapping in (item.attributes, item.resource):
            strings.extend(str(value) for value in mapping.values())
            strings.extend(mapping)
    return strings


def test_a_gated_demo_run_is_one_suite_span_a_span_per_case_and_its_events(
    served: str, tmp_path: Path
) -> None:
    thresholds = write_thresholds(tmp_path, FAILING)
    with OtlpReceiver() as receiver:
        code, _out, err = run_cli(
            demo_args(served, tmp_path, "--thresholds", str(thresholds), "--otlp", receiver.url)
        )
    assert code == 3, err
    assert "warning" not in err
    doc = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    assert doc["thresholds"]["passed"] is False
    check_export(receiver.received, doc, FAILING)
    labels = {r.attributes.get("gen_ai.evaluation.score.label") for r in receiver.received.records}
    assert labels == {"pass", "fail", None}  # both verdicts and unbounded metrics were exercised
    statuses = {s.attributes.get("test.case.result.status") for s in receiver.received.spans}
    assert statuses == {"pass", "fail", None}
    # Nothing the run read or sent leaves: no query, no token, no URL.
    queries = [
        json.loads(line)["query"]
        for line in EVAL.read_text(encoding="utf-8").splitlines()[1:]
        if line.strip() and "query" in json.loads(line)
    ]
    text = "\n".join(exported_strings(receiver.received))
    assert TOKEN not in text and served not in text and "127.0.0.1" not in text
    assert not [query for query in queries if query in text]
    paths = {path for path, _count, _headers in receiver.received.requests}
    assert paths == {"/v1/traces", "/v1/logs"}


def test_a_report_only_run_passes_every_case_and_labels_nothing(
    served: str, tmp_path: Path
) -> None:
    with OtlpReceiver() as receiver:
        code, _out, err = run_cli(demo_args(served, tmp_path, "--otlp", receiver.url))
    assert code == 0, err
    doc = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    check_export(receiver.received, doc, None)
    assert not [
        r for r in receiver.received.records if "gen_ai.evaluation.score.label" in r.attributes
    ]


def test_the_export_is_sent_in_slices_and_each_slice_holds_its_cases(
    served: str, tmp_path: Path
) -> None:
    thresholds = write_thresholds(tmp_path, FAILING)
    code, _out, err = run_cli(demo_args(served, tmp_path, "--thresholds", str(thresholds)))
    assert code == 3, err
    run = load_run(tmp_path / "evaluation.json")
    parsed = parse_thresholds(thresholds.read_bytes(), str(thresholds))
    with OtlpReceiver() as whole_receiver:
        whole = export_run(run, parsed, endpoint=whole_receiver.url)
    with OtlpReceiver() as sliced_receiver:
        sliced = export_run(run, parsed, endpoint=sliced_receiver.url, slice_cases=5)
    assert whole.failure is None and sliced.failure is None
    assert (
        (sliced.spans, sliced.events)
        == (whole.spans, whole.events)
        == (
            len(whole_receiver.received.spans),
            len(whole_receiver.received.records),
        )
    )
    span_requests = [n for p, n, _h in sliced_receiver.received.requests if p == "/v1/traces"]
    # 16 cases, 5 at a time: 5, 5, 5, 1 case spans, then the suite span.
    assert span_requests == [5, 5, 5, 1, 1]
    doc = json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    check_export(sliced_receiver.received, doc, FAILING)


def test_without_an_endpoint_the_standard_variables_apply(served: str, tmp_path: Path) -> None:
    args = demo_args(served, tmp_path)
    args.insert(args.index("--quiet"), "--otlp")  # no ENDPOINT: the next word is a flag
    with OtlpReceiver() as receiver:
        code, _out, err = run_cli(
            args,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                "OTEL_EXPORTER_OTLP_HEADERS": "x-team=search",
                "OTEL_SERVICE_NAME": "retrieval-gate",
            },
        )
    assert code == 0, err
    assert receiver.received.spans and receiver.received.records
    assert {h.get("x-team") for _p, _n, h in receiver.received.requests} == {"search"}
    assert {s.resource["service.name"] for s in receiver.received.spans} == {"retrieval-gate"}


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_collector_is_one_warning_line_and_the_gate_exit_code(
    served: str, tmp_path: Path
) -> None:
    thresholds = write_thresholds(tmp_path, FAILING)
    endpoint = f"http://user:hunter22@127.0.0.1:{closed_port()}"
    code, out, err = run_cli(
        demo_args(served, tmp_path, "--thresholds", str(thresholds), "--otlp", endpoint),
        env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"},
    )
    assert code == 3  # the gate's code, as without --otlp
    warnings = [line for line in err.splitlines() if "OpenTelemetry" in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(f"{PREFIX}warning: OpenTelemetry export to http://")
    assert "exit code is unchanged" in warnings[0]
    assert "hunter22" not in err and "Traceback" not in err
    assert (tmp_path / "evaluation.json").is_file()
    assert "thresholds: FAIL" in out


def test_a_bad_endpoint_is_a_usage_error_before_the_run(served: str, tmp_path: Path) -> None:
    code, _out, err = run_cli(demo_args(served, tmp_path, "--otlp", "ftp://u:secret99@host"))
    assert code == 2
    assert "--otlp ENDPOINT must be an http:// or https:// URL" in err
    assert "secret99" not in err
    assert not (tmp_path / "evaluation.json").exists()


def test_without_the_extra_the_flag_is_one_line_naming_it(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    code, _out, err = run_cli(demo_args(served, tmp_path, "--otlp"))
    assert code == 2
    assert err.splitlines() == [
        f"{PREFIX}--otlp needs the 'otel' extra, which is not installed (no module "
        "'opentelemetry.exporter.otlp.proto.http'): pip install 'taguru_eval[otel]'"
    ]
    assert not (tmp_path / "evaluation.json").exists()


def test_a_collector_that_refuses_the_batch_is_one_warning_and_no_retry_storm(
    served: str, tmp_path: Path
) -> None:
    with OtlpReceiver(status=400) as receiver:
        code, _out, err = run_cli(demo_args(served, tmp_path, "--otlp", receiver.url))
    assert code == 0
    warnings = [line for line in err.splitlines() if "OpenTelemetry" in line]
    assert len(warnings) == 1, err
    assert "stopped (traces)" in warnings[0] and "400" in warnings[0]
    # The first refused batch ends the export: nothing after it was sent.
    assert [path for path, _n, _h in receiver.received.requests] == ["/v1/traces"]
