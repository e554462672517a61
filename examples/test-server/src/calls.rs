//! What each tool does when called.
//!
//! Bad arguments are a result with `isError: true` that names the tool and the argument, as
//! MCP asks; only an unknown tool (and `rpc_error`, on purpose, and `ask` given a tampered
//! `requestState`) is a JSON-RPC error.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, JsonObject,
    ProgressNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::server::{State, lock};

mod ask;

/// A 1x1 PNG, base64.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

const MAX_HUGE_BYTES: u64 = 256 * 1024 * 1024;
const MAX_SLOW_MS: u64 = 600_000;
const MAX_SQUARES: u64 = 10_000;
const MAX_STDERR_LINES: u64 = 1_000_000;
const MAX_STORM: u64 = 100_000;

const NORMAL_TOOLS: &[&str] = &[
    "echo",
    "add",
    "slow",
    "huge",
    "crash",
    "fail",
    "rpc_error",
    "structured",
    "image",
    "mixed",
    "change_tools",
    "stderr",
    "env",
    "cwd",
    "pid",
    "spawn_grandchild",
    "hang",
    "cancelled_count",
    "calls_count",
    "meta",
    "ask",
];

pub fn is_normal_tool(name: &str) -> bool {
    NORMAL_TOOLS.contains(&name)
}

/// A tool's arguments, with accessors whose errors name the tool and the argument.
struct Args<'a> {
    tool: &'a str,
    map: &'a JsonObject,
}

type ArgResult<T> = Result<T, String>;

impl Args<'_> {
    fn present(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn str(&self, key: &str) -> ArgResult<&str> {
        self.opt_str(key)?
            .ok_or_else(|| self.missing(key, "a string"))
    }

    fn opt_str(&self, key: &str) -> ArgResult<Option<&str>> {
        self.present(key)
            .map(|value| value.as_str().ok_or_else(|| self.wrong(key, "a string")))
            .transpose()
    }

    fn u64(&self, key: &str, max: u64) -> ArgResult<u64> {
        self.opt_u64(key, max)?
            .ok_or_else(|| self.missing(key, "an integer"))
    }

    fn opt_u64(&self, key: &str, max: u64) -> ArgResult<Option<u64>> {
        let Some(value) = self.present(key) else {
            return Ok(None);
        };
        match value.as_u64() {
            Some(n) if n <= max => Ok(Some(n)),
            _ => Err(self.wrong(key, &format!("an integer from 0 to {max}"))),
        }
    }

    fn number(&self, key: &str) -> ArgResult<&serde_json::Number> {
        match self.present(key) {
            Some(Value::Number(n)) => Ok(n),
            Some(_) => Err(self.wrong(key, "a number")),
            None => Err(self.missing(key, "a number")),
        }
    }

    fn missing(&self, key: &str, what: &str) -> String {
        format!("{}: missing argument `{key}` ({what})", self.tool)
    }

    fn wrong(&self, key: &str, what: &str) -> String {
        format!("{}: argument `{key}` must be {what}", self.tool)
    }
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Runs the tool `request` names. Only `ask` may answer with more than a finished result: on
/// 2026-07-28 it asks for input with an `InputRequiredResult`.
pub async fn call(
    state: &State,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if request.name == "ask" {
        return ask::call(request, context).await;
    }
    if state.settings.has(crate::cli::Mode::Apps)
        && let Some(result) = crate::apps::call(&request.name, &context)
    {
        return Ok(result.into());
    }
    state.count_call();
    let arguments = request.arguments.unwrap_or_default();
    run(state, &request.name, arguments, context)
        .await
        .map(Into::into)
}

/// Runs tool `name`, any but `ask`.
async fn run(
    state: &State,
    name: &str,
    arguments: JsonObject,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let args = Args {
        tool: name,
        map: &arguments,
    };
    let outcome = match name {
        "echo" => args.str("message").map(text),
        "add" => add(&args),
        "slow" => return slow(&args, context).await,
        "huge" => args.u64("bytes", MAX_HUGE_BYTES).map(huge),
        "crash" => match args.opt_u64("code", 255) {
            Ok(code) => crash(code.unwrap_or(1)),
            Err(message) => Err(message),
        },
        "fail" => args.str("message").map(tool_error),
        "rpc_error" => return Err(rpc_error(&args)),
        "structured" => args.u64("n", MAX_SQUARES).map(structured),
        "image" => Ok(CallToolResult::success(vec![ContentBlock::image(
            PNG_BASE64,
            "image/png",
        )])),
        "mixed" => Ok(CallToolResult::success(vec![
            ContentBlock::text("a text block"),
            ContentBlock::image(PNG_BASE64, "image/png"),
            ContentBlock::embedded_text("test://mixed/resource.txt", "an embedded resource"),
        ])),
        "change_tools" => {
            let (tool, description) = (args.opt_str("tool"), args.opt_str("description"));
            let changed = match (tool.ok().flatten(), description.ok().flatten()) {
                (Some(tool), Some(description)) => {
                    state.describe(tool, description);
                    format!("described {tool}")
                }
                _ => format!("added {}", state.add_tool()),
            };
            let told = state.notify_tools_changed().await;
            Ok(text(format!("{changed}; notified {told} client(s)")))
        }
        "stderr" => write_stderr(&args).await,
        "env" => env(&args),
        "cwd" => std::env::current_dir()
            .map(|dir| text(dir.to_string_lossy()))
            .map_err(|e| format!("cwd: cannot read the working directory: {e}")),
        "pid" => Ok(text(std::process::id().to_string())),
        "spawn_grandchild" => spawn_grandchild(state),
        "hang" => {
            context.ct.cancelled().await;
            // The request is cancelled: rmcp drops whatever is answered now.
            return Err(ErrorData::internal_error("hang: cancelled", None));
        }
        "cancelled_count" => Ok(text(state.cancelled_count().to_string())),
        "calls_count" => Ok(text(state.calls_count().to_string())),
        "meta" => Ok(text(Value::Object(context.meta.0.0.clone()).to_string())),
        "storm" if state.settings.has(crate::cli::Mode::Storm) => {
            match args.u64("count", MAX_STORM) {
                Ok(count) => {
                    let mut told = 0;
                    for _ in 0..count {
                        told += state.notify_tools_changed().await;
                    }
                    Ok(text(format!("sent {told} notification(s)")))
                }
                Err(message) => Err(message),
            }
        }
        "list_count" if state.settings.has(crate::cli::Mode::Storm) => {
            Ok(text(state.list_count().to_string()))
        }
        _ if state.is_echo_tool(name) => Ok(text(
            json!({"tool": name, "arguments": Value::Object(arguments.clone())}).to_string(),
        )),
        _ => {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        }
    };
    Ok(outcome.unwrap_or_else(tool_error))
}

fn add(args: &Args<'_>) -> ArgResult<CallToolResult> {
    let (a, b) = (args.number("a")?, args.number("b")?);
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
        _ => json!(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)),
    };
    Ok(text(json!({ "sum": sum }).to_string()))
}

