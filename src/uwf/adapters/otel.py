"""Traces: OpenTelemetry spans, sent with the standard ``OTEL_*`` environment.

Tracing is on when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
is set (and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``). Spans go
over OTLP/HTTP (protobuf) through the SDK's exporter, which reads the rest of the standard
environment itself (headers, timeout, compression); ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` name the service (default ``uwf``). The SDK is the optional extra
``uwf[otel]``: it is imported only when tracing is on, so without the environment a span
costs one dictionary lookup. With the environment but without the extra, one warning names
the ``pip install`` and nothing is traced.

A process's first span takes its parent from ``TRACEPARENT`` (W3C trace context), so that
an agent's spans nest under the ``uwf thread step`` span that spawned it (docs/format.md,
"Traces"). Spans are batched and sent when the process exits.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

TRACEPARENT = "TRACEPARENT"
TRACESTATE = "TRACESTATE"
EXTRA_HINT = "pip install 'uwf[otel]'"

_state: dict[str, Any] = {}  # "tracer": the SDK tracer, or None once decided that it is off


def enabled(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (the standard OTEL_* variables)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


def _make_tracer() -> Any:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        sys.stderr.write(
            "warning: OTEL_EXPORTER_OTLP_ENDPOINT asks for traces, but the OpenTelemetry SDK "
            f"is not installed: {EXTRA_HINT} (no traces are sent)\n"
        )
        return None
    from uwf import __version__

    defaults = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "uwf"}
    provider = TracerProvider(
        resource=Resource.create({**defaults, "service.version": __version__})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider.get_tracer("uwf", __version__)  # flushed by the provider's atexit hook


def tracer() -> Any:
    """The SDK tracer when tracing is on, else None (decided once per process)."""
    if "tracer" not in _state:
        _state["tracer"] = _make_tracer() if enabled() else None
    return _state["tracer"]


class Span:
    """A span of ours: attributes, events, failure, and the context a child process needs.
    ``NO_SPAN`` is the one that does nothing (tracing off)."""

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def set(self, key: str, value: Any) -> None:
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Mapping[str, Any] | None = None) -> None:
        if self._span is not None:
            attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
            self._span.add_event(name, attrs)

    def fail(self, message: str) -> None:
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, message))

    def child_env(self) -> dict[str, str]:
        """``TRACEPARENT`` (and ``TRACESTATE``) naming this span, for a child process."""
        if self._span is None:
            return {}
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(self._span))
        out = {TRACEPARENT: carrier.get("traceparent", "")}
        if carrier.get("tracestate"):
            out[TRACESTATE] = carrier["tracestate"]
        return {k: v for k, v in out.items() if v}


NO_SPAN = Span()


def _parent() -> Any:
    """The context to start a span in: the current span's, else ``TRACEPARENT``'s, else none."""
    from opentelemetry import trace

    if trace.get_current_span().get_span_context().is_valid:
        return None  # the SDK takes the current context
    parent = os.environ.get(TRACEPARENT, "").strip()
    if not parent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": parent, "tracestate": os.environ.get(TRACESTATE, "")}
    return TraceContextTextMapPropagator().extract(carrier)


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """A span around the block (``NO_SPAN`` when tracing is off). An exception leaving the
    block marks the span failed unless the block already did."""
    t = tracer()
    if t is None:
        yield NO_SPAN
        return
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    with t.start_as_current_span(
        name, context=_parent(), attributes=attrs, record_exception=False
    ) as raw:
        yield Span(raw)
