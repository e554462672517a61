//! Command-line flags, and the settings they turn into.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, ValueEnum};
use rmcp::model::ProtocolVersion;

/// Extra tools served by `--mode many-tools` when `--tools` is not given.
const DEFAULT_MANY_TOOLS: usize = 100;
/// Start delay of `--mode slow-start` when `--start-delay-ms` is not given.
const DEFAULT_START_DELAY_MS: u64 = 1000;

#[derive(Debug, Parser)]
#[command(
    name = "runbyte-test-server",
    version,
    about = "An MCP server that misbehaves on purpose, for testing MCP clients and gateways.",
    long_about = None,
    after_help = AFTER_HELP,
)]
pub struct Cli {
    /// How clients reach the server. http serves streamable HTTP at /mcp; sse serves the
    /// 2024-11-05 HTTP+SSE transport (GET /sse, POST /message?sessionId=...). Both bind to
    /// 127.0.0.1 and print `listening on <url>` on stderr.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,

    /// TCP port on 127.0.0.1 for http and sse; 0 lets the system pick a free port.
    #[arg(long, default_value_t = 0)]
    pub port: u16,

    /// A misbehaviour to switch on. Repeatable, or comma-separated.
    #[arg(long = "mode", value_enum, value_delimiter = ',')]
    pub modes: Vec<Mode>,

    /// Serve this many extra tools `tool_0000`, `tool_0001`, ... with realistic schemas
    /// (implies --mode many-tools; that mode alone serves 100).
    #[arg(long, value_name = "N")]
    pub tools: Option<usize>,

    /// Page size of tools/list; 0 sends every tool in one page. With paging the client must
    /// follow `nextCursor`.
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub page_size: usize,

    /// Sleep this long before serving (implies --mode slow-start; that mode alone waits 1000 ms).
    #[arg(long, value_name = "MS")]
    pub start_delay_ms: Option<u64>,

    /// Delay every tools/list answer by this long.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub list_delay_ms: u64,

    /// tools/list answers (and with --mode conformance prompts/list) say they stay fresh this
    /// long (`ttlMs`), and the server declares no `listChanged` and sends no list_changed
    /// notifications (`change_tools`, `test_trigger_prompt_change` change them silently): a
    /// client learns of a change only by listing again.
    #[arg(long, value_name = "MS")]
    pub list_ttl_ms: Option<u64>,

    /// http and sse: refuse requests without `Authorization: Bearer <TOKEN>` (401).
    #[arg(long, value_name = "TOKEN")]
    pub auth_token: Option<String>,

    /// http: answer plain requests with `application/json` instead of an SSE stream
    /// (only without sessions, so it implies --stateless).
    #[arg(long)]
    pub json_response: bool,

    /// http: serve without sessions (no `Mcp-Session-Id`).
    #[arg(long)]
    pub stateless: bool,

    /// sse: announce the message endpoint as an absolute URL instead of a path.
    #[arg(long)]
    pub sse_absolute_endpoint: bool,

    /// Support protocol versions up to this one only (for example 2024-11-05), so that
    /// `initialize` negotiates it or older.
    #[arg(long, value_name = "VERSION")]
    pub max_protocol_version: Option<String>,
}

