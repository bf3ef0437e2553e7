#!/usr/bin/env python3
"""Send tool spans shaped like every emitter toolsize recognises, with the real OpenTelemetry SDK.

It doubles as the starting point for Python agents: any agent already traced with the OTel SDK
(or OpenInference, OpenLLMetry, pydantic-ai, Langfuse, ...) only needs its OTLP exporter pointed
at the toolsize daemon.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-grpc opentelemetry-exporter-otlp-proto-http
    toolsize serve &
    python3 examples/python/emit_spans.py --protocol grpc --endpoint 127.0.0.1:4317
    python3 examples/python/emit_spans.py --protocol http --endpoint http://127.0.0.1:4318/v1/traces
    curl -s 127.0.0.1:9464/api/v1/tools

It prints, as JSON on stdout, what it sent per tool (count, exact result sizes in bytes, results of
unknown size), so a test can compare the daemon's table with the truth.
"""

import argparse
import json
import random
import sys

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode


def exporter(protocol, endpoint):
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression

        return OTLPSpanExporter(endpoint=endpoint, insecure=True, compression=Compression.Gzip)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.exporter.otlp.proto.http import Compression

    return OTLPSpanExporter(endpoint=endpoint, compression=Compression.Gzip)


def content(rng, n):
    """A result of about n characters, with multi-byte characters so bytes differ from chars."""
    words = ["alpha", "beta", "café", "naïve", "日本", "emoji😀", "x" * 7]
    out = []
    size = 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--service", default="python-agent")
    ap.add_argument("--calls", type=int, default=20, help="calls per emitter")
    args = ap.parse_args()
    endpoint = args.endpoint or (
        "127.0.0.1:4317" if args.protocol == "grpc" else "http://127.0.0.1:4318/v1/traces"
    )

    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    provider.add_span_processor(BatchSpanProcessor(exporter(args.protocol, endpoint)))
    rng = random.Random(42)
    expected = {}

    def note(tool, size):
        e = expected.setdefault(tool, {"count": 0, "sizes": [], "unknown": 0})
        e["count"] += 1
        if size is None:
            e["unknown"] += 1
        else:
            e["sizes"].append(size)

    def utf8(s):
        return len(s.encode("utf-8"))

    for i in range(args.calls):
        n = rng.randint(10, 40_000)
        text = content(rng, n)
        obj = {"rows": [text[: n // 2], i], "ok": True}

        # OTel GenAI semantic conventions.
        t = provider.get_tracer("opentelemetry.instrumentation.genai")
        with t.start_as_current_span("execute_tool get_weather", kind=SpanKind.INTERNAL) as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                              "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.result": text})
        note("get_weather", utf8(text))

        # OTel MCP conventions (client span).
        with t.start_as_current_span("tools/call read_file", kind=SpanKind.CLIENT) as s:
            s.set_attributes({"mcp.method.name": "tools/call", "gen_ai.tool.name": "read_file",
                              "jsonrpc.request.id": str(i), "gen_ai.tool.call.result": text[: n // 3]})
        note("read_file", utf8(text[: n // 3]))

        # OpenInference.
        t = provider.get_tracer("openinference.instrumentation")
        r = json.dumps(obj)
        with t.start_as_current_span("search_docs") as s:
            s.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "search_docs",
                              "input.value": json.dumps({"q": i}), "output.value": r,
                              "output.mime_type": "application/json"})
        note("search_docs", utf8(r))

        # OpenLLMetry / Traceloop: output is json.dumps of the return value.
        t = provider.get_tracer("opentelemetry.instrumentation.traceloop")
        r = json.dumps(text[: n // 4])
        with t.start_as_current_span("summarize.tool") as s:
            s.set_attributes({"traceloop.span.kind": "tool", "traceloop.entity.name": "summarize",
                              "traceloop.entity.input": json.dumps({"args": [i], "kwargs": {}}),
                              "traceloop.entity.output": r})
        note("summarize", utf8(text[: n // 4]))  # decoded: what the model got

        # pydantic-ai >= 2 (format v5).
        t = provider.get_tracer("pydantic-ai")
        with t.start_as_current_span("execute_tool lookup_user") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_user",
                              "gen_ai.tool.call.id": f"pyd_{i}", "gen_ai.tool.call.arguments": "{}",
                              "gen_ai.tool.call.result": text[: n // 5]})
        note("lookup_user", utf8(text[: n // 5]))

        # pydantic-ai 1.x (format v2): no operation name.
        with t.start_as_current_span("running tool") as s:
            s.set_attributes({"gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": f"v1_{i}",
                              "tool_arguments": json.dumps({"id": i}), "tool_response": text[: n // 6]})
        note("lookup_order", utf8(text[: n // 6]))

        # Langfuse SDK.
        t = provider.get_tracer("langfuse-sdk")
        with t.start_as_current_span("fetch_page") as s:
            s.set_attributes({"langfuse.observation.type": "tool",
                              "langfuse.observation.input": json.dumps({"args": [], "kwargs": {"url": i}}),
                              "langfuse.observation.output": text[: n // 7]})
        note("fetch_page", utf8(text[: n // 7]))

        # Vercel AI SDK (legacy ai.* telemetry): JSON.stringify, which escapes no character
        # beyond ASCII and writes no spaces.
        t = provider.get_tracer("ai")
        r = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        with t.start_as_current_span("ai.toolCall") as s:
            s.set_attributes({"operation.name": "ai.toolCall", "ai.operationId": "ai.toolCall",
                              "ai.toolCall.name": "calculator", "ai.toolCall.id": f"v_{i}",
                              "ai.toolCall.args": "{}", "ai.toolCall.result": r})
        note("calculator", utf8(r))

        # Google ADK: non-dict results wrapped {"result": ...}.
        t = provider.get_tracer("gcp.vertex.agent")
        r = json.dumps({"result": text[: n // 8]})
        with t.start_as_current_span("execute_tool list_files") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "list_files",
                              "gen_ai.tool.type": "FunctionTool", "gcp.vertex.agent.tool_response": r})
        note("list_files", utf8(text[: n // 8]))  # {"result": ...} removed

        # Strands Agents, legacy mode: the result is in a span event.
        t = provider.get_tracer("strands.telemetry.tracer")
        r = json.dumps([{"text": text[: n // 9]}])
        with t.start_as_current_span("execute_tool shell") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "shell",
                              "gen_ai.tool.status": "success"})
            s.add_event("gen_ai.choice", {"message": r})
        note("shell", utf8(text[: n // 9]))  # [{"text": ...}] removed

        # Logfire's openai-agents integration.
        t = provider.get_tracer("logfire")
        with t.start_as_current_span("Function: web_search") as s:
            s.set_attributes({"name": "web_search", "input": "{}", "output": text[: n // 10]})
        note("web_search", utf8(text[: n // 10]))

        # MLflow: JSON-encoded span type and outputs.
        t = provider.get_tracer("mlflow.tracing")
        r = json.dumps(text[: n // 11])
        with t.start_as_current_span("query_db") as s:
            s.set_attributes({"mlflow.spanType": '"TOOL"', "mlflow.spanInputs": "{}", "mlflow.spanOutputs": r})
        note("query_db", utf8(text[: n // 11]))  # decoded

        # toolsize's own span contract: the size is measured by the tool.
        t = provider.get_tracer("toolsize")
        with t.start_as_current_span("execute_tool grep") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep",
                              "tool.name": "grep", "tool.args_hash": f"{i:012x}", "tool.result.bytes": n,
                              "tool.result.truncated": False, "tool.latency_ms": 1.5})
        note("grep", n)

        # Content hidden by OpenInference: size unknown, not 12 bytes.
        t = provider.get_tracer("openinference.instrumentation")
        with t.start_as_current_span("secret_tool") as s:
            s.set_attributes({"openinference.span.kind": "TOOL", "tool.name": "secret_tool",
                              "output.value": "__REDACTED__"})
        note("secret_tool", None)

        # A failed call: counted as an error, no size.
        t = provider.get_tracer("opentelemetry.instrumentation.genai")
        with t.start_as_current_span("execute_tool flaky") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "flaky",
                              "error.type": "TimeoutError"})
            s.set_status(Status(StatusCode.ERROR, "timed out"))
        expected.setdefault("flaky", {"count": 0, "sizes": [], "unknown": 0, "errors": 0})
        expected["flaky"]["count"] += 1
        expected["flaky"]["errors"] += 1

        # Not a tool span: ignored by the daemon.
        with t.start_as_current_span("chat gpt-4o") as s:
            s.set_attributes({"gen_ai.operation.name": "chat"})

    provider.shutdown()
    json.dump({"service": args.service, "tools": expected, "other_spans": args.calls}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
