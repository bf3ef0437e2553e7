"""An MCP client for toolsize's proxy tests, on the official Python SDK (`mcp`).

    python3 client.py CALLS_JSON -- COMMAND ARGS...

Starts COMMAND as a stdio MCP server (toolsize's proxy in front of a server, or a server
alone), initializes, lists the tools, makes each call of CALLS_JSON (a list of
{"name": ..., "arguments": {...}}) in order, and prints one JSON object:
A call {"read_spill_all": ID} instead reads a spilled result whole with the proxy's
toolsize_read_spill tool, slice after slice, and records {"spilled_text": ..., "slices": N}.
{"protocol_version", "tools": [...], "results": [CallToolResult as the SDK parsed it, ...]}.
The child's environment is this process's (OTEL_* variables included).
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def read_spill_all(session: ClientSession, payload_id: str) -> dict:
    text, offset, slices = "", 0, 0
    while offset is not None:
        result = await session.call_tool("toolsize_read_spill", {"id": payload_id, "offset": offset})
        if result.is_error:
            return {"error": result.model_dump(mode="json", by_alias=True)}
        text += result.content[0].text
        offset = json.loads(result.content[-1].text)["toolsize"]["next_offset"]
        slices += 1
    return {"spilled_text": text, "slices": slices}


async def main() -> None:
    calls = json.loads(sys.argv[1])
    sep = sys.argv.index("--")
    command, args = sys.argv[sep + 1], sys.argv[sep + 2 :]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    out = {"results": []}
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocol_version"] = init.protocol_version
            tools = await session.list_tools()
            out["tools"] = [t.model_dump(mode="json", by_alias=True) for t in tools.tools]
            for call in calls:
                if "read_spill_all" in call:
                    out["results"].append(await read_spill_all(session, call["read_spill_all"]))
                    continue
                result = await session.call_tool(call["name"], call.get("arguments", {}))
                out["results"].append(result.model_dump(mode="json", by_alias=True))
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
