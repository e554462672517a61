//! Why a program stopped, as the caller sees it: the kind (timeout, memory, stack, module,
//! runtime…), a readable message, and positions and stack frames mapped back to the agent's
//! own source.

use std::{
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use rquickjs::{Ctx, Value};
use serde_json::Value as Json;

use super::{AGENT_MODULE, ErrorKind, ExecError, Shared, Stop, ffi, loader, plain, render};
use crate::sandbox::Transpiled;

/// Turns why the program stopped into the error the caller sees, with positions mapped back
/// to the agent's source.
pub(super) fn failure<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    program: &Transpiled,
    stop: Stop<'js>,
) -> ExecError {
    // Describing the error may run a getter or allocate: leave room, but not unlimited room.
    ffi::set_memory_limit(ctx, shared.limits.memory_bytes.saturating_add(16 << 20));
    let cancelled = shared.cancel.load(Ordering::Relaxed);
    let timed_out = Instant::now() >= shared.deadline;
    let thrown = match stop {
        Stop::Host(message) => {
            let kind = if message.contains("llocat") {
                ErrorKind::Memory
            } else {
                ErrorKind::Runtime
            };
            return plain(kind, message);
        }
        Stop::Deadlock if !cancelled && !timed_out => {
            return plain(
                ErrorKind::Runtime,
                "the program is waiting for a promise that nothing will ever settle (no tool \
                 call or timer is pending)"
                    .to_owned(),
            );
        }
        Stop::Deadlock | Stop::Stopped => None,
        Stop::Thrown(value) => Some(value),
    };
    let limit = |kind: ErrorKind, message: String, thrown: Option<&Value<'js>>| {
        let (position, stack) = thrown
            .filter(|v| v.is_object())
            .map(|v| {
                let raw = read_stack(v);
                map_stack(program, raw.as_deref())
            })
            .unwrap_or((None, None));
        ExecError {
            kind,
            message,
            position,
            stack,
        }
    };
    if cancelled {
        return limit(
            ErrorKind::Cancelled,
            "the execution was cancelled".to_owned(),
            thrown.as_ref(),
        );
    }
    if timed_out || thrown.as_ref().is_some_and(ffi::is_uncatchable) {
        return limit(
            ErrorKind::Timeout,
            format!(
                "the execution exceeded its time limit of {}",
                human_duration(Duration::from_millis(shared.limits.timeout_ms))
            ),
            thrown.as_ref(),
        );
    }
    let Some(thrown) = thrown else {
        return plain(ErrorKind::Runtime, "the execution stopped".to_owned());
    };
    let memory = format!(
        "memory limit exceeded ({})",
        human_bytes(shared.limits.memory_bytes)
    );
    if thrown.is_null() {
        return plain(ErrorKind::Memory, memory);
    }
    let (message, raw_stack) = describe(ctx, shared, &thrown);
    let (position, stack) = map_stack(program, raw_stack.as_deref());
    let error = |kind, message| ExecError {
        kind,
        message,
        position,
        stack: stack.clone(),
    };
    if message == "InternalError: out of memory" {
        return error(ErrorKind::Memory, memory);
    }
    if message.contains("Maximum call stack size exceeded") || message.ends_with("stack overflow") {
        return error(
            ErrorKind::Stack,
            format!(
                "stack limit exceeded ({}): {message}",
                human_bytes(shared.limits.stack_bytes)
            ),
        );
    }
    if let Some(known) = shared
        .module_errors
        .borrow()
        .iter()
        .find(|known| message.ends_with(known.as_str()))
    {
        return ExecError {
            kind: ErrorKind::Module,
            message: known.clone(),
            position: None,
            stack: None,
        };
    }
    if let Some(missing) = loader::missing_export(ctx, shared, program, &message) {
        return missing;
    }
    error(ErrorKind::Runtime, message)
}