const AFTER_HELP: &str = "\
Tools (always served):
  echo {message}            text: the message
  add {a, b}                text: {\"sum\": a+b}
  slow {ms, steps?}         sleeps ms (steps progress notifications if the call has a progressToken)
  huge {bytes}              text of exactly that many bytes
  crash {code?}             the process exits at once with code (default 1)
  fail {message}            result with isError: true
  rpc_error {code?, message?}  a JSON-RPC error instead of a result (default -32603)
  structured {n}            structuredContent {n, squares: [1, 4, .., n*n]}, with an outputSchema
  image                     an image block (1x1 PNG)
  mixed                     a text, an image and an embedded text resource
  change_tools              adds tool added_<k>, sends notifications/tools/list_changed
  stderr {text, lines?}     writes text to stderr, lines times
  env {name?}               JSON: the variable's value or null; without name the sorted names
  cwd                       the working directory
  pid                       the process id
  spawn_grandchild          spawns `sleep 300` in this process group; returns its pid
  hang                      never answers; counts the notifications/cancelled it gets
  cancelled_count           how many notifications/cancelled arrived so far
  calls_count               how many tools/call requests arrived so far, this one included
  ask {message, kind?}      asks the client (kind elicit, the default, or sample) and returns
                            its answer as JSON text: a request to the client mid-call before
                            2026-07-28, an InputRequiredResult (key `answer`) on 2026-07-28
Tools added by modes answer {\"tool\": <name>, \"arguments\": <arguments>}.";

/// The transport a client uses to reach this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// JSON-RPC lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP at /mcp.
    Http,
    /// The legacy 2024-11-05 HTTP+SSE transport at /sse and /message.
    Sse,
}

/// A misbehaviour that a test switches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Mode {
    /// The default: the normal tools only (they are always served).
    Normal,
    /// Exit with code 3 when `initialize` (or `server/discover`) arrives, after writing
    /// "crashing on initialize" to stderr.
    CrashOnInitialize,
    /// Never answer `initialize` (or `server/discover`).
    HangOnInitialize,
    /// stdio only: write lines that are not JSON to stdout before the first message and after
    /// every message.
    GarbageStdout,
    /// Add tools whose names are not identifiers: get-user, list.items, 2fa, delete,
    /// "with space", ünïcode, and a-b / a.b, which collide once cleaned.
    OddNames,
    /// Add --tools N (default 100) tools tool_0000... with realistic schemas.
    ManyTools,
    /// List none of the normal tools (echo, add, ...): only what other modes add, so that
    /// `--mode generated-only --tools N` serves a catalogue of exactly N tools (benches).
    GeneratedOnly,
    /// Sleep --start-delay-ms (default 1000) before serving.
    SlowStart,
    /// Exit with code 4 when `tools/list` arrives, after writing "crashing on tools/list".
    CrashOnList,
    /// Never answer `tools/list`.
    HangOnList,
    /// Answer `tools/list` with a JSON-RPC error (-32603).
    ListError,
    /// Add tools with hostile metadata: comment terminators, backticks, `${`, control and bidi
    /// characters in descriptions; non-identifier and prototype-polluting property names.
    HostileMetadata,
    /// Add tools whose schemas cover JSON Schema for codegen: nesting, tuples, enums, const,
    /// unions, allOf, nullable, additionalProperties, $ref/$defs (recursive), boolean
    /// schemas, formats, and one schema that cannot be converted.
    ComplexSchemas,
    /// Ignore SIGTERM, and on stdio keep running after stdin closes: only SIGKILL ends it.
    Stubborn,
    /// stdio only: every `tools/list` answer also holds tools whose `inputSchema` is broken:
    /// `broken_null` (null), `broken_missing` (absent), `broken_string` (a string) and
    /// `broken_deep` (nested 200 levels, past a JSON parser's recursion limit).
    BrokenSchemas,
    /// Add `storm {count}` (sends `count` `notifications/tools/list_changed` at once) and
    /// `list_count` (how many `tools/list` requests arrived so far).
    Storm,
    /// Answer the first `tools/list` of the process; never answer a later one.
    HangOnRelist,
    /// Serve resources (taking `resources/subscribe`): 3,000 `test://item/<n>` in pages of 500,
    /// each with a 2 KiB description and a name holding `*/`, an escape sequence and a bidi
    /// override (about 6 MB in all), and the template `test://item/{id}`.
    HugeResources,
    /// An MCP Apps server (SEP-1865): a tool whose `_meta.ui.resourceUri` is a `ui://` resource
    /// served as `text/html;profile=mcp-app` with `_meta.ui` csp (see `apps.rs`).
    Apps,
    /// Add the fixture surface of the official conformance suite's server scenarios: its
    /// `test_*` tools, resources, template and prompts, completions, logging and list-changed
    /// notifications of each kind, for both 2025-11-25 and 2026-07-28 (see `conformance.rs`).
    Conformance,
    /// Add `get_file_contents` (owner, repo, path), with the definition of the GitHub MCP
    /// server's tool of that name: the real tool that published tool-poisoning attacks
    /// rewrote (see `catalog::github_tool`).
    Github,
}

