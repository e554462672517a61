//! What the client gets back from `execute_code`: the result as JSON text (or the error), the
//! console output and a summary, cut to the output limit, with images, audio and resources moved
//! into content blocks of their own.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::{
    config::Summary,
    sandbox::{ErrorKind, Outcome},
    tokens::{Accounting, Count},
};

/// The key of the answer's `_meta` that carries the whole account of the execution.
pub const EXECUTION_META: &str = "runbyte/execution";

/// Content blocks a program's result carries: objects shaped like MCP image, audio or resource
/// content. Each is moved out of the JSON into a block of its own and replaced by a note that
/// points at it.
pub fn extract_blocks(value: &mut Value, blocks: &mut Vec<ContentBlock>, depth: usize) {
    if depth > 32 || blocks.len() >= 32 {
        return;
    }
    if let Some(block) = as_block(value) {
        blocks.push(block);
        let index = blocks.len();
        *value = json!({"type": value["type"], "content": format!("see content block {index}")});
        return;
    }
    match value {
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| extract_blocks(item, blocks, depth + 1)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|item| extract_blocks(item, blocks, depth + 1)),
        _ => {}
    }
}

fn as_block(value: &Value) -> Option<ContentBlock> {
    let kind = value.get("type")?.as_str()?;
    let shaped = match kind {
        "image" | "audio" => {
            value.get("data").is_some_and(Value::is_string)
                && value.get("mimeType").is_some_and(Value::is_string)
        }
        "resource" => value.get("resource").is_some_and(Value::is_object),
        "resource_link" => value.get("uri").is_some_and(Value::is_string),
        _ => false,
    };
    if !shaped {
        return None;
    }
    serde_json::from_value(value.clone()).ok()
}

/// What the client gets back: the result as JSON text (or the error), the console output, a
/// one-line summary, and any content blocks; all within `max_output_bytes`.
#[cfg(test)]
pub fn render(outcome: Outcome, max_output_bytes: usize) -> CallToolResult {
    render_with(outcome, max_output_bytes, None, 0, Summary::Full).0
}

/// How an execution's tokens are told: what the tool results it read cost, and the session's
/// totals once this execution's are added.
pub struct Tokens<'a> {
    pub consumed: Count,
    pub session: &'a dyn Fn(Accounting) -> Accounting,
}

/// The longest the summary's token part gets (it is kept room for before the result is cut).
const TOKENS_ROOM: usize = 200;

