#!/usr/bin/env python3
"""A small hand-written legacy MCP server over stdio, as many are: no SDK, the `initialize`
handshake only, and every method it does not know answered with an empty result `{}` (so a
`server/discover` probe gets `{}`, not an error).

    legacy_server.py RECORD

Each `initialize` request's params are appended to the file RECORD as one JSON line. The
answer echoes the protocolVersion the client asked for (as servers that take whatever they are
given do), with the `tools.listChanged` capability. One tool: `hello {name}` answers text
`hello <name>`.
"""

import json
import sys

TOOLS = [
    {
        "name": "hello",
        "description": "Greets someone.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
]


def answer(message_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main():
    record = sys.argv[1]
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer: nothing to say
        method, params = message["method"], message.get("params") or {}
        if method == "initialize":
            with open(record, "a", encoding="utf-8") as file:
                file.write(json.dumps(params) + "\n")
            answer(
                message["id"],
                {
                    "protocolVersion": params.get("protocolVersion"),
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "legacy-server", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(message["id"], {"tools": TOOLS})
        elif method == "tools/call":
            name = (params.get("arguments") or {}).get("name", "")
            answer(message["id"], {"content": [{"type": "text", "text": f"hello {name}"}]})
        else:
            answer(message["id"], {})


if __name__ == "__main__":
    main()
