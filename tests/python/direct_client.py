#!/usr/bin/env python3
"""A client that lists once, at once, and calls one tool: the official Python SDK against a
running Runbyte, as many clients use a server.

    direct_client.py [--era ERA] [--call NAME JSON] stdio <runbyte> <config>
    direct_client.py [--era ERA] [--call NAME JSON] http <url>

ERA is `legacy` (the `initialize` handshake, the default) or `2026-07-28` (`server/discover`,
then every request carries `_meta`). Right after connecting it lists the tools, resources,
resource templates and prompts (once each), then calls NAME with the JSON arguments, and
prints one JSON object: the names listed, the call's text, whether it is an error, and the
era negotiated. The SDK validates every result against the negotiated revision's schema.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def text(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def exercise(read, write, era, call):
    async with ClientSession(read, write) as session:
        if era == "legacy":
            await session.initialize()
        else:
            session.adopt(types.DiscoverResult.model_validate(await session.send_discover(era)))
        report = {
            "era": session.protocol_version,
            "tools": sorted(tool.name for tool in (await session.list_tools()).tools),
            "resources": sorted(str(r.uri) for r in (await session.list_resources()).resources),
            "templates": sorted(
                t.uri_template for t in (await session.list_resource_templates()).resource_templates
            ),
            "prompts": sorted(p.name for p in (await session.list_prompts()).prompts),
        }
        if call is not None:
            name, arguments = call
            result = await session.call_tool(name, arguments)
            report["text"] = text(result)
            report["is_error"] = bool(result.is_error)
        return report


async def main():
    args = sys.argv[1:]
    era, call = "legacy", None
    while args[:1] in (["--era"], ["--call"]):
        if args[0] == "--era":
            era, args = args[1], args[2:]
        else:
            call, args = (args[1], json.loads(args[2])), args[3:]
    if not args:
        raise SystemExit(__doc__)
    if args[0] == "stdio":
        params = StdioServerParameters(command=args[1], args=["serve", "--config", args[2]])
        async with stdio_client(params) as (read, write):
            report = await exercise(read, write, era, call)
    elif args[0] == "http":
        async with streamable_http_client(args[1]) as (read, write):
            report = await exercise(read, write, era, call)
    else:
        raise SystemExit(f"unknown mode {args[0]!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
