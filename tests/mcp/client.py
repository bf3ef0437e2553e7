"""An MCP client for toolsize's proxy tests, on the official Python SDK (`mcp`).

    python3 client.py CALLS_JSON [--mode 2026-07-28] -- COMMAND ARGS...
    python3 client.py CALLS_JSON --url URL [--mode legacy|2026-07-28] [--header "K: V"]...

The second form speaks Streamable HTTP to URL: `legacy` (the default) negotiates with
`initialize` (2025-11-25, with a session when the server gives one), `2026-07-28` sends each
request on its own with its `_meta` and the mirrored headers, and drives `input_required`
results to the end as the SDK does (retrying under a new id).

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


async def run_calls(session, calls: list, out: dict) -> None:
    tools = await session.list_tools()
    out["tools"] = [t.model_dump(mode="json", by_alias=True) for t in tools.tools]
    for call in calls:
        if "read_spill_all" in call:
            out["results"].append(await read_spill_all(session, call["read_spill_all"]))
            continue
        result = await session.call_tool(call["name"], call.get("arguments", {}))
        out["results"].append(result.model_dump(mode="json", by_alias=True))


async def over_http(calls: list, argv: list[str], out: dict) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = argv[argv.index("--url") + 1]
    mode = argv[argv.index("--mode") + 1] if "--mode" in argv else "legacy"
    headers = {}
    for i, a in enumerate(argv):
        if a == "--header":
            k, v = argv[i + 1].split(":", 1)
            headers[k.strip()] = v.strip()
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        await run_calls(client, calls, out)


async def main() -> None:
    calls = json.loads(sys.argv[1])
    out = {"results": []}
    if "--url" in sys.argv:
        await over_http(calls, sys.argv, out)
        print(json.dumps(out))
        return
    sep = sys.argv.index("--")
    command, args = sys.argv[sep + 1], sys.argv[sep + 2 :]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    if "--mode" in sys.argv[:sep]:
        from mcp import Client

        mode = sys.argv[sys.argv.index("--mode") + 1]
        async with Client(params, mode=mode, cache=None) as client:
            out["protocol_version"] = client.protocol_version
            await run_calls(client, calls, out)
        print(json.dumps(out))
        return
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["protocol_version"] = init.protocol_version
            await run_calls(session, calls, out)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
