#!/usr/bin/env python3
"""Checks oauth_server.py with a real OAuth client: the official Python SDK's.

    oauth_selfcheck.py [--auth-method none|client_secret_post|client_secret_basic]

Starts `oauth_server.py --port 0 --token-lifetime 2`, connects the SDK's streamable HTTP client
through its `OAuthClientProvider` (discovery from the 401, dynamic registration, PKCE, a
headless redirect handler that reads the code from the 302 without following it), lists the
tools, calls `whoami`, waits past the token's lifetime and calls it again: the SDK must have
refreshed (token serial 2, one refresh grant, one registration, one authorization). Prints what
it saw as JSON and exits 0 when every check held.
"""

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def text(result):
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def check(base, auth_method):
    redirected = {}

    async def redirect_handler(url):
        # A headless "browser": the server approves at once, so its 302 carries the code.
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(url)
        assert response.status_code == 302, (response.status_code, response.text)
        location = urlparse(response.headers["location"])
        assert f"{location.scheme}://{location.netloc}" == "http://127.0.0.1:33418", location
        redirected.update({k: v[0] for k, v in parse_qs(location.query).items()})

    async def callback_handler():
        assert "code" in redirected, redirected
        return AuthorizationCodeResult(
            code=redirected["code"], state=redirected.get("state"), iss=redirected.get("iss")
        )

    metadata = {"client_name": "oauth-selfcheck", "redirect_uris": ["http://127.0.0.1:33418/callback"]}
    if auth_method:
        metadata["token_endpoint_auth_method"] = auth_method
    storage = Memory()
    auth = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata.model_validate(metadata),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = sorted(tool.name for tool in (await session.list_tools()).tools)
                first = json.loads(text(await session.call_tool("whoami", {})))
                await asyncio.sleep(2.5)
                second = json.loads(text(await session.call_tool("whoami", {})))
                echoed = text(await session.call_tool("echo", {"text": "hello"}))
    async with httpx2.AsyncClient() as http:
        stats = (await http.get(f"{base}/stats")).json()
    report = {
        "tools": tools,
        "first": first,
        "second": second,
        "echo": echoed,
        "iss": redirected.get("iss"),
        "client_auth": storage.client_info.token_endpoint_auth_method,
        "stats": stats,
    }
    checks = [
        tools == ["echo", "whoami"],
        first["token_serial"] == 1,
        second["token_serial"] == 2,
        first["client_id"] == second["client_id"] == storage.client_info.client_id,
        echoed == "hello",
        redirected.get("iss") == base,
        stats["registrations"] == 1,
        stats["authorizations"] == 1,
        stats["code_grants"] == 1,
        stats["refresh_grants"] == 1,
        stats["tool_calls"] == 3,
    ]
    report["ok"] = all(checks)
    return report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--auth-method", choices=["none", "client_secret_post", "client_secret_basic"])
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("oauth_server.py")), "--port", "0", "--token-lifetime", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:"), line
        report = asyncio.run(check(line.removeprefix("listening on "), args.auth_method))
    finally:
        server.terminate()
        server.wait()
    print(json.dumps(report, indent=2))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
