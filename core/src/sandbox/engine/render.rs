//! A QuickJS value to JSON, natively: the program's `JSON`, `toJSON` and patched prototypes play
//! no part. Deterministic, bounded in size and depth.
//!
//! - `undefined`: `null` at the top and in arrays, omitted in objects (as `JSON.stringify`);
//! - `NaN`, `Infinity`, `-Infinity`: those strings; integral numbers as integers;
//! - BigInt: `"123n"`; symbols: `"Symbol(desc)"`; functions: `"[Function name]"`;
//! - Date: its ISO string (`null` when invalid); Map: `{"$map": [[k, v], …]}`;
//!   Set: `{"$set": […]}`; Error: `{"name", "message"}`; typed arrays: arrays of numbers;
//!   a promise: `"[Promise]"` (a missing `await`); a proxy: `"[Proxy]"`;
//! - a cycle: `"[Circular]"`; deeper than [`MAX_DEPTH`]: `"[Too deep]"`;
//! - objects: own enumerable string keys; an accessor's getter is called (a getter that throws
//!   renders as `"[getter threw: …]"`). Keys come out in `serde_json`'s map order: sorted,
//!   unless the `preserve_order` feature is on, in which case the engine's order is kept.

use rquickjs::{Ctx, Function, Value, function::This};
use serde_json::{Map, Number, Value as Json};

use super::{
    Shared,
    ffi::{self, Class, Prop},
};

/// Nesting rendered before `"[Too deep]"`.
pub(crate) const MAX_DEPTH: usize = 64;

pub(crate) enum RenderError<'js> {
    /// Over the byte budget.
    TooLarge,
    /// A getter was interrupted (deadline, cancellation): the execution is over.
    Stopped(Value<'js>),
}

pub(crate) struct Renderer<'a, 'js> {
    ctx: &'a Ctx<'js>,
    shared: &'a Shared,
    budget: usize,
    used: usize,
    ancestors: Vec<usize>,
}

/// A number as JSON: integers as integers, the non-finite ones as strings.
pub(crate) fn number(value: f64) -> Json {
    if value.is_nan() {
        Json::String("NaN".to_owned())
    } else if value.is_infinite() {
        Json::String(if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned())
    } else if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        Json::Number(Number::from(value as i64))
    } else {
        Number::from_f64(value).map_or(Json::Null, Json::Number)
    }
}

/// One console argument as text: strings as they are, other primitives as JavaScript prints
/// them, objects as compact JSON. `None` when longer than `budget`.
pub(crate) fn inspect<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    value: &Value<'js>,
    budget: usize,
) -> Option<String> {
    let text = if let Some(s) = value.as_string() {
        s.to_string().unwrap_or_default()
    } else if value.is_undefined() {
        "undefined".to_owned()
    } else if value.is_number() || value.is_bool() || value.is_null() {
        ffi::primitive_string(ctx, value)
    } else if value.is_big_int() {
        format!("{}n", ffi::primitive_string(ctx, value))
    } else if value.is_symbol() {
        format!("Symbol({})", ffi::symbol_description(ctx, value))
    } else if value.is_object() && ffi::class_of(ctx, value) == Class::Error {
        let object = value.as_object()?;
        let name = object
            .get::<_, Option<String>>("name")
            .ok()
            .flatten()
            .unwrap_or_else(|| "Error".to_owned());
        let message = object
            .get::<_, Option<String>>("message")
            .ok()
            .flatten()
            .unwrap_or_default();
        if message.is_empty() {
            name
        } else {
            format!("{name}: {message}")
        }
    } else {
        let mut renderer = Renderer::new(ctx, shared, budget);
        match renderer.render_top(value) {
            Ok(Json::String(s)) => s,
            Ok(json) => json.to_string(),
            Err(_) => return None,
        }
    };
    (text.len() <= budget).then_some(text)
}

impl<'a, 'js> Renderer<'a, 'js> {
    pub(crate) fn new(ctx: &'a Ctx<'js>, shared: &'a Shared, budget: usize) -> Self {
        Renderer {
            ctx,
            shared,
            budget,
            used: 0,
            ancestors: Vec::new(),
        }
    }