/// What the server does, from the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub transport: Transport,
    pub port: u16,
    pub modes: BTreeSet<Mode>,
    pub extra_tools: usize,
    pub page_size: usize,
    pub start_delay: Duration,
    pub list_delay: Duration,
    pub list_ttl_ms: Option<u64>,
    pub auth_token: Option<String>,
    pub json_response: bool,
    pub stateless: bool,
    pub sse_absolute_endpoint: bool,
    pub max_protocol_version: Option<ProtocolVersion>,
}

impl Settings {
    pub fn has(&self, mode: Mode) -> bool {
        self.modes.contains(&mode)
    }

    pub fn transport_name(&self) -> String {
        self.transport
            .to_possible_value()
            .map_or_else(String::new, |value| value.get_name().to_owned())
    }

    /// The modes by name, for the startup line on stderr.
    pub fn mode_names(&self) -> String {
        let names: Vec<String> = self
            .modes
            .iter()
            .filter_map(|mode| mode.to_possible_value())
            .map(|value| value.get_name().to_owned())
            .collect();
        if names.is_empty() {
            "normal".to_owned()
        } else {
            names.join(",")
        }
    }
}

impl TryFrom<Cli> for Settings {
    type Error = anyhow::Error;

    fn try_from(cli: Cli) -> anyhow::Result<Self> {
        let mut modes: BTreeSet<Mode> = cli.modes.into_iter().collect();
        if cli.tools.is_some_and(|n| n > 0) {
            modes.insert(Mode::ManyTools);
        }
        if cli.start_delay_ms.is_some() {
            modes.insert(Mode::SlowStart);
        }
        let extra_tools = match (modes.contains(&Mode::ManyTools), cli.tools) {
            (false, _) => 0,
            (true, Some(n)) => n,
            (true, None) => DEFAULT_MANY_TOOLS,
        };
        let start_delay = match (modes.contains(&Mode::SlowStart), cli.start_delay_ms) {
            (false, _) => 0,
            (true, Some(ms)) => ms,
            (true, None) => DEFAULT_START_DELAY_MS,
        };
        if modes.contains(&Mode::GarbageStdout) && cli.transport != Transport::Stdio {
            bail!("--mode garbage-stdout needs --transport stdio");
        }
        if modes.contains(&Mode::BrokenSchemas) && cli.transport != Transport::Stdio {
            bail!("--mode broken-schemas needs --transport stdio");
        }
        if cli.auth_token.is_some() && cli.transport == Transport::Stdio {
            bail!("--auth-token needs --transport http or sse");
        }
        if (cli.json_response || cli.stateless) && cli.transport != Transport::Http {
            bail!("--json-response and --stateless need --transport http");
        }
        if cli.sse_absolute_endpoint && cli.transport != Transport::Sse {
            bail!("--sse-absolute-endpoint needs --transport sse");
        }
        let max_protocol_version = cli
            .max_protocol_version
            .map(|wanted| known_version(&wanted))
            .transpose()?;
        Ok(Self {
            transport: cli.transport,
            port: cli.port,
            modes,
            extra_tools,
            page_size: cli.page_size,
            start_delay: Duration::from_millis(start_delay),
            list_delay: Duration::from_millis(cli.list_delay_ms),
            list_ttl_ms: cli.list_ttl_ms,
            auth_token: cli.auth_token,
            json_response: cli.json_response,
            stateless: cli.stateless || cli.json_response,
            sse_absolute_endpoint: cli.sse_absolute_endpoint,
            max_protocol_version,
        })
    }
}

fn known_version(wanted: &str) -> anyhow::Result<ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .find(|version| version.as_str() == wanted)
        .cloned()
        .with_context(|| {
            let known: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .map(ProtocolVersion::as_str)
                .collect();
            format!(
                "--max-protocol-version {wanted}: not one of {}",
                known.join(", ")
            )
        })
}

#[cfg(test)]
mod tests;
