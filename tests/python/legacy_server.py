#!/usr/bin/env python3
"""A small hand-written legacy MCP server over stdio, as many are: no SDK, the `initialize`
handshake only, and every method it does not know answered with an empty result `{}` (so a
`server/discover` probe gets `{}`, not an error).

    legacy_server.py RECORD [TOOLS [PROMPTS]]

Each `initialize` request's params are appended to the file RECORD as one JSON line. The
answer echoes the protocolVersion the client asked for (as servers that take whatever they are
given do), with the `tools.listChanged` capability (and `prompts` when PROMPTS is given). One
tool: `hello {name}` answers text `hello <name>`. TOOLS, a JSON array of names, adds tools
that answer `<name> ran` (a description `from the server`); PROMPTS, a JSON array of names,
serves prompts whose one message is `<name> from the server`.
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
    extra = json.loads(sys.argv[2]) if len(sys.argv) > 2 else []
    prompts = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    tools = TOOLS + [
        {"name": name, "description": "from the server", "inputSchema": {"type": "object"}}
        for name in extra
    ]
    capabilities = {"tools": {"listChanged": True}}
    if prompts is not None:
        capabilities["prompts"] = {}
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
                    "capabilities": capabilities,
                    "serverInfo": {"name": "legacy-server", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(message["id"], {"tools": tools})
        elif method == "tools/call" and params.get("name") in extra:
            answer(message["id"], {"content": [{"type": "text", "text": f"{params['name']} ran"}]})
        elif method == "tools/call":
            name = (params.get("arguments") or {}).get("name", "")
            answer(message["id"], {"content": [{"type": "text", "text": f"hello {name}"}]})
        elif method == "prompts/list" and prompts is not None:
            answer(message["id"], {"prompts": [{"name": name} for name in prompts]})
        elif method == "prompts/get" and prompts is not None:
            text = f"{params.get('name')} from the server"
            message_ = {"role": "user", "content": {"type": "text", "text": text}}
            answer(message["id"], {"messages": [message_]})
        else:
            answer(message["id"], {})


if __name__ == "__main__":
    main()
