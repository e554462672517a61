#!/usr/bin/env python3
"""An OAuth-protected MCP server for the tests: one process, standard library only.

    oauth_server.py [--port P] [--token-lifetime SECONDS] [--client ID[:SECRET]]... [--log]

It serves on 127.0.0.1:P (P = 0: any free port) and prints `listening on http://127.0.0.1:P`
on stdout when it accepts connections. It is both:

- an OAuth 2.1 authorization server (issuer `http://127.0.0.1:P`):
    GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
    POST /register                                  RFC 7591 dynamic client registration
    GET  /authorize                                 approves at once: 302 to the redirect URI
                                                    with `code`, `state` and `iss` (RFC 9207)
    POST /token                                     `authorization_code` (PKCE S256 checked,
                                                    single-use codes) and `refresh_token` (a new
                                                    access token and a rotated refresh token)
- a protected MCP server (streamable HTTP, JSON answers, no sessions):
    POST /mcp                                       `initialize`, `ping`, `tools/list`,
                                                    `tools/call`; `server/discover` is refused
                                                    (-32601), so a client falls back to
                                                    `initialize`
    GET  /.well-known/oauth-protected-resource[/mcp] RFC 9728 metadata
  Every request to /mcp without a valid, unexpired bearer token is a 401 with
  `WWW-Authenticate: Bearer resource_metadata="…"` (and `error="invalid_token"` when a token was
  sent but is unknown or expired).
- GET /stats (no auth): counters as JSON, for the tests' assertions (`token_requests` and
  `client_secrets_received` count every request to /token, and those carrying a client secret).
- GET /switch?to=URL (no auth): the protected-resource metadata names URL as the authorization
  server from now on (a server that moved, or turned hostile); this server's own authorization
  server keeps working.

Tools: `whoami` answers `{"client_id": …, "token_serial": N}` (N: the Nth access token this
server issued: 1 from the code grant, 2 after the first refresh…); `echo {"text"}` answers the
text; `leak {"mode"}` sends the token back as text (default), inside JSON text and structured
content (`json`), inside an embedded resource (`resource`), as a JSON-RPC error (`rpc`), or with
`fail` as an error result. `/token` also takes the `client_credentials` grant (a pre-registered
client with a secret). `--client ID[:SECRET]` pre-registers a client (any loopback redirect URI; with a secret it
must authenticate with `client_secret_post` or `client_secret_basic`).
"""

import argparse
import base64
import hashlib
import hmac
import json
import secrets
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlparse, urlsplit, urlunsplit

SCOPE = "mcp:tools"
CODE_LIFETIME = 120
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

TOOLS = [
    {
        "name": "whoami",
        "description": "The OAuth client and the serial number of the access token this call carried.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "admin",
        "description": "Needs the `mcp:admin` scope: without it the call is refused with 403 insufficient_scope.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "leak",
        "description": "Returns the bearer token the call carried (as a result, or with `fail` as an error result): what a careless or hostile server may do.",
        "inputSchema": {
            "type": "object",
            "properties": {"fail": {"type": "boolean"}, "mode": {"type": "string"}},
        },
    },
    {
        "name": "revoke",
        "description": "Revokes every access token (as if the server restarted), and with `refresh` every refresh token too (as if the user revoked the grant).",
        "inputSchema": {"type": "object", "properties": {"refresh": {"type": "boolean"}}},
    },
    {
        "name": "echo",
        "description": "Answers the text it is given.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
]


class State:
    """Everything the server remembers, behind one lock."""

    def __init__(self, base, token_lifetime):
        self.base = base
        self.issuer = base
        self.resource = f"{base}/mcp"
        self.resource_metadata = f"{base}/.well-known/oauth-protected-resource/mcp"
        self.named_authorization_server = base
        self.token_lifetime = token_lifetime
        self.lock = threading.Lock()
        self.clients = {}  # client_id -> {"secret", "redirect_uris", ...}
        self.codes = {}  # code -> grant
        self.access = {}  # access token -> {"client_id", "serial", "expires", "scope"}
        self.refresh = {}  # refresh token -> {"client_id", "scope"}
        self.serial = 0
        self.stats = {
            "registrations": 0,
            "authorizations": 0,
            "code_grants": 0,
            "refresh_grants": 0,
            "rejected_expired": 0,
            "rejected_unknown": 0,
            "rejected_missing": 0,
            "token_errors": 0,
            "tool_calls": 0,
            "token_requests": 0,
            "client_secrets_received": 0,
            "client_credentials_grants": 0,
        }

    def issue(self, client_id, scope, with_refresh=True):
        """A new access token and (unless `with_refresh` is false) refresh token (caller holds
        the lock); the token answer."""
        self.serial += 1
        access = "at-" + secrets.token_urlsafe(24)
        self.access[access] = {
            "client_id": client_id,
            "serial": self.serial,
            "expires": time.monotonic() + self.token_lifetime,
            "scope": scope,
        }
        answer = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.token_lifetime,
            "scope": scope,
        }
        if with_refresh:
            refresh = "rt-" + secrets.token_urlsafe(24)
            self.refresh[refresh] = {"client_id": client_id, "scope": scope}
            answer["refresh_token"] = refresh
        return answer