async fn slow(
    args: &Args<'_>,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    let (ms, steps) = match (args.u64("ms", MAX_SLOW_MS), args.opt_u64("steps", 1000)) {
        (Ok(ms), Ok(steps)) => (ms, steps.unwrap_or(5).max(1)),
        (Err(message), _) | (_, Err(message)) => return Ok(tool_error(message)),
    };
    let token = context.meta.get_progress_token();
    let step = Duration::from_millis(ms) / u32::try_from(steps).unwrap_or(u32::MAX);
    for done in 1..=steps {
        tokio::select! {
            () = tokio::time::sleep(step) => {}
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("slow: cancelled", None));
            }
        }
        if let Some(token) = &token {
            let progress = ProgressNotificationParam::new(token.clone(), done as f64)
                .with_total(steps as f64)
                .with_message(format!("step {done} of {steps}"));
            // A client that went away is noticed when the answer cannot be sent either.
            let _ = context.peer.notify_progress(progress).await;
        }
    }
    Ok(text(format!("slept {ms} ms")))
}

fn huge(bytes: u64) -> CallToolResult {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
    let len = usize::try_from(bytes).unwrap_or(usize::MAX);
    let body: String = ALPHABET
        .iter()
        .cycle()
        .take(len)
        .map(|b| char::from(*b))
        .collect();
    text(body)
}

fn crash(code: u64) -> ArgResult<CallToolResult> {
    let code = i32::try_from(code).unwrap_or(1);
    crate::exit_now(
        code,
        &format!("crashing with exit code {code} (tool crash)"),
    )
}

fn rpc_error(args: &Args<'_>) -> ErrorData {
    let code = args
        .present("code")
        .and_then(Value::as_i64)
        .and_then(|code| i32::try_from(code).ok())
        .unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    let message = args
        .opt_str("message")
        .ok()
        .flatten()
        .unwrap_or("rpc_error fails on purpose")
        .to_owned();
    ErrorData::new(ErrorCode(code), message, Some(json!({"tool": "rpc_error"})))
}

fn structured(n: u64) -> CallToolResult {
    let squares: Vec<u64> = (1..=n).map(|i| i * i).collect();
    CallToolResult::structured(json!({ "n": n, "squares": squares }))
}

async fn write_stderr(args: &Args<'_>) -> ArgResult<CallToolResult> {
    let line = args.str("text")?.to_owned();
    let lines = args.opt_u64("lines", MAX_STDERR_LINES)?.unwrap_or(1);
    // A reader that does not drain the pipe blocks this write: keep that off the runtime.
    let written = tokio::task::spawn_blocking(move || {
        let mut stderr = std::io::stderr().lock();
        for _ in 0..lines {
            writeln!(stderr, "{line}")?;
        }
        stderr.flush()
    })
    .await;
    match written {
        Ok(Ok(())) => Ok(text(format!("wrote {lines} line(s) to stderr"))),
        Ok(Err(e)) => Err(format!("stderr: write failed: {e}")),
        Err(e) => Err(format!("stderr: writer task failed: {e}")),
    }
}

fn env(args: &Args<'_>) -> ArgResult<CallToolResult> {
    let answer = match args.opt_str("name")? {
        Some(name) => std::env::var_os(name)
            .map(|value| Value::String(value.to_string_lossy().into_owned()))
            .unwrap_or(Value::Null),
        None => {
            let mut names: Vec<String> = std::env::vars_os()
                .map(|(name, _)| name.to_string_lossy().into_owned())
                .collect();
            names.sort();
            json!(names)
        }
    };
    Ok(text(answer.to_string()))
}

fn spawn_grandchild(state: &State) -> ArgResult<CallToolResult> {
    // Inherited stdio would put the child on the protocol channel.
    let child = Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn_grandchild: cannot run `sleep 300`: {e}"))?;
    let pid = child.id();
    lock(&state.grandchildren).push(child);
    Ok(text(pid.to_string()))
}
