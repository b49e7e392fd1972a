"""An OTLP/HTTP receiver on loopback that decodes what it is sent (``opentelemetry-proto``).

:class:`OtlpReceiver` is a stdlib ``http.server`` on 127.0.0.1 (a free port) that
answers ``POST /v1/traces`` and ``POST /v1/logs`` as a collector does (200, an
empty protobuf response) and keeps every request decoded: the spans and log
records with their attributes as plain Python values, plus each request's
raw size and headers, so a test checks exactly what went over the wire.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as the Python value it holds."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return None if kind is None else getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    """Repeated ``KeyValue`` -> dict (a key twice would be a bug: it is asserted away)."""
    keys = [pair.key for pair in pairs]
    assert len(keys) == len(set(keys)), keys
    return {pair.key: any_value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class Span:
    name: str
    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


@dataclass
class Record:
    event_name: str
    trace_id: bytes
    span_id: bytes
    attributes: dict[str, Any]
    body: Any
    resource: dict[str, Any]


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    requests: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)
    """(path, spans or records in it, headers) per request, in arrival order."""


class OtlpReceiver:
    """``with OtlpReceiver() as receiver:`` … ``receiver.url`` … ``receiver.received``."""

    def __init__(self, status: int = 200) -> None:
        self.received = Received()
        self.status = status
        lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = {key.lower(): value for key, value in self.headers.items()}
                with lock:
                    if self.path == "/v1/traces":
                        count = receiver._traces(body)
                        answer = ExportTraceServiceResponse().SerializeToString()
                    elif self.path == "/v1/logs":
                        count = receiver._logs(body)
                        answer = ExportLogsServiceResponse().SerializeToString()
                    else:
                        self.send_error(404)
                        return
                    receiver.received.requests.append((self.path, count, headers))
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _traces(self, body: bytes) -> int:
        request = ExportTraceServiceRequest.FromString(body)
        count = 0
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.received.spans.append(
                        Span(
                            span.name,
                            span.trace_id,
                            span.span_id,
                            span.parent_span_id,
                            attributes(span.attributes),
                            resource,
                            scope_spans.scope.name,
                        )
                    )
                    count += 1
        return count

    def _logs(self, body: bytes) -> int:
        request = ExportLogsServiceRequest.FromString(body)
        count = 0
        for resource_logs in request.resource_logs:
            resource = attributes(resource_logs.resource.attributes)
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    self.received.records.append(
                        Record(
                            record.event_name,
                            record.trace_id,
                            record.span_id,
                            attributes(record.attributes),
                            any_value(record.body) if record.HasField("body") else None,
                            resource,
                        )
                    )
                    count += 1
        return count
