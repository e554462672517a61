//! What the engine adds to the ECMAScript built-ins: a captured `console`, `setTimeout` /
//! `clearTimeout`, and the `runbyte:bridge` module with `callTool`.

use std::{rc::Rc, time::Instant};

use rquickjs::{
    Ctx, Exception, Function, Object, Persistent, Promise, Value,
    function::{Opt, Rest},
    module::{Declarations, Exports, ModuleDef},
};

use super::{
    FromEngine, MAX_TIMERS, Originals, Pending, Shared, SharedRef, next_id, render, tojson,
};

/// Adds `console`, `setTimeout` and `clearTimeout`, and captures the built-ins the renderer
/// uses, before any of the program's code runs.
pub(super) fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let prototype = |name: &str| -> rquickjs::Result<Object<'js>> {
        globals.get::<_, Object>(name)?.get("prototype")
    };
    let date_to_iso: Function = prototype("Date")?.get("toISOString")?;
    let map_for_each: Function = prototype("Map")?.get("forEach")?;
    let set_for_each: Function = prototype("Set")?.get("forEach")?;
    let date: Function = globals.get("Date")?;
    shared.js.borrow_mut().originals = Some(Originals {
        date: Persistent::save(ctx, date),
        date_to_iso: Persistent::save(ctx, date_to_iso),
        map_for_each: Persistent::save(ctx, map_for_each),
        set_for_each: Persistent::save(ctx, set_for_each),
    });

    let console = Object::new(ctx.clone())?;
    for level in ["log", "info", "warn", "error", "debug"] {
        let shared = shared.clone();
        let function = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
            console_line(&ctx, &shared, level, &args.0);
        })?
        .with_name(level)?;
        console.set(level, function)?;
    }
    globals.set("console", console)?;

    let timers = shared.clone();
    let set_timeout = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              callback: Value<'js>,
              delay: Opt<Value<'js>>,
              args: Rest<Value<'js>>| {
            set_timeout(&ctx, &timers, callback, delay.0, args.0)
        },
    )?
    .with_name("setTimeout")?;
    globals.set("setTimeout", set_timeout)?;
    let timers = shared.clone();
    let clear_timeout = Function::new(ctx.clone(), move |id: Opt<Value<'js>>| {
        if let Some(id) = id.0.and_then(|v| v.as_number())
            && id >= 0.0
        {
            let id = id as u64;
            let mut js = timers.js.borrow_mut();
            if let Some(due) = js.timer_due.remove(&id) {
                js.timers.remove(&(due, id));
            }
        }
    })?
    .with_name("clearTimeout")?;
    globals.set("clearTimeout", clear_timeout)?;
    Ok(())
}

/// A plain `Error` with this message, made by the engine (not through the program's `Error`).
pub(super) fn error_value<'js>(ctx: &Ctx<'js>, message: &str) -> rquickjs::Result<Value<'js>> {
    Ok(Exception::from_message(ctx.clone(), message)?.into_value())
}

fn console_line<'js>(ctx: &Ctx<'js>, shared: &Shared, level: &str, args: &[Value<'js>]) {
    let remaining = shared
        .limits
        .max_output_bytes
        .saturating_sub(shared.output_used.get());
    // Over budget the line is still measured (up to 4 KiB per value) to count what is dropped.
    let budget = remaining.max(4096);
    let mut text = String::new();
    let mut too_large = false;
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        match render::inspect(ctx, shared, arg, budget.saturating_sub(text.len())) {
            Some(part) => text.push_str(&part),
            None => {
                too_large = true;
                break;
            }
        }
    }
    if too_large {
        shared.drop_output(budget);
        return;
    }
    if shared.take_output(text.len() + 1) {
        shared.link.borrow().send(FromEngine::Log {
            level: level.to_owned(),
            text,
        });
    }
}

fn set_timeout<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    callback: Value<'js>,
    delay: Option<Value<'js>>,
    args: Vec<Value<'js>>,
) -> rquickjs::Result<f64> {
    let Some(callback) = callback.into_function() else {
        return Err(Exception::throw_type(
            ctx,
            "setTimeout: the callback must be a function",
        ));
    };
    let delay = delay.and_then(|v| v.as_number()).unwrap_or(0.0);
    let delay = if delay.is_finite() && delay > 0.0 {
        delay.min(u32::MAX as f64)
    } else {
        0.0
    };
    let mut js = shared.js.borrow_mut();
    if js.timers.len() >= MAX_TIMERS {
        return Err(Exception::throw_range(
            ctx,
            &format!("setTimeout: more than {MAX_TIMERS} timers are pending"),
        ));
    }
    js.next_timer += 1;
    let id = js.next_timer;
    // A timer due after the deadline never fires: the deadline ends the execution first.
    let due = Instant::now() + std::time::Duration::from_millis(delay as u64);
    let due = due.min(shared.deadline);
    let args = args.into_iter().map(|a| Persistent::save(ctx, a)).collect();
    js.timers
        .insert((due, id), (Persistent::save(ctx, callback), args));
    js.timer_due.insert(id, due);
    Ok(id as f64)
}

