#!/usr/bin/env python3
"""A real third-party MCP client (the official Python SDK) against a running Runbyte.

    client.py [--era ERA] stdio <runbyte> <config>   # spawns `runbyte serve --config <config>`
    client.py [--era ERA] http <url>                 # e.g. http://127.0.0.1:3000/mcp
    client.py sse <url>                              # e.g. http://127.0.0.1:3000/sse (legacy only)

ERA picks how the SDK opens the connection (the SDK's own `Client(mode=...)` vocabulary):
    legacy       the `initialize` handshake (the default; Mcp-Session-Id sessions over HTTP)
    auto         probe `server/discover` at 2026-07-28, fall back to `initialize` if refused
    2026-07-28   stateless 2026-07-28 only: `server/discover`, then every request carries `_meta`

Lists Runbyte's tools, lists /servers, reads a generated module, runs a program that calls the
demo server twice concurrently, and prints what it saw as one JSON object on stdout. Outside
`legacy`, the report also carries "era": the protocol version the session negotiated. `ping`
is only sent on handshake-era sessions (2026-07-28 removed it).
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import ClientSession
from mcp.client._probe import negotiate_auto  # what `Client(mode="auto")` runs on connect
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

ERAS = ("legacy", "auto", *MODERN_PROTOCOL_VERSIONS)

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


async def connect(session, era):
    """Open the session the way the SDK's `Client(mode=era)` would; return the server's name."""
    if era == "legacy":
        return (await session.initialize()).server_info.name
    if era == "auto":
        await negotiate_auto(session)
    else:
        # Pinned: no fallback. Unlike `Client(mode=era)`, which adopts a synthesized result without
        # asking, really send `server/discover` at that version so the server names itself.
        session.adopt(types.DiscoverResult.model_validate(await session.send_discover(era)))
    info = session.server_info  # initialize's serverInfo, or discover's `_meta` serverInfo stamp
    return info.name if info is not None else None


async def exercise(read, write, era="legacy"):
    async with ClientSession(read, write) as session:
        server = await connect(session, era)
        tools = await session.list_tools()
        listing = await session.call_tool("list_directory", {"path": "/servers"})
        module = await session.call_tool("read_file", {"path": "/servers/demo/get_weather.ts"})
        run = await session.call_tool("execute_code", {"code": PROGRAM})
        if session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            await session.send_ping()  # removed in 2026-07-28
        report = {
            "server": server,
            "tools": sorted(tool.name for tool in tools.tools),
            "listing": text(listing),
            "module": text(module),
            "result": text(run),
            "result_is_error": bool(run.is_error),
        }
        if era != "legacy":
            report["era"] = session.protocol_version
        return report


async def main():
    args = sys.argv[1:]
    era = "legacy"
    if args[:1] == ["--era"]:
        if len(args) < 2 or args[1] not in ERAS:
            raise SystemExit(f"--era must be one of {', '.join(ERAS)}")
        era, args = args[1], args[2:]
    if not args:
        raise SystemExit(__doc__)
    mode = args[0]
    if mode == "stdio":
        params = StdioServerParameters(command=args[1], args=["serve", "--config", args[2]])
        async with stdio_client(params) as (read, write):
            report = await exercise(read, write, era)
    elif mode == "http":
        async with streamable_http_client(args[1]) as (read, write):
            report = await exercise(read, write, era)
    elif mode == "sse":
        if era != "legacy":
            raise SystemExit("the sse mode is legacy-only")
        async with sse_client(args[1]) as (read, write):
            report = await exercise(read, write)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
