//! `runbyte-test-server`: an MCP server that misbehaves on purpose, so that a client's or a
//! gateway's tests can provoke each failure they must survive.
//!
//! Run it: `cargo run -p runbyte-test-server -- --help`.
//!
//! # Transports
//!
//! | flag | serves |
//! |---|---|
//! | `--transport stdio` (default) | JSON-RPC lines on stdin/stdout; exits when stdin closes |
//! | `--transport http --port N` | streamable HTTP at `http://127.0.0.1:N/mcp` |
//! | `--transport sse --port N` | the 2024-11-05 HTTP+SSE transport: `GET /sse` opens a session (first event `endpoint` with `/message?sessionId=...`), `POST /message?sessionId=...` answers 202 and the response arrives as `event: message` |
//!
//! For http and sse, port 0 picks a free port, and the server prints
//! `listening on http://127.0.0.1:PORT/mcp` (or `.../sse`) on stderr once it accepts
//! connections. In sse mode `POST /sse` answers 405, so a client that tries streamable HTTP
//! first falls back; an unknown session answers 404, a body that is not JSON 400.
//!
//! # Tools (always served)
//!
//! | tool | arguments | does |
//! |---|---|---|
//! | `echo` | `message` | text: the message |
//! | `add` | `a`, `b` (numbers) | text: `{"sum": a+b}` |
//! | `slow` | `ms`, `steps?` (default 5) | sleeps; with a `progressToken`, sends `steps` progress notifications |
//! | `huge` | `bytes` (≤ 256 MiB) | a text block of exactly that many bytes (`abc...z` repeated) |
//! | `crash` | `code?` (default 1) | the process exits at once with that code, any transport |
//! | `fail` | `message` | a result with `isError: true` |
//! | `rpc_error` | `code?` (default -32603), `message?` | a JSON-RPC error instead of a result |
//! | `structured` | `n` (≤ 10000) | `structuredContent` `{n, squares: [1, 4, .., n²]}`; the tool has an `outputSchema` |
//! | `image` | | an image block: a 1x1 PNG |
//! | `mixed` | | a text, an image and an embedded text resource |
//! | `change_tools` | `tool?`, `description?` | adds tool `added_<k>` (k = 1, 2, ...), or with both gives listed tool `tool` that description instead; then sends `notifications/tools/list_changed` to every connected client |
//! | `stderr` | `text`, `lines?` (default 1) | writes `text` to stderr `lines` times |
//! | `env` | `name?` | JSON text: the variable's value or `null`; without `name` the sorted variable names |
//! | `cwd` | | the working directory |
//! | `pid` | | the process id |
//! | `spawn_grandchild` | | spawns `sleep 300` in the server's process group; returns its pid |
//! | `hang` | | never answers; a `notifications/cancelled` ends it |
//! | `cancelled_count` | | how many `notifications/cancelled` the process has received |
//! | `ask` | `message`, `kind?` (`elicit` default, or `sample`) | asks the client mid-call and returns the JSON of its answer as text (see below) |
//!
//! `ask` on a session opened with `initialize` (≤ 2025-11-25) sends the client, during the
//! call, `elicitation/create` (form mode; `requestedSchema` one required string `answer`) or
//! `sampling/createMessage` (one user message, `maxTokens` 100), even if the client did not
//! declare the capability, and returns the client's result as JSON text, e.g.
//! `{"action":"accept","content":{"answer":"blue"}}`; a refusal or error gives `isError: true`
//! with the error text. On 2026-07-28 it answers with an `InputRequiredResult`:
//! `inputRequests` `{"answer": <that same request>}` and `requestState`
//! `ask:<kind>:<message in hex>` (unsigned). The retry must echo that `requestState`
//! (otherwise JSON-RPC error -32602 `tampered requestState`) and gets the JSON of
//! `inputResponses.answer` as text; a retry without `answer` gets the same
//! `InputRequiredResult` again.
//!
//! With `RUNBYTE_TEST_TOOL_CHANGES` naming a JSON file, each listing reads it and applies
//! its changes to the tools: `{"echo": {"description": "..", "inputSchema": {..},
//! "annotations": {..}, "name": "echo_v2"}}` (each field replaces the tool's), so that a change
//! survives a restart (a gateway's reconnect lists it first thing).
//!
//! Bad arguments give a result with `isError: true` naming the argument; an unknown tool gives
//! JSON-RPC error -32602. Tools added by modes or by `change_tools` answer
//! `{"tool": <name>, "arguments": <arguments>}`. State (added tools, the cancellation count) is
//! shared by every session of the process. `notifications/tools/list_changed` goes to every
//! client that connected with `initialize`, and to every 2026-07-28 client listening through
//! `subscriptions/listen`.
//!
//! # Modes (`--mode`, repeatable or comma-separated)
//!
//! | mode | effect |
//! |---|---|
//! | `normal` | the default; the tools above |
//! | `crash-on-initialize` | exits with code 3 when `initialize` or `server/discover` arrives, after "crashing on initialize" on stderr |
//! | `hang-on-initialize` | never answers `initialize` or `server/discover`, and never exits on its own |
//! | `garbage-stdout` | stdio only: lines that are not JSON on stdout before the first message and after each message |
//! | `odd-names` | adds `get-user`, `list.items`, `2fa`, `delete`, `with space`, `ünïcode`, `a-b`, `a.b` |
//! | `many-tools` | adds `--tools N` (default 100) tools `tool_0000`... with realistic schemas |
//! | `slow-start` | sleeps `--start-delay-ms` (default 1000) before serving |
//! | `crash-on-list` | exits with code 4 when `tools/list` arrives |
//! | `hang-on-list` | never answers `tools/list` |
//! | `list-error` | answers `tools/list` with JSON-RPC error -32603 |
//! | `hostile-metadata` | adds tools whose descriptions hold `*/`, backticks, `${`, control and bidi characters, whose property names are not identifiers (`__proto__`, `with space`...), and tools named `constructor`, `__proto__`, `toString` and `""` |
//! | `complex-schemas` | adds `schema_nested`, `schema_unions`, `schema_allof`, `schema_refs` (recursive `$ref`), `schema_maps`, `schema_formats`, `schema_unconvertible` |
//! | `stubborn` | ignores SIGTERM and, on stdio, keeps running after stdin closes |
//! | `broken-schemas` | stdio only: each `tools/list` answer also holds `broken_null` (`"inputSchema": null`), `broken_missing` (no `inputSchema`), `broken_string` (a string) and `broken_deep` (nested 200 levels, past serde_json's recursion limit of 128); they echo when called |
//! | `huge-resources` | serves 3,000 resources `test://item/<n>` (pages of 500, 2 KiB descriptions, hostile names: about 6 MB) and the template `test://item/{id}`; takes `resources/subscribe` |
//! | `storm` | adds `storm {count}` (sends `count` `notifications/tools/list_changed` at once, ≤ 100000) and `list_count` (how many `tools/list` requests arrived so far) |
//! | `hang-on-relist` | answers the first `tools/list` of the process, never a later one |
//! | `apps` | an MCP Apps server (SEP-1865): adds `show_dashboard` (`_meta.ui.resourceUri` `ui://dashboard/main.html`) and the app-only `refresh_dashboard`; serves that resource as `text/html;profile=mcp-app` with `_meta.ui` csp, `test://apps/readme.txt` and the template `ui://dashboard/{view}` (see `apps.rs`) |
//! | `conformance` | adds the fixture surface of the official conformance suite's server scenarios, for 2025-11-25 and 2026-07-28: its `test_*` tools, `json_schema_2020_12_tool`, the resources `test://static-text`, `test://static-binary`, `test://watched-resource`, the template `test://template/{id}/data`, its prompts, `completion/complete`, `logging/setLevel`, resource subscriptions and list-changed notifications of tools, prompts and resources (listed in `conformance.rs`); the normal tools stay |
//! | `github` | adds `get_file_contents` (`owner`, `repo`, `path?`) with the GitHub MCP server's definition (description, title, read-only annotation), for a poisoned update through `RUNBYTE_TEST_TOOL_CHANGES`; it echoes like other mode tools |
//!
//! Other flags: `--page-size K` pages `tools/list` (cursor = offset); `--list-delay-ms` delays
//! each `tools/list`; `--list-ttl-ms MS` gives `tools/list` that `ttlMs` and takes away
//! `tools.listChanged` (`change_tools` then changes the tools silently); `--auth-token T` (http, sse) demands `Authorization: Bearer T` (401
//! otherwise); `--stateless` and `--json-response` (http); `--sse-absolute-endpoint` (sse);
//! `--max-protocol-version V` narrows the versions `initialize` may negotiate.

