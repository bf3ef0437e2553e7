"""Runs a small agent per framework, traced by the framework's own OpenTelemetry
instrumentation and driven by the framework's own fake model, exporting OTLP/HTTP to a daemon.

Prints one JSON object: per tool call, the span id of its tool span (taken from the spans the
SDK exported), the tool name, whether it failed, and the UTF-8 bytes of the result as the
framework handed it to the model (taken from the messages the fake model received).

    run_agent.py --framework pydantic_ai --endpoint http://127.0.0.1:4318 --service svc
"""

import argparse
import json
import sys

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

# The input tokens the fake models report for model request k (0-based), and of them the
# cache reads, where the framework's fake model can report usage (pydantic-ai; the Vercel AI SDK
# in run_agent.mjs): the context ledger's test computes shares from them.
def input_tokens(k):
    return 2000 + 3000 * k


def cache_read_tokens(k):
    return 1000 * k


# Results from 300 B to 40 KB, non-ASCII text included; the size of call i.
SIZES = [300, 1200, 5000, 9000, 16000, 40000]
FAIL_EVERY = 4  # every 4th call fails


def payload(n, seed):
    """Text of about n UTF-8 bytes, non-ASCII included."""
    words = ["déjà", "vu", "naïve", "café", "日本語", "tool", "result", str(seed)]
    out, size, i = [], 0, 0
    while size < n:
        w = words[(i + seed) % len(words)]
        out.append(w)
        size += len(w.encode()) + 1
        i += 1
    return " ".join(out)


class Keep(SpanExporter):
    """Keeps the exported spans to read their ids."""

    def __init__(self):
        self.spans = []

    def export(self, spans):
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        pass


def provider(endpoint, service):
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    keep = Keep()
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
    tp.add_span_processor(SimpleSpanProcessor(keep))
    tp.endpoint = endpoint
    return tp, keep


def hexid(i):
    return format(i, "016x")


def run_pydantic_ai(tp, keep, calls):
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.usage import RequestUsage

    handed = {}
    plan = []
    for i in range(calls):
        tool = "fetch_page" if i % 2 == 0 else "search_docs"
        plan.append((f"call_{i}", tool, i))

    def model(messages, info):
        # Record every tool return the model was handed, by call id.
        for m in messages:
            for p in getattr(m, "parts", []):
                if isinstance(p, ToolReturnPart):
                    handed[p.tool_call_id] = len(p.model_response_str().encode())
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        usage = RequestUsage(input_tokens=input_tokens(step), cache_read_tokens=cache_read_tokens(step))
        if step < len(plan):
            cid, tool, i = plan[step]
            return ModelResponse(parts=[ToolCallPart(tool, {"i": i}, tool_call_id=cid)], usage=usage)
        return ModelResponse(parts=[TextPart("done")], usage=usage)

    agent = Agent(FunctionModel(model), capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=tp))],
                  retries=calls)

    def body(i):
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise ModelRetry(f"call {i} failed")
        return payload(SIZES[i % len(SIZES)], i)

    @agent.tool_plain
    def fetch_page(i: int) -> str:
        return body(i)

    @agent.tool_plain
    def search_docs(i: int) -> str:
        return body(i)

    agent.run_sync("go")
    out = []
    for s in keep.spans:
        cid = (s.attributes or {}).get("gen_ai.tool.call.id")
        if cid is None or not s.name.startswith("execute_tool"):
            continue
        failed = int(cid.split("_")[1]) % FAIL_EVERY == FAIL_EVERY - 1
        out.append({"span_id": hexid(s.context.span_id), "tool": s.attributes.get("gen_ai.tool.name"),
                    "failed": failed, "bytes": None if failed else handed[cid]})
    return out


