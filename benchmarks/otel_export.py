"""Benchmark ``--otlp`` at scale: seconds, spans, events and the export's peak memory.

Builds one synthetic run of ``--cases`` cases (default 100,000) with
:mod:`taguru_eval.demo.synthetic` (template cases scored by the real table builder
and scorer, repeated under new ids), gates it with the real gate against the
thresholds of ``benchmarks/junit_scale.py``, and exports it with
:func:`taguru_eval.integrations.otel.export_run` to an OTLP/HTTP receiver in a
child process on loopback that decodes every request (``opentelemetry-proto``)
and counts what it got. It prints, per ``--slice`` size, the median seconds of
``--repeats`` exports, the spans and events the receiver decoded, and the
export's peak Python allocation (``tracemalloc``): the slice bounds it, the run's
size does not.

    .venv/bin/python benchmarks/otel_export.py [--cases 100000] [--slice 1024 ...] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.junit_scale import THRESHOLDS  # noqa: E402

RECEIVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
counts = {"spans": 0, "events": 0}
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            counts["spans"] += sum(
                len(s.spans) for r in request.resource_spans for s in r.scope_spans
            )
        elif self.path == "/v1/logs":
            request = ExportLogsServiceRequest.FromString(body)
            counts["events"] += sum(
                len(s.log_records) for r in request.resource_logs for s in r.scope_logs
            )
        elif self.path == "/count":
            pass
        self.send_response(200)
        answer = (str(counts["spans"]) + " " + str(counts["events"])).encode()
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        if self.path == "/count":
            counts["spans"] = counts["events"] = 0
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--step", type=int, default=9, help="synthetic history step (0-9)")
    parser.add_argument("--slice", type=int, action="append", dest="slices")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)

    import httpx

    from taguru_eval.api import Run
    from taguru_eval.demo.synthetic import assignment, build_templates, repeat_tables
    from taguru_eval.gate import case_values_from_cases_frame, evaluate_gate
    from taguru_eval.inputs.thresholds import parse_thresholds
    from taguru_eval.integrations.otel import export_run
    from taguru_eval.score.aggregate import aggregate
    from taguru_eval.tables.schemas import RunTables, metrics_frame

    run_id = "otel-scale"
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
    doc = {
        "generated_at": "2026-12-07T09:00:00Z",
        "inputs": {"eval": {"name": "synthetic", "cases": args.cases}, "context": "synthetic"},
        "thresholds": report.block,
    }
    run = Run(run_id=run_id, doc=doc, tables=tables, cases=frames["cases"], metrics=metrics)
    print(
        f"{args.cases:,} cases (synthetic step {args.step}): {len(report.violations):,} violations"
    )

    child = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True
    )  # fmt: skip
    try:
        assert child.stdout is not None
        url = f"http://127.0.0.1:{child.stdout.readline().strip()}"
        for size in args.slices or [1024]:
            seconds: list[float] = []
            peaks: list[int] = []
            received = ""
            for _ in range(args.repeats):
                tracemalloc.start()
                start = time.perf_counter()
                exported = export_run(run, thresholds, endpoint=url, slice_cases=size)
                seconds.append(time.perf_counter() - start)
                peaks.append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
                assert exported.failure is None, exported.failure
                received = httpx.post(f"{url}/count").text
            spans, events = (int(n) for n in received.split())
            assert (spans, events) == (exported.spans, exported.events)
            print(
                f"--slice {size:>6,}: {statistics.median(seconds):7.1f} s, {spans:,} spans, "
                f"{events:,} events received, peak {statistics.median(peaks) / 2**20:6.1f} MiB "
                "traced during the export"
            )
    finally:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
