"""An MCP server for toolsize's proxy tests, on the official Python SDK (`mcp`).

    python3 server.py                                   # stdio
    python3 server.py --http PORT [--json] [--resumable] [--token T] [--tls CERT KEY]

Tools: small, huge and typed ones, an error, structured output, progress notifications, a
slow one that notes its cancellation, one
that declares a larger result allowance for Claude Code (`anthropic/maxResultSizeChars`), and
one that asks to be called again (`input_required`, protocol 2026-07-28) before it answers.
Over HTTP (Streamable HTTP at /mcp on 127.0.0.1) it answers with SSE streams, or with JSON
with --json; with --token every request must carry `Authorization: Bearer T` (401 otherwise);
with --tls it serves https with that certificate and key; with --resumable it keeps every event
in memory, so a client whose stream broke gets the rest with `GET` and `Last-Event-ID`
(revisions up to 2025-11-25).
"""

import json
import sys
from typing import Annotated

from pydantic import BaseModel, Field
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult

server = MCPServer("toolsize-test-server")


@server.tool()
def echo(text: str) -> str:
    """Return the text as it came."""
    return text


@server.tool()
def rows(count: int, width: int = 40) -> str:
    """Return `count` rows as JSON text, each with a body of `width` chars."""
    return json.dumps(
        {"rows": [{"id": i, "name": f"row {i}", "body": "x" * width} for i in range(count)]}
    )


@server.tool()
def log_lines(count: int) -> str:
    """Return `count` lines of plain text: a first line, the middle, a last line."""
    middle = "".join(f"line {i} of the build log\n" for i in range(count))
    return "BUILD STARTED\n" + middle + "error: the last line says what failed\n"


class Hit(BaseModel):
    id: int
    title: str
    snippet: str


class SearchResult(BaseModel):
    query: str
    hits: list[Hit]
    tags: list[str]


@server.tool()
def search(
    query: Annotated[str, Field(max_length=32)],
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
    tags: Annotated[list[str], Field(max_length=3)] = [],
) -> SearchResult:
    """A typed tool with structured output."""
    hits = [Hit(id=i, title=f"{query} hit {i}", snippet="s" * 200) for i in range(limit)]
    return SearchResult(query=query, hits=hits, tags=tags)


@server.tool()
def payload(bytes: int) -> str:
    """JSON text of about `bytes` bytes (the latency example's tool)."""
    return json.dumps(
        {"rows": [{"id": i, "body": f"{i:0>22}"} for i in range(bytes // 40)]},
        separators=(",", ":"),
    )


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failed on purpose: {reason}")


@server.tool()
async def slow_rows(count: int, ctx: Context) -> str:
    """Reports progress three times, then returns `count` rows (as `rows`)."""
    for i in range(3):
        await ctx.report_progress(i + 1, 3)
    return rows(count)


@server.tool(meta={"anthropic/maxResultSizeChars": 200000})
def big_report(count: int) -> str:
    """Declares a 200,000-char allowance for Claude Code; returns `count` rows (as `rows`)."""
    return rows(count)


@server.tool()
def confirmed_rows(count: int, ctx: Context) -> str | InputRequiredResult:
    """Answers input_required until called again with its requestState, then `count` rows."""
    if ctx.request_state != "confirmed":
        return InputRequiredResult(request_state="confirmed")
    return rows(count)


@server.tool()
async def sleepy(seconds: float, marker: str, progress: bool = False, ctx: Context = None) -> str:
    """Sleeps; writes "cancelled" to the file `marker` if the call is cancelled first, and
    "started" to `marker` + ".started" once it runs (after its progress report, if any)."""
    import anyio

    try:
        if progress:
            await ctx.report_progress(0, 1)
        with open(marker + ".started", "w") as f:
            f.write("started")
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:
            f.write("cancelled")
        raise
    return "slept"


@server.tool()
async def sleepy_rows(seconds: float, count: int) -> str:
    """Sleeps, then returns `count` rows (as `rows`)."""
    import anyio

    await anyio.sleep(seconds)
    return rows(count)


class MemoryEventStore:
    """Every event kept, for streams resumed with Last-Event-ID."""

    def __init__(self):
        self.events = []  # (event id, stream id, message)

    async def store_event(self, stream_id, message):
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        from mcp.server.streamable_http import EventMessage

        ids = [e[0] for e in self.events]
        if last_event_id not in ids:
            return None
        at = ids.index(last_event_id)
        stream_id = self.events[at][1]
        for event_id, sid, message in self.events[at + 1 :]:
            if sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


def serve_http(argv: list[str]) -> None:
    import uvicorn

    port = int(argv[argv.index("--http") + 1])
    token = argv[argv.index("--token") + 1] if "--token" in argv else None
    options = {"event_store": MemoryEventStore(), "retry_interval": 100} if "--resumable" in argv else {}
    app = server.streamable_http_app(json_response="--json" in argv, host="127.0.0.1", **options)

    async def guarded(scope, receive, send):
        if token is not None and scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    tls = {}
    if "--tls" in argv:
        i = argv.index("--tls")
        tls = {"ssl_certfile": argv[i + 1], "ssl_keyfile": argv[i + 2]}
    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", **tls)


if __name__ == "__main__":
    if "--http" in sys.argv:
        serve_http(sys.argv)
    else:
        server.run("stdio")
