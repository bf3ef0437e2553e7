// Runs a small Vercel AI SDK agent (generateText with tools, experimental_telemetry) driven by
// the SDK's own MockLanguageModelV3 (ai/test), exporting OTLP/HTTP to a daemon. Prints the same
// JSON as run_agent.py: per tool call, the span id, tool, whether it failed, and the UTF-8 bytes
// of the result as the SDK handed it to the model (read from the prompt the mock model received).
//
//   node run_agent.mjs --endpoint http://127.0.0.1:4318 --service svc --calls 12
import { generateText, tool, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor, InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";

// The context manager a Node app gets from the OpenTelemetry Node SDK: the SDK's spans of one
// generateText call share its trace (the context ledger follows a trace as a session).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, v, i, a) => (i % 2 === 0 ? [...acc, [v.replace(/^--/, ""), a[i + 1]]] : acc), []),
);
const calls = Number(args.calls ?? 12); // --framework is accepted and ignored: this script is vercel_ai
const SIZES = [300, 1200, 5000, 9000, 16000, 40000];
const FAIL_EVERY = 4;
const utf8 = (s) => Buffer.byteLength(s, "utf8");

function payload(n, seed) {
  const words = ["déjà", "vu", "naïve", "café", "日本語", "tool", "result", String(seed)];
  const out = [];
  let size = 0;
  for (let i = 0; size < n; i++) {
    const w = words[(i + seed) % words.length];
    out.push(w);
    size += utf8(w) + 1;
  }
  return out.join(" ");
}

const memory = new InMemorySpanExporter();
// OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT is read by the SDK from the environment.
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": args.service }),
  spanProcessors: [
    // Batched, and exported once at the end (forceFlush): the daemon gets the spans in the order
    // they ended. The simple processor sends each span in a request of its own, and a timed
    // batch can be in flight when the final flush sends the rest: concurrent requests can
    // arrive out of order.
    new BatchSpanProcessor(new OTLPTraceExporter({ url: `${args.endpoint}/v1/traces` }), {
      scheduledDelayMillis: 600000, maxExportBatchSize: 4096, maxQueueSize: 4096,
    }),
    new SimpleSpanProcessor(memory),
  ],
});
const tracer = provider.getTracer("ai");

const handed = {};
let step = 0;
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    for (const m of prompt) {
      if (m.role !== "tool") continue;
      for (const part of m.content) {
        if (part.type !== "tool-result") continue;
        const o = part.output;
        handed[part.toolCallId] =
          o.type === "text" || o.type === "error-text" ? utf8(o.value) : utf8(JSON.stringify(o.value));
      }
    }
    // As run_agent.py's input_tokens(k) and cache_read_tokens(k), k the request's step.
    const input = 2000 + 3000 * step;
    const cacheRead = 1000 * step;
    const usage = {
      inputTokens: { total: input, noCache: input - cacheRead, cacheRead, cacheWrite: 0 },
      outputTokens: { total: 1, text: 1, reasoning: 0 },
    };
    if (step < calls) {
      const i = step++;
      return {
        content: [{ type: "tool-call", toolCallId: `call_${i}`, toolName: i % 2 === 0 ? "fetch_page" : "search_docs", input: JSON.stringify({ i }) }],
        finishReason: { unified: "tool-calls", raw: undefined },
        usage,
        warnings: [],
      };
    }
    return { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] };
  },
});

const body = async ({ i }) => {
  if (i % FAIL_EVERY === FAIL_EVERY - 1) throw new Error(`call ${i} failed`);
  return payload(SIZES[i % SIZES.length], i);
};
const inputSchema = z.object({ i: z.number() });
await generateText({
  model,
  prompt: "go",
  tools: {
    fetch_page: tool({ description: "Fetches page i.", inputSchema, execute: body }),
    search_docs: tool({ description: "Searches docs.", inputSchema, execute: body }),
  },
  stopWhen: stepCountIs(calls + 2),
  experimental_telemetry: { isEnabled: true, tracer },
});
await provider.forceFlush();
const out = [];
for (const s of memory.getFinishedSpans()) {
  if (s.name !== "ai.toolCall") continue;
  const a = s.attributes;
  const cid = a["ai.toolCall.id"];
  const i = Number(cid.split("_")[1]);
  const failed = i % FAIL_EVERY === FAIL_EVERY - 1;
  out.push({ span_id: s.spanContext().spanId, tool: a["ai.toolCall.name"], failed, bytes: failed ? null : handed[cid] });
}
if (args.dump) for (const s of memory.getFinishedSpans()) console.error(s.name, s.status, JSON.stringify(s.attributes).slice(0, 400));
process.stdout.write(JSON.stringify({ framework: "vercel_ai", service: args.service, calls: out }));
await provider.shutdown();