def run_langchain(tp, keep, calls):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool as lc_tool
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=tp)

    @lc_tool
    def fetch_page(i: int) -> str:
        """Fetches page i."""
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise ValueError(f"call {i} failed")
        return payload(SIZES[i % len(SIZES)], i)

    @lc_tool
    def search_docs(i: int) -> dict:
        """Searches docs; returns a dict (serialised by LangChain for the model)."""
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise ValueError(f"call {i} failed")
        return {"hits": [payload(SIZES[i % len(SIZES)] // 2, i)], "i": i}

    tools = {"fetch_page": fetch_page, "search_docs": search_docs}
    model = GenericFakeChatModel(messages=iter([AIMessage(content="ok")] * (calls + 1)))
    messages = []
    handed = {}
    for i in range(calls):
        name = "fetch_page" if i % 2 == 0 else "search_docs"
        cid = f"call_{i}"
        call = {"name": name, "args": {"i": i}, "id": cid, "type": "tool_call"}
        try:
            msg = tools[name].invoke(call)
        except ValueError:
            handed[cid] = None
            continue
        assert isinstance(msg, ToolMessage)
        messages.append(msg)
        # What the model is handed: the ToolMessage, read back from the model's own input.
        model.invoke(messages)
        handed[cid] = len(msg.content.encode()) if isinstance(msg.content, str) else len(
            json.dumps(msg.content, ensure_ascii=False).encode())
    out = []
    for s in keep.spans:
        a = s.attributes or {}
        if a.get("openinference.span.kind") != "TOOL":
            continue
        # The span does not carry the call id: runs are in call order.
        out.append({"span_id": hexid(s.context.span_id), "tool": s.name})
    for o, i in zip(out, range(calls)):
        o["failed"] = handed[f"call_{i}"] is None
        o["bytes"] = handed[f"call_{i}"]
    return out


def run_openai_agents(tp, keep, calls):
    import asyncio

    from agents import Agent, ModelResponse, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    # OpenInference reads the SDK's own traces through its processor interface (registered by
    # the instrumentor); without an API key the SDK exports nothing to OpenAI.
    OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)

    handed = {}

    class Fake(Model):
        """The SDK's Model interface, answering from a script; records what it was handed."""

        async def get_response(self, system_instructions, input, *args, **kwargs):
            step = 0
            for item in input if isinstance(input, list) else []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    out = item["output"]
                    handed[item["call_id"]] = len((out if isinstance(out, str) else json.dumps(out)).encode())
                if isinstance(item, dict) and item.get("type") == "function_call":
                    step += 1
            if step < calls:
                tool = "fetch_page" if step % 2 == 0 else "search_docs"
                out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{step}", call_id=f"call_{step}",
                                                name=tool, arguments=json.dumps({"i": step}))]
            else:
                out = [ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                             content=[ResponseOutputText(type="output_text", text="done",
                                                                         annotations=[])])]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    def body(i):
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise ValueError(f"call {i} failed")
        return payload(SIZES[i % len(SIZES)], i)

    @function_tool
    def fetch_page(i: int) -> str:
        """Fetches page i."""
        return body(i)

    @function_tool
    def search_docs(i: int) -> str:
        """Searches docs."""
        return body(i)

    agent = Agent(name="agent", model=Fake(), tools=[fetch_page, search_docs])
    asyncio.run(Runner.run(agent, "go", max_turns=calls + 2))
    out = []
    for s in keep.spans:
        a = s.attributes or {}
        if a.get("openinference.span.kind") != "TOOL":
            continue
        # The tool span does not carry the call id: calls run one per turn, in order.
        out.append({"span_id": hexid(s.context.span_id), "tool": s.name, "start": s.start_time})
    out.sort(key=lambda o: o.pop("start"))
    for i, o in enumerate(out):
        o["failed"] = i % FAIL_EVERY == FAIL_EVERY - 1
        o["bytes"] = None if o["failed"] else handed[f"call_{i}"]
    return out


def record(n, seed):
    """A dict result of about n UTF-8 bytes as the model gets it, with accented, Greek, CJK and
    emoji text: OpenLLMetry records it with json.dumps' \\uXXXX escapes, the agent hands the model
    json.dumps(…, ensure_ascii=False), as LangChain does for a tool's dict."""
    words = ["déjà", "vu", "Ωμέγα", "λόγος", "日本語", "検索", "🔍", "résumé", "naïve", str(seed)]
    items, size, i = [], 0, 0
    while size < n:
        text = " ".join(words[(i + seed + k) % len(words)] for k in range(6))
        items.append({"id": i, "title": text, "tags": ["ü", "ß"]})
        size = len(json.dumps({"results": items}, ensure_ascii=False).encode())
        i += 1
    return {"results": items}


def run_openllmetry_dict(tp, keep, calls):
    return run_openllmetry(tp, keep, calls, dicts=True)