    /// The value as JSON (`undefined` becomes `null`).
    pub(crate) fn render_top(&mut self, value: &Value<'js>) -> Result<Json, RenderError<'js>> {
        Ok(self.render(value, 0)?.unwrap_or(Json::Null))
    }

    fn charge(&mut self, bytes: usize) -> Result<(), RenderError<'js>> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.budget {
            Err(RenderError::TooLarge)
        } else {
            Ok(())
        }
    }

    fn string(&mut self, text: String) -> Result<Option<Json>, RenderError<'js>> {
        self.charge(text.len() + 2)?;
        Ok(Some(Json::String(text)))
    }

    /// `None` for `undefined`.
    fn render(
        &mut self,
        value: &Value<'js>,
        depth: usize,
    ) -> Result<Option<Json>, RenderError<'js>> {
        let ctx = self.ctx;
        if value.is_undefined() {
            return Ok(None);
        }
        if value.is_null() {
            self.charge(4)?;
            return Ok(Some(Json::Null));
        }
        if let Some(b) = value.as_bool() {
            self.charge(5)?;
            return Ok(Some(Json::Bool(b)));
        }
        if let Some(n) = value.as_number() {
            self.charge(8)?;
            return Ok(Some(number(n)));
        }
        if let Some(s) = value.as_string() {
            return self.string(s.to_string().unwrap_or_default());
        }
        if value.is_big_int() {
            return self.string(format!("{}n", ffi::primitive_string(ctx, value)));
        }
        if value.is_symbol() {
            return self.string(format!("Symbol({})", ffi::symbol_description(ctx, value)));
        }
        if !value.is_object() {
            return self.string(format!("[{}]", value.type_name()));
        }
        let identity = ffi::identity(value);
        if self.ancestors.contains(&identity) {
            return self.string("[Circular]".to_owned());
        }
        if depth >= MAX_DEPTH {
            return self.string("[Too deep]".to_owned());
        }
        self.ancestors.push(identity);
        let rendered = self.render_object(value, depth);
        self.ancestors.pop();
        rendered
    }

    fn render_object(
        &mut self,
        value: &Value<'js>,
        depth: usize,
    ) -> Result<Option<Json>, RenderError<'js>> {
        let ctx = self.ctx;
        match ffi::class_of(ctx, value) {
            Class::Function => {
                let name = ffi::own_string(ctx, value, "name").unwrap_or_default();
                let name = if name.is_empty() {
                    "(anonymous)".to_owned()
                } else {
                    name
                };
                self.string(format!("[Function {name}]"))
            }
            Class::Proxy => self.string("[Proxy]".to_owned()),
            Class::Promise => self.string("[Promise]".to_owned()),
            Class::Date => {
                let iso = self.shared.originals(ctx).and_then(|(to_iso, _, _)| {
                    to_iso.call::<_, String>((This(value.clone()),)).ok()
                });
                match iso {
                    Some(iso) => self.string(iso),
                    None => {
                        let _ = ctx.catch();
                        self.charge(4)?;
                        Ok(Some(Json::Null))
                    }
                }
            }
            Class::Map | Class::Set => {
                let is_map = ffi::class_of(ctx, value) == Class::Map;
                let entries = self.collection(value, is_map)?;
                let mut items = Vec::with_capacity(entries.len());
                for (key, item) in entries {
                    self.charge(1)?;
                    let item = self.render(&item, depth + 1)?.unwrap_or(Json::Null);
                    items.push(match key {
                        Some(key) => {
                            let key = self.render(&key, depth + 1)?.unwrap_or(Json::Null);
                            Json::Array(vec![key, item])
                        }
                        None => item,
                    });
                }
                let tag = if is_map { "$map" } else { "$set" };
                self.charge(tag.len() + 5)?;
                let mut object = Map::new();
                object.insert(tag.to_owned(), Json::Array(items));
                Ok(Some(Json::Object(object)))
            }
            Class::Error => {
                let object = value.as_object().cloned();
                let read = |key: &str| {
                    object
                        .as_ref()
                        .and_then(|o| o.get::<_, Option<String>>(key).ok().flatten())
                };
                let name = read("name").unwrap_or_else(|| "Error".to_owned());
                let message = read("message").unwrap_or_default();
                if ctx.has_exception() {
                    let _ = ctx.catch();
                }
                self.charge(name.len() + message.len() + 24)?;
                let mut object = Map::new();
                object.insert("name".to_owned(), Json::String(name));
                object.insert("message".to_owned(), Json::String(message));
                Ok(Some(Json::Object(object)))
            }
            Class::TypedArray(len) => self.array(value, len, depth),
            Class::Array => {
                let len = ffi::own_u32(ctx, value, "length").unwrap_or(0);
                self.array(value, len as usize, depth)
            }
            Class::ArrayBuffer | Class::Plain => {
                self.charge(2)?;
                let props = ffi::own_enumerable(ctx, value).map_err(|_| self.thrown())?;
                let mut object = Map::new();
                for (key, prop) in props {
                    let item = self.read(value, prop)?;
                    if let Some(item) = self.render(&item, depth + 1)? {
                        self.charge(key.len() + 4)?;
                        object.insert(key, item);
                    }
                }
                Ok(Some(Json::Object(object)))
            }
        }
    }

    fn array(
        &mut self,
        value: &Value<'js>,
        len: usize,
        depth: usize,
    ) -> Result<Option<Json>, RenderError<'js>> {
        self.charge(2)?;
        let mut items = Vec::new();
        for index in 0..len.min(u32::MAX as usize) {
            self.charge(1)?;
            let item = match ffi::own_index(self.ctx, value, index as u32) {
                Ok(Some(prop)) => self.read(value, prop)?,
                Ok(None) => Value::new_undefined(self.ctx.clone()),
                Err(_) => return Err(self.thrown()),
            };
            items.push(self.render(&item, depth + 1)?.unwrap_or(Json::Null));
        }
        Ok(Some(Json::Array(items)))
    }

    /// A property's value; a getter is called, and a getter that throws renders as a note.
    fn read(
        &mut self,
        holder: &Value<'js>,
        prop: Prop<'js>,
    ) -> Result<Value<'js>, RenderError<'js>> {
        let getter = match prop {
            Prop::Data(value) => return Ok(value),
            Prop::Getter(None) => return Ok(Value::new_undefined(self.ctx.clone())),
            Prop::Getter(Some(getter)) => getter,
        };
        match getter.call::<_, Value>((This(holder.clone()),)) {
            Ok(value) => Ok(value),
            Err(_) => {
                let thrown = self.ctx.catch();
                if self.shared.stopped() || ffi::is_uncatchable(&thrown) {
                    return Err(RenderError::Stopped(thrown));
                }
                let why = super::describe_short(self.ctx, &thrown);
                let note =
                    rquickjs::String::from_str(self.ctx.clone(), &format!("[getter threw: {why}]"))
                        .map(|s| s.into_value())
                        .unwrap_or_else(|_| Value::new_undefined(self.ctx.clone()));
                Ok(note)
            }
        }
    }

    /// The pending exception as a stop (reading an object failed: a proxy trap, out of memory).
    fn thrown(&self) -> RenderError<'js> {
        RenderError::Stopped(self.ctx.catch())
    }

    /// A Map's `(key, value)` pairs or a Set's values, through the `forEach` captured before the
    /// program ran. Stops early once the entries alone would exceed the budget.
    fn collection(
        &mut self,
        value: &Value<'js>,
        is_map: bool,
    ) -> Result<Vec<(Option<Value<'js>>, Value<'js>)>, RenderError<'js>> {
        let ctx = self.ctx;
        let Some((_, map_for_each, set_for_each)) = self.shared.originals(ctx) else {
            return Ok(Vec::new());
        };
        let for_each: Function = if is_map { map_for_each } else { set_for_each };
        let room = self.budget.saturating_sub(self.used) / 2 + 1;
        let entries = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let sink = entries.clone();
        let collect = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, item: Value<'js>, key: Value<'js>| {
                let mut sink = sink.borrow_mut();
                if sink.len() >= room {
                    return Err(rquickjs::Exception::throw_range(&ctx, "too large"));
                }
                sink.push((if is_map { Some(key) } else { None }, item));
                Ok(())
            },
        )
        .map_err(|_| self.thrown())?;
        let outcome = for_each.call::<_, ()>((This(value.clone()), collect));
        let entries = std::mem::take(&mut *entries.borrow_mut());
        if outcome.is_err() {
            let thrown = ctx.catch();
            if self.shared.stopped() || ffi::is_uncatchable(&thrown) {
                return Err(RenderError::Stopped(thrown));
            }
            return Err(RenderError::TooLarge);
        }
        Ok(entries)
    }
}
