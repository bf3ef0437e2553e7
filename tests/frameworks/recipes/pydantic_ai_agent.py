"""A pydantic-ai agent whose only telemetry code is the switch `Agent.instrument_all()`;
`opentelemetry-instrument` sets up the SDK and the OTLP exporters from the environment
(docs/collector.md, "Python agents"). Prints the bytes of each result the model was handed."""
import json

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

Agent.instrument_all()  # the switch

handed = []


def model(messages, info):
    for m in messages:
        for p in getattr(m, "parts", []):
            if isinstance(p, ToolReturnPart) and p.tool_call_id not in [h[0] for h in handed]:
                handed.append((p.tool_call_id, len(p.model_response_str().encode())))
    step = sum(1 for m in messages if isinstance(m, ModelResponse))
    if step < 3:
        return ModelResponse(parts=[ToolCallPart("search_docs", {"i": step}, tool_call_id=f"call_{step}")])
    return ModelResponse(parts=[TextPart("done")])


agent = Agent(FunctionModel(model))


@agent.tool_plain
def search_docs(i: int) -> str:
    """Search the docs."""
    return "résultat %d " % i * (40 * (i + 1))


agent.run_sync("go")
print(json.dumps([b for _, b in handed]))
