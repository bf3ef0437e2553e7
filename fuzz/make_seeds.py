"""Writes the seed corpora of the fuzz targets (run once; the files are committed).

Protobuf and JSON requests shaped like the spans of the emitters toolsize recognises, built with
the OpenTelemetry protobuf classes; configuration files; args-hash JSON texts from the test
corpus. Usage: python3 fuzz/make_seeds.py
"""
import json, os, pathlib
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

root = pathlib.Path(__file__).parent
corpus = root / "corpus"

def kv(k, v):
    if isinstance(v, bool): return KeyValue(key=k, value=AnyValue(bool_value=v))
    if isinstance(v, int): return KeyValue(key=k, value=AnyValue(int_value=v))
    if isinstance(v, float): return KeyValue(key=k, value=AnyValue(double_value=v))
    return KeyValue(key=k, value=AnyValue(string_value=v))

SPANS = {
    "own": ("execute_tool grep", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep",
            "tool.name": "grep", "tool.args_hash": "0123456789ab", "tool.result.bytes": 4096,
            "tool.result.truncated": False, "tool.latency_ms": 2.5, "tool.result.chars": 4000}),
    "genai_content": ("execute_tool search", {"gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search", "gen_ai.tool.call.result": '{"hits": [1, 2, 3]}',
            "gen_ai.tool.call.arguments": '{"q": "rust"}'}),
    "openinference": ("search", {"openinference.span.kind": "TOOL", "tool.name": "search",
            "output.value": "a result ... [truncated]", "output.mime_type": "text/plain"}),
    "openllmetry": ("grep.tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": "grep",
            "traceloop.entity.output": '{"result": "abc"}'}),
    "failed": ("execute_tool rm", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "rm",
            "error.type": "PermissionError", "tool.error": "denied"}),
    "hostile": ("execute_tool \u202egnp.exe", {"gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t\u0000\u2066" + "x" * 300, "tool.result.bytes": -1}),
}

def request(service, name, attrs, status=0):
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", service))
    ss = rs.scope_spans.add()
    ss.scope.name = "seed"
    sp = ss.spans.add()
    sp.trace_id = bytes(range(1, 17)); sp.span_id = bytes(range(1, 9))
    sp.name = name; sp.kind = 1
    sp.start_time_unix_nano = 1_700_000_000_000_000_000
    sp.end_time_unix_nano = sp.start_time_unix_nano + 2_000_000
    sp.attributes.extend(kv(k, v) for k, v in attrs.items())
    sp.status.code = status
    return req

def to_json(service, name, attrs, status):
    def val(v):
        if isinstance(v, bool): return {"boolValue": v}
        if isinstance(v, int): return {"intValue": str(v)}
        if isinstance(v, float): return {"doubleValue": v}
        return {"stringValue": v}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "seed"}, "spans": [{
            "traceId": bytes(range(1, 17)).hex(), "spanId": bytes(range(1, 9)).hex(),
            "name": name, "kind": "SPAN_KIND_INTERNAL", "startTimeUnixNano": "1700000000000000000",
            "endTimeUnixNano": "1700000000002000000",
            "status": {"code": "STATUS_CODE_ERROR" if status else "STATUS_CODE_UNSET"},
            "attributes": [{"key": k, "value": val(v)} for k, v in attrs.items()]}]}]}]})

for d in ["otlp_protobuf", "otlp_json", "config", "args_hash"]:
    (corpus / d).mkdir(parents=True, exist_ok=True)
for label, (name, attrs) in SPANS.items():
    status = 2 if label == "failed" else 0
    (corpus / "otlp_protobuf" / label).write_bytes(
        request("agent", name, attrs, status).SerializeToString())
    (corpus / "otlp_json" / label).write_text(to_json("agent", name, attrs, status))

configs = {
    "empty": "",
    "listeners": '[listeners]\nheader_read_timeout = "2s"\nbody_timeout = "250ms"\notlp_max_connections = 10\n',
    "auth_tls": '[auth]\ntoken = "abc"\napi_key_header = "x-api-key"\n',
    "layers": '[layers]\nstack = ["default"]\nceiling_bytes = 4096\n[[layers.custom]]\nname = "proxy"\nlimit = 100\nunit = "chars"\n',
    "alerts": '[alerts]\nalertmanager_urls = ["http://127.0.0.1:9093"]\n[alerts.p95_jump]\nfactor = 2.5\n',
    "typo": '[otlp]\ngrcp_addr = "127.0.0.1:1"\n',
}
for k, v in configs.items():
    (corpus / "config" / k).write_text(v)

src = root.parent / "tests" / "data" / "args_hash_corpus.jsonl"
for i, line in enumerate(src.read_text().splitlines()[:40]):
    (corpus / "args_hash" / f"case{i:02}").write_text(line)
for k, v in {"nan": '{"x": NaN, "y": -Infinity}', "deep": "[" * 40 + "]" * 40,
             "unicode": '{"\\ud800": "\\u00e9", "b": 1e400}', "bigint": "1" + "0" * 200}.items():
    (corpus / "args_hash" / k).write_text(v)

# The complete generated configuration, from its declaration.
text = (root.parent / "src" / "collector" / "config.rs").read_text()
start = text.index('pub const GENERATED_CONFIG: &str = r#"') + len('pub const GENERATED_CONFIG: &str = r#"')
(corpus / "config" / "generated").write_text(text[start:text.index('"#;', start)])