def run_openllmetry(tp, keep, calls, dicts=False):
    import contextlib
    import os

    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import tool, workflow

    # OpenLLMetry's own @tool/@workflow decorators. Traceloop.init adopts the global provider
    # (ours) and adds the processor given, a no-op one: nothing goes to Traceloop's cloud, spans
    # leave through our OTLP exporter. It prints its banner on stdout, kept for the JSON.
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    trace.set_tracer_provider(tp)
    with contextlib.redirect_stdout(sys.stderr):
        Traceloop.init(app_name="agent", api_endpoint=tp.endpoint, processor=SpanProcessor(),
                       telemetry_enabled=False, instruments=set(), disable_batch=True)

    handed = {}

    def model(messages):
        """The fake model: records the tool results it was handed, answers from a script."""
        for m in messages:
            if m["role"] == "tool":
                handed[m["tool_call_id"]] = len(m["content"].encode())
        step = sum(1 for m in messages if m["role"] == "assistant")
        if step < calls:
            name = "fetch_page" if step % 2 == 0 else "search_docs"
            return {"role": "assistant", "tool_calls": [{"id": f"call_{step}", "name": name, "args": {"i": step}}]}
        return {"role": "assistant", "content": "done"}

    def body(i):
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise RuntimeError(f"call {i} failed")
        return (record if dicts else payload)(SIZES[i % len(SIZES)], i)

    @tool(name="fetch_page")
    def fetch_page(i: int):
        return body(i)

    @tool(name="search_docs")
    def search_docs(i: int):
        return body(i)

    tools = {"fetch_page": fetch_page, "search_docs": search_docs}

    @workflow(name="agent")
    def agent():
        messages = [{"role": "user", "content": "go"}]
        while True:
            reply = model(messages)
            messages.append(reply)
            if "tool_calls" not in reply:
                return reply["content"]
            for c in reply["tool_calls"]:
                try:
                    out = tools[c["name"]](**c["args"])
                except RuntimeError as e:
                    out = f"Error: {e}"
                if not isinstance(out, str):
                    out = json.dumps(out, ensure_ascii=False)
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})

    agent()
    out = []
    for s in keep.spans:
        a = s.attributes or {}
        if a.get("traceloop.span.kind") != "tool":
            continue
        # The tool span does not carry the call id: calls run one at a time, in order.
        out.append({"span_id": hexid(s.context.span_id), "tool": a.get("traceloop.entity.name"), "start": s.start_time})
    out.sort(key=lambda o: o.pop("start"))
    for i, o in enumerate(out):
        o["failed"] = i % FAIL_EVERY == FAIL_EVERY - 1
        o["bytes"] = None if o["failed"] else handed[f"call_{i}"]
    return out


def run_strands(tp, keep, calls):
    from opentelemetry import trace
    from strands import Agent, tool
    from strands.models.model import Model

    # Strands traces through the global provider.
    trace.set_tracer_provider(tp)
    handed = {}

    class Fake(Model):
        """Strands' Model interface, streaming scripted tool calls; records what it was handed."""

        def update_config(self, **model_config):
            pass

        def get_config(self):
            return {}

        def structured_output(self, *args, **kwargs):
            raise NotImplementedError

        async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
            step = 0
            for m in messages:
                for block in m.get("content", []):
                    if "toolResult" in block:
                        r = block["toolResult"]
                        handed[r["toolUseId"]] = None if r["status"] == "error" else sum(
                            len((c["text"] if "text" in c else json.dumps(c["json"], ensure_ascii=False)).encode())
                            for c in r["content"])
                    if "toolUse" in block:
                        step += 1
            yield {"messageStart": {"role": "assistant"}}
            if step < calls:
                name = "fetch_page" if step % 2 == 0 else "search_docs"
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": f"call_{step}", "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"i": step})}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"contentBlockDelta": {"delta": {"text": "done"}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}

    def body(i):
        if i % FAIL_EVERY == FAIL_EVERY - 1:
            raise RuntimeError(f"call {i} failed")
        return payload(SIZES[i % len(SIZES)], i)

    @tool
    def fetch_page(i: int) -> str:
        """Fetches page i."""
        return body(i)

    @tool
    def search_docs(i: int) -> str:
        """Searches docs."""
        return body(i)

    # callback_handler=None: the default one prints the streamed text on stdout.
    Agent(model=Fake(), tools=[fetch_page, search_docs], callback_handler=None)("go")
    out = []
    for s in keep.spans:
        a = s.attributes or {}
        if a.get("gen_ai.operation.name") != "execute_tool":
            continue
        cid = a["gen_ai.tool.call.id"]
        failed = int(cid.split("_")[1]) % FAIL_EVERY == FAIL_EVERY - 1
        out.append({"span_id": hexid(s.context.span_id), "tool": a.get("gen_ai.tool.name"),
                    "failed": failed, "bytes": None if failed else handed[cid]})
    return out


