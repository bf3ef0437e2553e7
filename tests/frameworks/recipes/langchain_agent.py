"""A LangChain agent step with no telemetry code: `opentelemetry-instrument` and the
OpenInference instrumentation (found through its entry point) trace it (docs/collector.md,
"Python agents"). Prints the bytes of each result the model would be handed, as JSON."""
import json

from langchain_core.tools import tool


@tool
def fetch_page(i: int) -> str:
    """Fetch page i."""
    return "página %d " % i * (50 * (i + 1))


out = []
for i in range(3):
    msg = fetch_page.invoke({"type": "tool_call", "name": "fetch_page", "args": {"i": i}, "id": f"call_{i}"})
    out.append(len(msg.content.encode()))
print(json.dumps(out))
