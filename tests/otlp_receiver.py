"""A real OTLP/HTTP trace receiver on loopback for the tracing tests.

pytest-httpserver (werkzeug) serves ``POST /v1/traces``; every export is decoded with the
``opentelemetry-proto`` package's protobuf classes, as a collector would, into plain
:class:`Span` records (ids as hex, attributes and event attributes as Python values).

    receiver = OTLPReceiver().start()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    ... run uwf with env ...
    receiver.spans()            # every span received so far
    receiver.stop()
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 0  # 0 unset, 1 ok, 2 error
    service: str = ""

    def event(self, name: str) -> dict[str, Any]:
        found = [attrs for ev, attrs in self.events if ev == name]
        assert found, f"no event {name} in {self.name}: {self.events}"
        return found[0]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class OTLPReceiver:
    def __init__(self) -> None:
        from pytest_httpserver import HTTPServer

        self.server = HTTPServer(host="127.0.0.1", port=0)
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """What ``OTEL_EXPORTER_OTLP_ENDPOINT`` should be (the SDK appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.server.port}"

    def start(self) -> OTLPReceiver:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from werkzeug import Request, Response

        answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()

        def handle(request: Request) -> Response:
            body = request.get_data()
            if request.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with self._lock:
                self._bodies.append(body)
            return Response(answer, content_type="application/x-protobuf")

        self.server.expect_request("/v1/traces", method="POST").respond_with_handler(handle)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server.is_running():
            self.server.stop()

    def clear(self) -> None:
        with self._lock:
            self._bodies.clear()

    def spans(self) -> list[Span]:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        with self._lock:
            bodies = list(self._bodies)
        out = []
        for body in bodies:
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                service = _attributes(resource_spans.resource.attributes).get("service.name", "")
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        out.append(
                            Span(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                attributes=_attributes(span.attributes),
                                events=[(e.name, _attributes(e.attributes)) for e in span.events],
                                status=span.status.code,
                                service=service,
                            )
                        )
        return out

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans() if s.name == name]


@pytest.fixture(name="otlp")
def otlp_fixture() -> Iterator[OTLPReceiver]:
    """A started :class:`OTLPReceiver` (import with ``from otlp_receiver import otlp_fixture``)."""
    receiver = OTLPReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()
