//! A tool's result as the value a program sees: the one mapping, which the gate applies to
//! every call (a program gets the value; the inferred shapes are learned from it).

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// A tool's result as the program sees it: `structuredContent` as it is; otherwise each content
/// block, text parsed as JSON when it is JSON, images, audio and resources as content objects;
/// one block is the value itself, several an array. `isError` becomes the call's error.
pub fn map_result(server: &str, tool: &str, result: CallToolResult) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let message: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.clone())
            .collect();
        let message = if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            message.join("\n")
        };
        return Err(format!("{server}/{tool}: {message}"));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    let mut values: Vec<Value> = result.content.into_iter().map(block_value).collect();
    Ok(match values.len() {
        0 => Value::Null,
        1 => values.pop().unwrap_or(Value::Null),
        _ => Value::Array(values),
    })
}

/// A block's value; its text is moved, not copied, into the value.
fn block_value(block: ContentBlock) -> Value {
    let ContentBlock::Text(text) = block else {
        return serde_json::to_value(&block).unwrap_or(Value::Null);
    };
    // Only text that looks like JSON is tried: most plain text fails fast either way, but
    // this keeps a long message from being scanned by the parser at all.
    let trimmed = text.text.trim();
    let looks_like_json = trimmed.starts_with(['{', '[', '"'])
        || matches!(trimmed, "null" | "true" | "false")
        || trimmed.parse::<f64>().is_ok();
    if looks_like_json && let Ok(value) = serde_json::from_str(&text.text) {
        return value;
    }
    Value::String(text.text)
}