def is_loopback_redirect(uri):
    """An `http://127.0.0.1:<any port>/…` (or localhost, [::1]) redirect URI (RFC 8252 §7.3)."""
    try:
        parsed = urlparse(uri)
        parsed.port  # raises on a malformed port
    except ValueError:
        return False
    return (
        parsed.scheme == "http"
        and parsed.hostname in ("127.0.0.1", "localhost", "::1")
        and not parsed.fragment
    )


def with_query(uri, params):
    """`uri` with `params` added to its query."""
    parts = urlsplit(uri)
    query = parts.query + ("&" if parts.query else "") + urlencode(params)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def s256(verifier):
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "runbyte-oauth-test/1"
    state: State = None  # set by main()
    log = False

    # --- plumbing -------------------------------------------------------------------------

    def log_message(self, format, *args):
        if self.log:
            sys.stderr.write("oauth_server: " + (format % args) + "\n")

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send(self, status, body=b"", content_type=None, headers=()):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status, value, headers=()):
        self.send(status, json.dumps(value).encode(), "application/json", headers)

    def oauth_error(self, status, error, description, headers=()):
        """An RFC 6749 §5.2 error answer."""
        with self.state.lock:
            self.state.stats["token_errors"] += 1
        self.send_json(
            status,
            {"error": error, "error_description": description},
            [("Cache-Control", "no-store"), ("Pragma", "no-cache"), *headers],
        )

    def form(self):
        """The request's url-encoded form; a repeated parameter is an error (RFC 6749 §3.1)."""
        parsed = parse_qs(self.body().decode("utf-8", "replace"), keep_blank_values=True)
        repeated = [name for name, values in parsed.items() if len(values) > 1]
        if repeated:
            raise ValueError(f"repeated parameter {repeated[0]}")
        return {name: values[0] for name, values in parsed.items()}

    # --- routing --------------------------------------------------------------------------

    def do_GET(self):
        path = urlparse(self.path).path
        if path == "/mcp":
            if self.authorized() is not None:
                self.send(405, b"", headers=[("Allow", "POST")])
        elif path == "/.well-known/oauth-authorization-server":
            self.as_metadata()
        elif path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
        ):
            self.send_json(
                200,
                {
                    "resource": self.state.resource,
                    "authorization_servers": [self.state.named_authorization_server],
                    "scopes_supported": [SCOPE],
                    "bearer_methods_supported": ["header"],
                    "resource_name": "Runbyte's OAuth test server",
                },
            )
        elif path == "/authorize":
            self.authorize()
        elif path == "/switch":
            to = parse_qs(urlparse(self.path).query).get("to", [""])[0]
            with self.state.lock:
                self.state.named_authorization_server = to
            self.send_json(200, {"authorization_servers": [to]})
        elif path == "/stats":
            with self.state.lock:
                stats = dict(self.state.stats)
            self.send_json(200, stats)
        else:
            self.send(404, b"not found\n", "text/plain")

    def do_POST(self):
        path = urlparse(self.path).path
        if path == "/mcp":
            self.mcp()
        elif path == "/register":
            self.register()
        elif path == "/token":
            self.token()
        else:
            self.body()
            self.send(404, b"not found\n", "text/plain")

    def do_DELETE(self):
        if urlparse(self.path).path == "/mcp":
            if self.authorized() is not None:
                self.send(405, b"", headers=[("Allow", "POST")])
        else:
            self.send(404, b"not found\n", "text/plain")

    # --- the authorization server ---------------------------------------------------------

    def as_metadata(self):
        base = self.state.base
        self.send_json(
            200,
            {
                "issuer": self.state.issuer,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "scopes_supported": [SCOPE],
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "token_endpoint_auth_methods_supported": [
                    "none",
                    "client_secret_post",
                    "client_secret_basic",
                ],
                "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": True,
            },
        )

    def register(self):
        try:
            metadata = json.loads(self.body() or b"null")
        except ValueError:
            metadata = None
        if not isinstance(metadata, dict):
            return self.send_json(
                400,
                {"error": "invalid_client_metadata", "error_description": "not a JSON object"},
            )
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            return self.send_json(
                400,
                {
                    "error": "invalid_redirect_uri",
                    "error_description": "redirect_uris must be a non-empty list of URIs",
                },
            )
        for uri in uris:
            parsed = urlparse(uri)
            if parsed.fragment or not parsed.scheme:
                return self.send_json(
                    400,
                    {"error": "invalid_redirect_uri", "error_description": f"bad redirect URI {uri}"},
                )
        method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in ("none", "client_secret_post", "client_secret_basic"):
            return self.send_json(
                400,
                {
                    "error": "invalid_client_metadata",
                    "error_description": f"unsupported token_endpoint_auth_method {method}",
                },
            )
        grant_types = metadata.get("grant_types", ["authorization_code"])
        unsupported = [g for g in grant_types if g not in ("authorization_code", "refresh_token")]
        if unsupported:
            return self.send_json(
                400,
                {
                    "error": "invalid_client_metadata",
                    "error_description": f"unsupported grant type {unsupported[0]}",
                },
            )
        client_id = "client-" + secrets.token_hex(8)
        answer = dict(metadata)
        answer.update(
            {
                "client_id": client_id,
                "client_id_issued_at": int(time.time()),
                "redirect_uris": uris,
                "token_endpoint_auth_method": method,
                "grant_types": grant_types,
                "response_types": metadata.get("response_types", ["code"]),
            }
        )
        secret = None
        if method != "none":
            secret = "secret-" + secrets.token_urlsafe(16)
            answer["client_secret"] = secret
            answer["client_secret_expires_at"] = 0
        with self.state.lock:
            self.state.clients[client_id] = {"secret": secret, "redirect_uris": uris}
            self.state.stats["registrations"] += 1
        self.send_json(201, answer, [("Cache-Control", "no-store")])

    def authorize(self):
        query = parse_qs(urlparse(self.path).query, keep_blank_values=True)
        params = {name: values[0] for name, values in query.items()}
        client_id = params.get("client_id", "")
        with self.state.lock:
            client = self.state.clients.get(client_id)
        # Errors before the redirect URI is known to be the client's are shown, never redirected.
        if client is None:
            return self.send(400, f"unknown client_id {client_id!r}\n".encode(), "text/plain")
        redirect_uri = params.get("redirect_uri")
        if redirect_uri is None:
            if len(client["redirect_uris"]) != 1:
                return self.send(400, b"redirect_uri is required\n", "text/plain")
            redirect_uri = client["redirect_uris"][0]
        elif redirect_uri not in client["redirect_uris"] and not is_loopback_redirect(redirect_uri):
            return self.send(
                400, f"redirect_uri {redirect_uri} is not registered\n".encode(), "text/plain"
            )

        def fail(error, description):
            answer = {"error": error, "error_description": description}
            if "state" in params:
                answer["state"] = params["state"]
            answer["iss"] = self.state.issuer
            self.send(302, b"", headers=[("Location", with_query(redirect_uri, answer))])

        if params.get("response_type") != "code":
            return fail("unsupported_response_type", "only response_type=code")
        if not params.get("code_challenge"):
            return fail("invalid_request", "code_challenge is required (PKCE)")
        if params.get("code_challenge_method") != "S256":
            return fail("invalid_request", "code_challenge_method must be S256")
        resource = params.get("resource")
        if resource is not None and resource != self.state.resource:
            return fail("invalid_target", f"resource must be {self.state.resource}")
        scope = params.get("scope") or SCOPE
        code = "code-" + secrets.token_urlsafe(24)
        with self.state.lock:
            self.state.codes[code] = {
                "client_id": client_id,
                "redirect_uri": redirect_uri,
                "redirect_uri_sent": "redirect_uri" in params,
                "challenge": params["code_challenge"],
                "scope": scope,
                "expires": time.monotonic() + CODE_LIFETIME,
            }
            self.state.stats["authorizations"] += 1
        answer = {"code": code}
        if "state" in params:
            answer["state"] = params["state"]
        answer["iss"] = self.state.issuer
        self.send(302, b"", headers=[("Location", with_query(redirect_uri, answer))])

    def client_of(self, form):
        """The authenticated client (RFC 6749 §2.3): its id, or an error already sent (None)."""
        basic = None
        header = self.headers.get("Authorization", "")
        if header[:6].lower() == "basic ":
            try:
                decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
                name, _, password = decoded.partition(":")
                basic = (unquote(name), unquote(password))
            except ValueError:
                self.oauth_error(401, "invalid_client", "malformed Basic credentials",
                                 [("WWW-Authenticate", 'Basic realm="token"')])
                return None
        client_id = basic[0] if basic else form.get("client_id")
        if basic and form.get("client_id") not in (None, basic[0]):
            self.oauth_error(400, "invalid_request", "client_id differs from the Basic credentials")
            return None
        if basic and "client_secret" in form:
            self.oauth_error(400, "invalid_request", "more than one client authentication method")
            return None
        with self.state.lock:
            client = self.state.clients.get(client_id or "")
        if client is None:
            self.oauth_error(401, "invalid_client", f"unknown client {client_id!r}")
            return None
        if client["secret"] is not None:
            given = basic[1] if basic else form.get("client_secret")
            if given is None or not hmac.compare_digest(given, client["secret"]):
                self.oauth_error(401, "invalid_client", "wrong or missing client secret",
                                 [("WWW-Authenticate", 'Basic realm="token"')] if basic else [])
                return None
        return client_id

    def token(self):
        try:
            form = self.form()
        except ValueError as e:
            return self.oauth_error(400, "invalid_request", str(e))
        with self.state.lock:
            self.state.stats["token_requests"] += 1
            if "client_secret" in form or self.headers.get("Authorization", "")[:6].lower() == "basic ":
                self.state.stats["client_secrets_received"] += 1
        client_id = self.client_of(form)
        if client_id is None:
            return
        resource = form.get("resource")
        if resource is not None and resource != self.state.resource:
            return self.oauth_error(400, "invalid_target", f"resource must be {self.state.resource}")
        grant_type = form.get("grant_type")
        state = self.state
        if grant_type == "authorization_code":
            with state.lock:
                grant = state.codes.pop(form.get("code", ""), None)  # single use, even on failure
            if grant is None:
                return self.oauth_error(400, "invalid_grant", "unknown or already used code")
            if grant["expires"] < time.monotonic():
                return self.oauth_error(400, "invalid_grant", "the code expired")
            if grant["client_id"] != client_id:
                return self.oauth_error(400, "invalid_grant", "the code was issued to another client")
            if grant["redirect_uri_sent"] or "redirect_uri" in form:
                if form.get("redirect_uri") != grant["redirect_uri"]:
                    return self.oauth_error(400, "invalid_grant", "redirect_uri does not match")
            verifier = form.get("code_verifier")
            if not verifier:
                return self.oauth_error(400, "invalid_request", "code_verifier is required")
            if not hmac.compare_digest(s256(verifier), grant["challenge"]):
                return self.oauth_error(400, "invalid_grant", "PKCE verification failed")
            with state.lock:
                answer = state.issue(client_id, grant["scope"])
                state.stats["code_grants"] += 1
        elif grant_type == "refresh_token":
            with state.lock:
                old = state.refresh.get(form.get("refresh_token", ""))
                if old is not None and old["client_id"] == client_id:
                    scope = old["scope"]
                    asked = form.get("scope")
                    if asked is not None and not set(asked.split()) <= set(scope.split()):
                        answer = None
                    else:
                        del state.refresh[form["refresh_token"]]  # rotated: the old one is spent
                        answer = state.issue(client_id, asked or scope)
                        state.stats["refresh_grants"] += 1
                else:
                    old = None
            if old is None:
                return self.oauth_error(400, "invalid_grant", "unknown, spent or foreign refresh token")
            if answer is None:
                return self.oauth_error(400, "invalid_scope", "more scope than was granted")
        elif grant_type == "client_credentials":
            with state.lock:
                if state.clients.get(client_id, {}).get("secret") is None:
                    answer = None
                else:
                    answer = state.issue(client_id, form.get("scope") or SCOPE, with_refresh=False)
                    state.stats["client_credentials_grants"] += 1
            if answer is None:
                return self.oauth_error(400, "unauthorized_client", "a public client has no client_credentials grant")
        elif grant_type is None:
            return self.oauth_error(400, "invalid_request", "grant_type is required")
        else:
            return self.oauth_error(400, "unsupported_grant_type", f"{grant_type} is not supported")
        self.send_json(200, answer, [("Cache-Control", "no-store"), ("Pragma", "no-cache")])

    # --- the protected MCP server ---------------------------------------------------------

    def authorized(self):
        """The bearer token's record, or None after answering 401."""
        header = self.headers.get("Authorization", "")
        challenge = f'Bearer resource_metadata="{self.state.resource_metadata}", scope="{SCOPE}"'
        if header[:7].lower() != "bearer ":
            with self.state.lock:
                self.state.stats["rejected_missing"] += 1
            self.body()
            self.send_json(
                401,
                {"error": "unauthorized", "error_description": "a bearer token is required"},
                [("WWW-Authenticate", challenge)],
            )
            return None
        token = header[7:].strip()
        with self.state.lock:
            record = self.state.access.get(token)
            expired = record is not None and record["expires"] <= time.monotonic()
            if record is None:
                self.state.stats["rejected_unknown"] += 1
            elif expired:
                self.state.stats["rejected_expired"] += 1
        if record is None or expired:
            why = "the access token expired" if expired else "unknown access token"
            self.body()
            self.send_json(
                401,
                {"error": "invalid_token", "error_description": why},
                [("WWW-Authenticate", f'{challenge}, error="invalid_token", error_description="{why}"')],
            )
            return None
        return {**record, "token": token}

    def mcp(self):
        record = self.authorized()
        if record is None:
            return
        try:
            message = json.loads(self.body())
        except ValueError:
            return self.send_json(
                400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            )
        if (
            isinstance(message, dict)
            and message.get("method") == "tools/call"
            and (message.get("params") or {}).get("name") == "admin"
            and "mcp:admin" not in (record.get("scope") or "").split()
        ):
            challenge = (
                f'Bearer error="insufficient_scope", scope="{SCOPE} mcp:admin", '
                f'resource_metadata="{self.state.resource_metadata}"'
            )
            return self.send_json(
                403,
                {"error": "insufficient_scope", "error_description": "admin needs mcp:admin"},
                [("WWW-Authenticate", challenge)],
            )
        if isinstance(message, list):  # a batch (2025-03-26)
            answers = [a for a in (self.answer(m, record) for m in message) if a is not None]
            if not answers:
                return self.send(202)
            return self.send_json(200, answers)
        answer = self.answer(message, record)
        if answer is None:
            return self.send(202)
        self.send_json(200, answer)

    def answer(self, message, record):
        """The JSON-RPC answer to one message; None for a notification or a response."""
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return None
        id, method, params = message["id"], message["method"], message.get("params") or {}

        def result(value):
            return {"jsonrpc": "2.0", "id": id, "result": value}

        def error(code, text):
            return {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}

        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
            return result(
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "oauth-test-server", "version": "1.0.0"},
                }
            )
        if method == "ping":
            return result({})
        if method == "tools/list":
            return result({"tools": TOOLS})
        if method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            with self.state.lock:
                self.state.stats["tool_calls"] += 1
            if name == "whoami":
                text = json.dumps({"client_id": record["client_id"], "token_serial": record["serial"]})
            elif name == "leak":
                token = record["token"]
                text = f"your token is {token}"
                mode = arguments.get("mode")
                if arguments.get("fail"):
                    return result({"content": [{"type": "text", "text": text}], "isError": True})
                if mode == "json":
                    debug = {"debug": {"headers": {"authorization": f"Bearer {token}"}, token: 1}}
                    return result(
                        {
                            "content": [{"type": "text", "text": json.dumps(debug)}],
                            "structuredContent": debug,
                            "isError": False,
                        }
                    )
                if mode == "resource":
                    return result(
                        {
                            "content": [
                                {
                                    "type": "resource",
                                    "resource": {"uri": "debug://request", "mimeType": "text/plain", "text": text},
                                }
                            ],
                            "isError": False,
                        }
                    )
                if mode == "rpc":
                    return error(-32603, f"internal error: {text}")
            elif name == "admin":
                text = json.dumps({"admin": True, "scope": record.get("scope")})
            elif name == "revoke":
                with self.state.lock:
                    self.state.access.clear()
                    if arguments.get("refresh"):
                        self.state.refresh.clear()
                text = "revoked"
            elif name == "echo":
                if not isinstance(arguments.get("text"), str):
                    return error(-32602, "echo needs a string `text`")
                text = arguments["text"]
            else:
                return error(-32602, f"unknown tool {name}")
            return result({"content": [{"type": "text", "text": text}], "isError": False})
        return error(-32601, f"Method not found: {method}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token-lifetime", type=int, default=3600)
    parser.add_argument("--client", action="append", default=[], metavar="ID[:SECRET]")
    parser.add_argument("--log", action="store_true", help="log each request on stderr")
    args = parser.parse_args()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET

    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]
    state = State(f"http://127.0.0.1:{port}", args.token_lifetime)
    for entry in args.client:
        client_id, _, secret = entry.partition(":")
        state.clients[client_id] = {"secret": secret or None, "redirect_uris": []}
    Handler.state = state
    Handler.log = args.log
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
