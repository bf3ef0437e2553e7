"""Emits tool-call spans through the real OpenTelemetry Python SDK with a sampler, over OTLP/HTTP.

Each call is its own trace (a root `execute_tool` span in the toolsize span contract), so the
sampler decides per call. Prints one JSON object: the calls made, and of the spans the SDK
exported (kept by an in-memory exporter beside the OTLP one) how many, how many were over the
ceiling and truncated, and the tracestate they carried.

    sampled_agent.py --sampler ratio|threshold --rate 0.1 --calls 2000 --endpoint URL --service S
"""

import argparse
import json
import random

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased


class SeededIds(IdGenerator):
    """Random ids from a seeded generator: the sampler's decisions are the same on every run."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def generate_span_id(self):
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self):
        return self.rng.getrandbits(128) or 1


def sampler(kind, rate):
    if kind == "ratio":
        # The SDK's classic ratio sampler: it says nothing of its rate in the span.
        return TraceIdRatioBased(rate)
    # Consistent probability sampling: the span's tracestate carries ot=th:<threshold>.
    from opentelemetry.sdk.trace._sampling_experimental import (
        composable_traceid_ratio_based,
        composite_sampler,
    )

    return composite_sampler(composable_traceid_ratio_based(rate))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sampler", choices=["ratio", "threshold"], required=True)
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--calls", type=int, required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--over-every", type=int, default=4, help="every Nth result is 50,000 bytes")
    ap.add_argument("--truncated", action="store_true", help="every result reported truncated")
    ap.add_argument("--seed", type=int, default=24)
    a = ap.parse_args()

    tp = TracerProvider(resource=Resource.create({"service.name": a.service}),
                        sampler=sampler(a.sampler, a.rate), id_generator=SeededIds(a.seed))
    keep = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=a.endpoint + "/v1/traces")))
    tp.add_span_processor(SimpleSpanProcessor(keep))
    tracer = tp.get_tracer("sampled-agent")
    for i in range(a.calls):
        over = a.over_every > 0 and i % a.over_every == 0
        with tracer.start_as_current_span("execute_tool fetch") as s:
            s.set_attribute("gen_ai.operation.name", "execute_tool")
            s.set_attribute("gen_ai.tool.name", "fetch")
            s.set_attribute("tool.name", "fetch")
            s.set_attribute("tool.result.bytes", 50_000 if over else 1_000 + i % 500)
            s.set_attribute("tool.result.truncated", a.truncated)
            s.set_attribute("tool.latency_ms", 2.0)
    tp.force_flush()
    spans = keep.get_finished_spans()
    states = sorted({str(s.context.trace_state.to_header()) for s in spans})
    print(json.dumps({
        "calls": a.calls,
        "exported": len(spans),
        "over": sum(1 for s in spans if s.attributes["tool.result.bytes"] == 50_000),
        "tracestates": states,
    }))
    tp.shutdown()


if __name__ == "__main__":
    main()
