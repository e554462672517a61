#!/usr/bin/env python3
"""A real third-party MCP client (the official Python SDK) against a running Runbyte.

    client.py stdio <runbyte> <config>       # spawns `runbyte serve --config <config>`
    client.py http <url>                     # e.g. http://127.0.0.1:3000/mcp
    client.py sse <url>                      # e.g. http://127.0.0.1:3000/sse

Lists Runbyte's tools, lists /servers, reads a generated module, runs a program that calls the
demo server twice concurrently, and prints what it saw as one JSON object on stdout.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

PROGRAM = """
import { get_weather, search_issues } from './servers/demo';

const [paris, issues] = await Promise.all([
  get_weather({ location: { city: 'Paris' } }),
  search_issues({ query: '', state: 'all' }),
]);
export default { conditions: (paris as any).conditions, issues: (issues as any).total };
"""


def text(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def exercise(read, write):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        listing = await session.call_tool("list_directory", {"path": "/servers"})
        module = await session.call_tool("read_file", {"path": "/servers/demo/get_weather.ts"})
        run = await session.call_tool("execute_code", {"code": PROGRAM})
        await session.send_ping()
        return {
            "server": init.server_info.name,
            "tools": sorted(tool.name for tool in tools.tools),
            "listing": text(listing),
            "module": text(module),
            "result": text(run),
            "result_is_error": bool(run.is_error),
        }


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=["serve", "--config", sys.argv[3]])
        async with stdio_client(params) as (read, write):
            report = await exercise(read, write)
    elif mode == "http":
        async with streamable_http_client(sys.argv[2]) as (read, write):
            report = await exercise(read, write)
    elif mode == "sse":
        async with sse_client(sys.argv[2]) as (read, write):
            report = await exercise(read, write)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
