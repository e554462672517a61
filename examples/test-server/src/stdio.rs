//! The stdio transport.
//!
//! rmcp serves one end of an in-memory pipe; two pumps join the other end to this process's
//! stdin and stdout. The stdout pump is where `--mode garbage-stdout` slips its lines in
//! between whole messages, and the stdin pump is where `--mode stubborn` ignores EOF.

use std::sync::Arc;

use anyhow::Context as _;
use rmcp::ServiceExt as _;
use rmcp::service::ServerInitializeError;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWriteExt as _, BufReader};

use crate::cli::Mode;
use crate::server::{SERVER_NAME, State, TestServer};

/// Room for a few messages in flight; a bigger one is streamed through it.
const PIPE_BYTES: usize = 64 * 1024;

/// What `--mode garbage-stdout` writes, in turn. None of it parses as JSON, so a client that
/// skips unparsable lines (as the official SDKs do) still works.
pub const GARBAGE: &[&str] = &[
    "this is not json",
    "[INFO] runbyte-test-server starting up...",
    "{ broken json",
    "Traceback (most recent call last): garbage",
];

pub async fn serve(state: Arc<State>) -> anyhow::Result<()> {
    let (server_end, bridge_end) = tokio::io::duplex(PIPE_BYTES);
    let (from_server, mut to_server) = tokio::io::split(bridge_end);

    let linger = state.settings.has(Mode::Stubborn);
    tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let copied = tokio::io::copy(&mut stdin, &mut to_server).await;
        if let Err(e) = copied {
            eprintln!("{SERVER_NAME}: reading stdin failed: {e}");
        }
        if linger {
            eprintln!("{SERVER_NAME}: stdin closed; staying alive (--mode stubborn)");
            // Holding `to_server` keeps the server's input open.
            std::future::pending::<()>().await;
        }
        let _ = to_server.shutdown().await;
    });

    let garbage = state.settings.has(Mode::GarbageStdout);
    let broken = state.settings.has(Mode::BrokenSchemas);
    let stdout_pump = tokio::spawn(pump_to_stdout(from_server, garbage, broken));

    eprintln!("{SERVER_NAME}: serving on stdio");
    let service = match TestServer::new(state).serve(server_end).await {
        Ok(service) => service,
        // stdin closed before any handshake: a client that gave up, not a failure.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(e).context("the MCP handshake on stdio failed"),
    };
    service
        .waiting()
        .await
        .context("the stdio session ended with an error")?;
    // The server's end is closed now, so the pump ends once it has written what is left.
    stdout_pump
        .await
        .context("the stdout pump failed")?
        .context("writing stdout failed")
}

/// Copies whole lines to stdout, with a garbage line before the first and after each one, and
/// with `--mode broken-schemas`'s tools slipped into each `tools/list` answer.
async fn pump_to_stdout(
    from_server: impl AsyncRead + Unpin,
    garbage: bool,
    broken: bool,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(from_server);
    let mut stdout = tokio::io::stdout();
    let mut garbage_lines = GARBAGE.iter().cycle();
    let mut write_garbage = async |stdout: &mut tokio::io::Stdout| -> std::io::Result<()> {
        if garbage && let Some(line) = garbage_lines.next() {
            stdout.write_all(line.as_bytes()).await?;
            stdout.write_all(b"\n").await?;
        }
        Ok(())
    };
    write_garbage(&mut stdout).await?;
    stdout.flush().await?;
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return stdout.flush().await;
        }
        match broken.then(|| with_broken_tools(&line)).flatten() {
            Some(rewritten) => stdout.write_all(&rewritten).await?,
            None => stdout.write_all(&line).await?,
        }
        write_garbage(&mut stdout).await?;
        stdout.flush().await?;
    }
}

/// A `tools/list` answer with the broken tools added after the others, as raw JSON (rmcp's
/// `Tool` cannot hold them); `None` for any other line.
fn with_broken_tools(line: &[u8]) -> Option<Vec<u8>> {
    let message: serde_json::Value = serde_json::from_slice(line).ok()?;
    let tools = message.get("result")?.get("tools")?.as_array()?;
    let mut all: Vec<String> = tools.iter().map(ToString::to_string).collect();
    all.extend(crate::catalog::broken_tools_json());
    let mut result = message.get("result")?.clone();
    result
        .as_object_mut()?
        .insert("tools".to_owned(), "@TOOLS@".into());
    let mut rewritten =
        serde_json::json!({"jsonrpc": "2.0", "id": message.get("id")?, "result": result})
            .to_string()
            .replace("\"@TOOLS@\"", &format!("[{}]", all.join(",")));
    rewritten.push('\n');
    Some(rewritten.into_bytes())
}
