#!/usr/bin/env python3
"""A real third-party MCP client (the official Python SDK) against a running Runbyte.

    client.py [OPTIONS] stdio <runbyte> <config>   # spawns `runbyte serve --config <config>`
    client.py [OPTIONS] http <url>                 # e.g. http://127.0.0.1:3000/mcp
    client.py [OPTIONS] sse <url>                  # e.g. http://127.0.0.1:3000/sse (legacy only)
    client.py [OPTIONS] command <cmd> [<arg>...]   # spawns what a client config says: command + args

OPTIONS (before the mode, in any order):
    --era ERA        how to open the connection (below)
    --answer TEXT    answer the server's questions: declare the elicitation and sampling
                     capabilities, accept every form elicitation with TEXT for each required
                     property (and true for a boolean property named `approve`), answer every
                     sampling request with the assistant text TEXT, and add "asked" to the
                     report: the elicitation messages and sampling prompts, in order. On
                     2026-07-28 the questions come as `input_required` results, fulfilled
                     through the same callbacks and retried (as the SDK's `Client` does)
    --program FILE   run FILE's contents instead of the default program; "result" is its text
    --env NAME=VALUE (command mode) set NAME for the spawned server, on top of the environment the
                     SDK passes by default (HOME, PATH, ... as a client does), like a config's "env"

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
from mcp.client._input_required import run_input_required_driver  # what `Client` retries with
from mcp.client._probe import negotiate_auto  # what `Client(mode="auto")` runs on connect
from mcp.client.session import ClientRequestContext
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


def answering_callbacks(answer, asked):
    """The SDK callbacks for `--answer`: they answer every question with `answer` and log it in `asked`."""

    async def elicit(context, params):
        asked.append(params.message)
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ElicitResult(action="decline")  # URL mode: nothing to fill in
        schema = params.requested_schema or {}
        properties = schema.get("properties") or {}
        content = {name: answer for name in schema.get("required") or []}
        if (properties.get("approve") or {}).get("type") == "boolean":
            content["approve"] = True
        return types.ElicitResult(action="accept", content=content)

    async def sample(context, params):
        asked.append(
            "\n".join(
                block.text
                for message in params.messages
                for block in message.content_as_list
                if getattr(block, "type", "") == "text"
            )
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=answer),
            model="client.py",
            stop_reason="endTurn",
        )

    return {"elicitation_callback": elicit, "sampling_callback": sample}


async def call_answering(session, name, arguments):
    """`session.call_tool` that fulfils `input_required` results through the session's callbacks.

    `ClientSession.call_tool` raises on an `InputRequiredResult`; the SDK's high-level `Client`
    drives the rounds with `run_input_required_driver` and `session.dispatch_input_request`
    (the callbacks that answer legacy server-to-client requests). This does the same.
    """

    async def retry(responses, state):
        return await session.call_tool(
            name, arguments, input_responses=responses, request_state=state, allow_input_required=True
        )

    first = await retry(None, None)
    if not isinstance(first, types.InputRequiredResult):
        return first

    async def dispatch(key, request):
        meta = request.params.meta if request.params else None
        context = ClientRequestContext(session=session, request_id=key, meta=meta)
        return await session.dispatch_input_request(context, request)

    return await run_input_required_driver(first, dispatch=dispatch, retry=retry)


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


async def exercise(read, write, era="legacy", answer=None, program=PROGRAM):
    asked = []
    callbacks = answering_callbacks(answer, asked) if answer is not None else {}
    async with ClientSession(read, write, **callbacks) as session:

        async def call_tool(name, arguments):
            if answer is None:
                return await session.call_tool(name, arguments)
            return await call_answering(session, name, arguments)

        server = await connect(session, era)
        tools = await session.list_tools()
        listing = await call_tool("list_directory", {"path": "/servers"})
        module = await call_tool("read_file", {"path": "/servers/demo/get_weather.ts"})
        run = await call_tool("execute_code", {"code": program})
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
        # The downstream servers' resources and prompts, as Runbyte gathers them.
        resources = (await session.list_resources()).resources
        report["resources"] = sorted(str(resource.uri) for resource in resources)
        report["prompts"] = sorted(prompt.name for prompt in (await session.list_prompts()).prompts)
        if resources:
            read = await session.read_resource(resources[0].uri)
            report["read"] = [str(contents.uri) for contents in read.contents]
        if era != "legacy":
            report["era"] = session.protocol_version
        if answer is not None:
            report["asked"] = asked
        return report


async def main():
    args = sys.argv[1:]
    era, answer, program, env = "legacy", None, PROGRAM, {}
    while args[:1] in (["--era"], ["--answer"], ["--program"], ["--env"]):
        option = args[0]
        if option == "--era" and (len(args) < 2 or args[1] not in ERAS):
            raise SystemExit(f"--era must be one of {', '.join(ERAS)}")
        if len(args) < 2:
            raise SystemExit(f"{option} needs a value")
        value, args = args[1], args[2:]
        if option == "--era":
            era = value
        elif option == "--answer":
            answer = value
        elif option == "--env":
            name, _, env[name] = value.partition("=")
        else:
            with open(value, encoding="utf-8") as file:
                program = file.read()
    if not args:
        raise SystemExit(__doc__)
    mode = args[0]
    if mode == "stdio":
        params = StdioServerParameters(command=args[1], args=["serve", "--config", args[2]])
        async with stdio_client(params) as (read, write):
            report = await exercise(read, write, era, answer, program)
    elif mode == "command":
        params = StdioServerParameters(command=args[1], args=args[2:], env=env or None)
        async with stdio_client(params) as (read, write):
            report = await exercise(read, write, era, answer, program)
    elif mode == "http":
        async with streamable_http_client(args[1]) as (read, write):
            report = await exercise(read, write, era, answer, program)
    elif mode == "sse":
        if era != "legacy":
            raise SystemExit("the sse mode is legacy-only")
        async with sse_client(args[1]) as (read, write):
            report = await exercise(read, write, answer=answer, program=program)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