/// A one-line description of a thrown value, for notes inside a rendering.
pub(super) fn describe_short<'js>(ctx: &Ctx<'js>, thrown: &Value<'js>) -> String {
    if let Some(object) = thrown.as_object()
        && ffi::class_of(ctx, thrown) == ffi::Class::Error
    {
        let name = object.get::<_, Option<String>>("name").ok().flatten();
        let message = object.get::<_, Option<String>>("message").ok().flatten();
        if ctx.has_exception() {
            let _ = ctx.catch();
        }
        return format!(
            "{}: {}",
            name.unwrap_or_else(|| "Error".to_owned()),
            message.unwrap_or_default()
        );
    }
    if let Some(text) = thrown.as_string().and_then(|s| s.to_string().ok()) {
        return text;
    }
    if thrown.is_object() {
        return "an object that is not an Error".to_owned();
    }
    ffi::primitive_string(ctx, thrown)
}

/// The `stack` property, if it is a string.
fn read_stack(value: &Value<'_>) -> Option<String> {
    value
        .as_object()?
        .get::<_, Option<String>>("stack")
        .ok()
        .flatten()
}

/// A readable message and the raw stack of a thrown value.
fn describe<'js>(ctx: &Ctx<'js>, shared: &Shared, thrown: &Value<'js>) -> (String, Option<String>) {
    if let Some(object) = thrown.as_object()
        && ffi::class_of(ctx, thrown) == ffi::Class::Error
    {
        let name: String = object
            .get::<_, Option<String>>("name")
            .ok()
            .flatten()
            .unwrap_or_else(|| "Error".to_owned());
        let message: String = object
            .get::<_, Option<String>>("message")
            .ok()
            .flatten()
            .unwrap_or_default();
        let text = if message.is_empty() {
            name
        } else {
            format!("{name}: {message}")
        };
        return (text, read_stack(thrown));
    }
    if let Some(text) = thrown.as_string().and_then(|s| s.to_string().ok()) {
        return (format!("Uncaught {}", Json::String(text)), None);
    }
    if thrown.is_undefined() {
        return ("Uncaught undefined".to_owned(), None);
    }
    let mut renderer = render::Renderer::new(ctx, shared, 4096);
    let text = match renderer.render_top(thrown) {
        Ok(json) => json.to_string(),
        Err(_) => "a value too large to show".to_owned(),
    };
    (format!("Uncaught {text}"), read_stack(thrown))
}

/// Rewrites `agent.ts:L:C` in a stack to the agent's own source; the first such frame is the
/// error's position. Frames in VFS modules keep their path.
fn map_stack(program: &Transpiled, raw: Option<&str>) -> (Option<(u32, u32)>, Option<String>) {
    let Some(raw) = raw else {
        return (None, None);
    };
    let marker = format!("{AGENT_MODULE}:");
    let mut position = None;
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find(&marker) {
        let (before, after) = rest.split_at(at + marker.len());
        out.push_str(before);
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let line_len = digits(after);
        let parsed = after[..line_len].parse::<u32>().ok().and_then(|line| {
            let tail = after[line_len..].strip_prefix(':')?;
            let col_len = digits(tail);
            let column = tail[..col_len].parse::<u32>().ok()?;
            Some((line, column, line_len + 1 + col_len))
        });
        match parsed.and_then(|(line, column, used)| {
            program
                .original_position(line, column)
                .map(|mapped| (mapped, used))
        }) {
            Some(((line, column), used)) => {
                position.get_or_insert((line, column));
                out.push_str(&format!("{line}:{column}"));
                rest = &after[used..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    let stack = out.trim_end().to_owned();
    (position, (!stack.is_empty()).then_some(stack))
}

/// `64 MiB`, `512 KiB`, `1000 bytes`.
pub(crate) fn human_bytes(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// `30 s`, `1.5 s`, `250 ms`.
pub(crate) fn human_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else if ms >= 1000 {
        format!("{:.1} s", duration.as_secs_f64())
    } else {
        format!("{ms} ms")
    }
}