def run_google_adk(tp, keep, calls):
    import asyncio
    import os

    from opentelemetry import trace

    # ADK traces through the global provider. Its default telemetry schema (2) puts the tool
    # result on the span only when GenAI content capture is on.
    trace.set_tracer_provider(tp)
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def fails(i):
        return i % FAIL_EVERY == FAIL_EVERY - 1

    # One call per model turn, except one turn with two calls that succeed: ADK runs them in
    # parallel and adds its "execute_tool (merged)" span over them.
    turns = [[i] for i in range(calls)]
    pair = next((i for i in range(1, calls - 1) if not fails(i) and not fails(i + 1)), None)
    if pair is not None:
        turns[pair:pair + 2] = [[pair, pair + 1]]
    handed = {}
    state = {"turn": 0}

    class Fake(BaseLlm):
        """ADK's BaseLlm, answering from the script; records the function responses it got."""

        model: str = "fake"

        async def generate_content_async(self, llm_request, stream=False):
            for c in llm_request.contents:
                for p in c.parts or []:
                    r = p.function_response
                    if r is not None:
                        # ADK hands a str result to the model inside its own {"result": …}
                        # object: the result is the text in it (other results: the object).
                        inner = r.response.get("result") if len(r.response) == 1 else None
                        text = inner if isinstance(inner, str) else json.dumps(r.response, ensure_ascii=False)
                        handed[r.id] = len(text.encode())
            k = state["turn"]
            state["turn"] += 1
            if k < len(turns):
                parts = [types.Part(function_call=types.FunctionCall(
                    id=f"call_{i}", name="fetch_page" if i % 2 == 0 else "search_docs", args={"i": i}))
                    for i in turns[k]]
            else:
                parts = [types.Part(text="done")]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    def body(i):
        if fails(i):
            raise RuntimeError(f"call {i} failed")
        return payload(SIZES[i % len(SIZES)], i)

    def fetch_page(i: int) -> str:
        """Fetches page i."""
        return body(i)

    def search_docs(i: int) -> str:
        """Searches docs."""
        return body(i)

    def on_tool_error(tool, args, tool_context, error):
        # Without this callback a tool that raises ends the whole invocation. An {"error": ...}
        # answer goes back to the model, and ADK marks the tool span failed (TOOL_ERROR).
        return {"error": str(error)}

    agent = LlmAgent(name="agent", model=Fake(), tools=[fetch_page, search_docs], on_tool_error_callback=on_tool_error)
    runner = InMemoryRunner(agent=agent, app_name="app")

    async def go():
        session = await runner.session_service.create_session(app_name="app", user_id="user")
        async for _event in runner.run_async(user_id="user", session_id=session.id,
                                             new_message=types.Content(role="user", parts=[types.Part(text="go")])):
            pass

    asyncio.run(go())
    out = []
    for s in keep.spans:
        a = s.attributes or {}
        if a.get("gen_ai.operation.name") != "execute_tool" or a.get("gen_ai.tool.name") == "(merged tools)":
            continue
        i = int(a["gen_ai.tool.call.id"].split("_")[1])
        out.append({"span_id": hexid(s.context.span_id), "tool": a.get("gen_ai.tool.name"),
                    "failed": fails(i), "bytes": None if fails(i) else handed[f"call_{i}"], "i": i})
    out.sort(key=lambda o: o.pop("i"))
    return out


RUNNERS = {"pydantic_ai": run_pydantic_ai, "langchain": run_langchain, "openai_agents": run_openai_agents,
           "openllmetry": run_openllmetry, "openllmetry_dict": run_openllmetry_dict, "strands": run_strands, "google_adk": run_google_adk}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True, choices=sorted(RUNNERS))
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--dump", action="store_true", help="print the tool spans' attributes to stderr")
    a = ap.parse_args()
    tp, keep = provider(a.endpoint, a.service)
    calls = RUNNERS[a.framework](tp, keep, a.calls)
    tp.force_flush()
    if a.dump:
        def cut(attrs):
            return {k: (v if len(str(v)) < 300 else str(v)[:300] + "…") for k, v in (attrs or {}).items()}

        for s in keep.spans:
            print(s.name, s.status.status_code, cut(s.attributes), file=sys.stderr)
            for e in s.events:
                print("    event", e.name, cut(e.attributes), file=sys.stderr)
    # Spans that summarise other tool calls (Google ADK's merged span): the daemon must not count them.
    summaries = sum(1 for s in keep.spans if (s.attributes or {}).get("gen_ai.tool.name") == "(merged tools)")
    json.dump({"framework": a.framework, "service": a.service, "calls": calls, "summary_spans": summaries},
              sys.stdout)
    tp.shutdown()


if __name__ == "__main__":
    main()