mod apps;
mod calls;
mod catalog;
mod cli;
mod conformance;
mod http;
mod server;
mod sse;
mod stdio;

use std::io::Write as _;

use clap::Parser as _;

use crate::cli::{Cli, Mode, Settings, Transport};
use crate::server::{SERVER_NAME, State};

fn main() -> std::process::ExitCode {
    let settings = match Settings::try_from(Cli::parse()) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("{SERVER_NAME}: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{SERVER_NAME}: cannot start the tokio runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(settings));
    // A blocking read of stdin may still be pending; it must not hold the exit back.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{SERVER_NAME}: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(settings: Settings) -> anyhow::Result<()> {
    if settings.has(Mode::Stubborn) {
        ignore_sigterm()?;
    }
    eprintln!(
        "{SERVER_NAME} {}: transport {}, modes {}",
        env!("CARGO_PKG_VERSION"),
        settings.transport_name(),
        settings.mode_names()
    );
    if !settings.start_delay.is_zero() {
        eprintln!(
            "{SERVER_NAME}: slow start, waiting {} ms",
            settings.start_delay.as_millis()
        );
        tokio::time::sleep(settings.start_delay).await;
    }
    let state = State::new(settings);
    match state.settings.transport {
        Transport::Stdio => stdio::serve(state).await,
        Transport::Http => http::serve(state).await,
        Transport::Sse => sse::serve(state).await,
    }
}

#[cfg(unix)]
fn ignore_sigterm() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terms = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        while terms.recv().await.is_some() {
            eprintln!("{SERVER_NAME}: ignoring SIGTERM (--mode stubborn)");
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn ignore_sigterm() -> anyhow::Result<()> {
    Ok(())
}

/// Ends the process at once, as a crash would: no answer, no cleanup, `why` on stderr.
pub fn exit_now(code: i32, why: &str) -> ! {
    eprintln!("{SERVER_NAME}: {why}");
    let _ = std::io::stderr().flush();
    std::process::exit(code)
}
