"""An MCP server for toolsize's proxy tests, on the official Python SDK (`mcp`).

Tools: small, huge and typed ones, an error, and structured output.
"""

import json
from typing import Annotated

from pydantic import BaseModel, Field
from mcp.server.mcpserver import MCPServer

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


if __name__ == "__main__":
    server.run("stdio")