/// [`render`], with the tokens the answer costs (its result and console, counted in
/// [`crate::tokens::ENCODING`]) beside those of the tool results the program read; those tokens
/// are returned too. `cached` of its calls were answered from results kept by the servers'
/// caching hints. The summary line says what `style` asks for (see [`Summary`]); the answer's
/// `_meta` ([`EXECUTION_META`]) has all of it.
pub fn render_with(
    outcome: Outcome,
    max_output_bytes: usize,
    tokens: Option<Tokens<'_>>,
    cached: u32,
    style: Summary,
) -> (CallToolResult, Option<Accounting>) {
    let mut blocks = Vec::new();
    let (mut body, failed) = match outcome.result {
        Ok(mut value) => {
            extract_blocks(&mut value, &mut blocks, 0);
            (
                serde_json::to_string(&value)
                    .unwrap_or_else(|e| format!("(the result could not be encoded: {e})")),
                false,
            )
        }
        Err(error) => {
            let mut text = String::from(match error.kind {
                ErrorKind::Syntax => "SyntaxError",
                ErrorKind::Runtime => "Uncaught exception",
                ErrorKind::Timeout => "Timeout",
                ErrorKind::Memory => "Out of memory",
                ErrorKind::Stack => "Stack overflow",
                ErrorKind::Limit => "Limit exceeded",
                ErrorKind::Module => "Import error",
                ErrorKind::Cancelled => "Cancelled",
                ErrorKind::Busy => "Busy",
                ErrorKind::Crashed => "Sandbox crashed",
            });
            if let Some((line, column)) = error.position {
                text.push_str(&format!(" at line {line}, column {column}"));
            }
            text.push_str(": ");
            text.push_str(&error.message);
            if let Some(stack) = error.stack.filter(|s| !s.trim().is_empty()) {
                text.push('\n');
                text.push_str(stack.trim_end());
            }
            (text, true)
        }
    };
    let mut logs = String::new();
    for line in &outcome.logs {
        let prefix = if line.level == "log" {
            String::new()
        } else {
            format!("[{}] ", line.level)
        };
        logs.push_str(&prefix);
        logs.push_str(&line.text);
        logs.push('\n');
    }
    let ran = outcome.duration.saturating_sub(outcome.queued);
    let mut account = json!({
        "durationMs": ran.as_millis() as u64,
        "queuedMs": outcome.queued.as_millis() as u64,
        "toolCalls": outcome.calls,
        "failedCalls": outcome.failed_calls,
        "fromCache": cached,
    });
    let mut summary = match style {
        Summary::Full => full_line(
            outcome.calls,
            outcome.failed_calls,
            outcome.queued,
            ran,
            cached,
        ),
        Summary::Lean => lean_line(outcome.calls, outcome.failed_calls, cached),
    };
    // The summary always fits; the result comes before the console.
    let room = if tokens.is_some() && style == Summary::Full {
        TOKENS_ROOM
    } else {
        0
    };
    let budget = max_output_bytes.saturating_sub(summary.len() + 64 + room);
    truncate(&mut body, budget, 0);
    let logs_budget = budget.saturating_sub(body.len());
    truncate(&mut logs, logs_budget, outcome.logs_dropped);
    let mut text = body;
    if !logs.is_empty() {
        text.push_str("\n--- console ---\n");
        text.push_str(logs.trim_end());
    }
    // What a downstream answered may quote a configured secret back.
    let mut text = crate::redact::redact(&text).into_owned();
    let accounting = tokens.map(|tokens| {
        let accounting = Accounting {
            returned: crate::tokens::count(&text),
            consumed: tokens.consumed,
        };
        let session = (tokens.session)(accounting.clone());
        // Saved: what the tool results would have cost through direct calls, less what the
        // answer costs (never below zero).
        let saved = |a: &Accounting| a.consumed.tokens.saturating_sub(a.returned.tokens);
        if style == Summary::Full {
            summary.push_str(&format!(
                " · {} tokens: {} returned, {} in tool results, {} saved (session: {} \
                 returned, {} in tool results, {} saved)",
                crate::tokens::ENCODING,
                accounting.returned,
                accounting.consumed,
                saved(&accounting),
                session.returned,
                session.consumed,
                saved(&session)
            ));
        }
        let figures = |a: &Accounting| {
            json!({
                "returned": a.returned,
                "inToolResults": a.consumed,
                "saved": saved(a),
            })
        };
        account["tokens"] = json!({
            "encoding": crate::tokens::ENCODING,
            "execution": figures(&accounting),
            "session": figures(&session),
        });
        accounting
    });
    if !summary.is_empty() {
        text.push_str("\n--- ");
        text.push_str(&summary);
        text.push_str(" ---");
    }
    let mut content = vec![ContentBlock::text(text)];
    content.extend(blocks);
    let mut result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    let mut meta = rmcp::model::MetaObject::new();
    meta.0.insert(EXECUTION_META.to_owned(), account);
    result.meta = Some(meta);
    (result, accounting)
}

/// Everything: the time (and the wait for a worker), the calls, the failed and cached ones.
fn full_line(
    made: u32,
    failed: u32,
    queued: std::time::Duration,
    ran: std::time::Duration,
    cached: u32,
) -> String {
    let queued = if queued >= std::time::Duration::from_millis(1) {
        format!(" (after {} ms queued)", queued.as_millis())
    } else {
        String::new()
    };
    let mut line = format!(
        "{} ms{queued} · {} · {} failed",
        ran.as_millis(),
        calls(made),
        failed
    );
    if cached > 0 {
        line.push_str(&format!(" · {cached} from cache"));
    }
    line
}

/// What may change the model's next step: how many tool calls the program made, how many
/// failed and how many were answered from cache, each only when not zero; empty when the
/// program made none.
fn lean_line(made: u32, failed: u32, cached: u32) -> String {
    let mut parts = Vec::new();
    if made > 0 {
        parts.push(calls(made));
    }
    if failed > 0 {
        parts.push(format!("{failed} failed"));
    }
    if cached > 0 {
        parts.push(format!("{cached} from cache"));
    }
    parts.join(" · ")
}

fn calls(n: u32) -> String {
    format!("{n} tool call{}", if n == 1 { "" } else { "s" })
}

/// Cuts `text` to `budget` bytes (on a char boundary), saying how much was cut, counting
/// `dropped` bytes that never reached it (the sandbox's own cap on console output).
fn truncate(text: &mut String, budget: usize, dropped: usize) {
    if text.len() <= budget && dropped == 0 {
        return;
    }
    let marker_room = 64.min(budget);
    let mut cut = text.len().min(budget - marker_room);
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let removed = text.len() - cut + dropped;
    text.truncate(cut);
    text.push_str(&format!("…[truncated: {removed} more bytes]"));
}