/// A timer taken from the queue to fire: its id, callback and extra arguments.
pub(super) type DueTimer<'js> = (u64, Function<'js>, Vec<Value<'js>>);

/// The earliest timer due by `now`, removed from the queue.
pub(super) fn take_due_timer<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    now: Instant,
) -> Option<DueTimer<'js>> {
    let (due, id) = {
        let js = shared.js.borrow();
        let (&(due, id), _) = js.timers.iter().next()?;
        (due, id)
    };
    if due > now {
        return None;
    }
    take_timer(ctx, shared, id)
}

/// The timer `id`, removed from the queue whenever it is due; `None` if there is none.
pub(super) fn take_timer<'js>(ctx: &Ctx<'js>, shared: &Shared, id: u64) -> Option<DueTimer<'js>> {
    let mut js = shared.js.borrow_mut();
    let due = js.timer_due.remove(&id)?;
    let (callback, args) = js.timers.remove(&(due, id))?;
    drop(js);
    let callback = callback.restore(ctx).ok()?;
    let args = args
        .into_iter()
        .filter_map(|a| a.restore(ctx).ok())
        .collect();
    Some((id, callback, args))
}

/// `runbyte:bridge`: `callTool(server, tool, args)`.
pub(super) struct BridgeModule;

impl ModuleDef for BridgeModule {
    fn declare(decl: &Declarations<'_>) -> rquickjs::Result<()> {
        decl.declare("callTool")?;
        Ok(())
    }

    fn evaluate<'js>(ctx: &Ctx<'js>, exports: &Exports<'js>) -> rquickjs::Result<()> {
        let shared = ctx
            .userdata::<SharedRef>()
            .map(|shared| shared.0.clone())
            .ok_or_else(|| Exception::throw_internal(ctx, "the tool bridge is not attached"))?;
        let function = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, server: Value<'js>, tool: Value<'js>, args: Opt<Value<'js>>| {
                call_tool(&ctx, &shared, server, tool, args.0)
            },
        )?
        .with_name("callTool")?;
        exports.export("callTool", function)?;
        Ok(())
    }
}

/// Starts one tool call; the promise settles when the host replies. Every refusal is a
/// rejection with an `Error` that says why.
fn call_tool<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    server: Value<'js>,
    tool: Value<'js>,
    args: Option<Value<'js>>,
) -> rquickjs::Result<Promise<'js>> {
    let made = shared.calls.get().saturating_add(1);
    shared.calls.set(made);
    let (promise, resolve, reject) = ctx.promise()?;
    let refuse = |message: String| -> rquickjs::Result<Promise<'js>> {
        shared.failed_calls.set(shared.failed_calls.get() + 1);
        reject.call::<_, ()>((error_value(ctx, &message)?,))?;
        Ok(promise.clone())
    };
    let (Some(server), Some(tool)) = (
        server.as_string().and_then(|s| s.to_string().ok()),
        tool.as_string().and_then(|s| s.to_string().ok()),
    ) else {
        return refuse("callTool(server, tool, args): server and tool must be strings".to_owned());
    };
    let limit = shared.limits.max_tool_calls;
    if made > limit {
        return refuse(format!(
            "tool call budget exhausted: an execution may make at most {limit} tool calls \
             ({server}.{tool} was call {made})"
        ));
    }
    if shared.stopped() {
        return refuse(format!(
            "{server}.{tool}: the execution's time is up; no more tool calls"
        ));
    }
    let (arguments, bytes) = match tojson::convert(ctx, shared, args) {
        Ok(converted) => converted,
        Err(tojson::ArgError::Bad(why)) => return refuse(format!("{server}.{tool}: {why}")),
        Err(tojson::ArgError::Stopped(thrown)) => return Err(ctx.throw(thrown)),
    };
    // The same read again, while the host said its answer stays fresh: answered here.
    let memo = super::memo::key(&server, &tool, &arguments);
    if let Some(key) = &memo {
        let given = shared
            .memo
            .borrow_mut()
            .give(&server, key, Instant::now())
            .map(str::to_owned);
        if let Some(text) = given {
            let value = ctx.json_parse(text)?;
            resolve.call::<_, ()>((value,))?;
            return Ok(promise);
        }
    }
    let id = next_id();
    let number = shared.calls_sent.get() + 1;
    shared.calls_sent.set(number);
    shared.js.borrow_mut().pending.insert(
        id,
        Pending {
            resolve: Persistent::save(ctx, resolve),
            reject: Persistent::save(ctx, reject.clone()),
            number,
            memo,
        },
    );
    let observed = shared.nondet.borrow_mut().take_seen();
    shared.link.borrow().send(FromEngine::Call {
        id,
        server,
        tool,
        arguments,
        bytes,
        observed,
    });
    Ok(promise)
}
