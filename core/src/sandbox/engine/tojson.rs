//! A tool call's arguments to JSON, natively: own enumerable string keys only, never the
//! program's `JSON.stringify` or `toJSON`, so that patched prototypes change nothing that is
//! sent. What JSON cannot carry is refused with the path to it, rather than silently dropped.

use rquickjs::{Ctx, Value, function::This};
use serde_json::{Map, Value as Json};

use super::{
    Shared,
    ffi::{self, Class, Prop},
};

/// Nesting accepted in arguments (the host's JSON reader allows 128 levels per message).
pub(crate) const MAX_DEPTH: usize = 64;
/// Arguments larger than this (as JSON, roughly) are refused: 16 MiB.
pub(crate) const MAX_BYTES: usize = 16 << 20;

pub(crate) enum ArgError<'js> {
    /// Not JSON; the message names the path and the problem.
    Bad(String),
    /// A getter was interrupted: the execution is over.
    Stopped(Value<'js>),
}

/// `undefined` and `null` become `{}`; anything but an object is refused. With the JSON, its
/// size, roughly.
pub(crate) fn convert<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    args: Option<Value<'js>>,
) -> Result<(Json, usize), ArgError<'js>> {
    let Some(args) = args.filter(|a| !a.is_undefined() && !a.is_null()) else {
        return Ok((Json::Object(Map::new()), 2));
    };
    let mut walker = Walker {
        ctx,
        shared,
        ancestors: Vec::new(),
        bytes: 0,
    };
    if !args.is_object() || matches!(ffi::class_of(ctx, &args), Class::Array) {
        let what = walker.kind(&args);
        return Err(ArgError::Bad(format!(
            "the arguments must be an object, not {what}"
        )));
    }
    let json = walker.walk(&args, &mut Vec::new())?.unwrap_or(Json::Null);
    Ok((json, walker.bytes))
}

enum Step {
    Key(String),
    Index(u32),
}

fn path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(key) if is_identifier(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Key(key) => out.push_str(&format!("[{}]", Json::String(key.clone()))),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

struct Walker<'a, 'js> {
    ctx: &'a Ctx<'js>,
    shared: &'a Shared,
    ancestors: Vec<(usize, usize)>,
    bytes: usize,
}

impl<'a, 'js> Walker<'a, 'js> {
    fn bad(&self, steps: &[Step], problem: &str) -> ArgError<'js> {
        let at = if steps.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("argument `{}`", path(steps))
        };
        ArgError::Bad(format!("{at} {problem}; tool arguments must be JSON"))
    }

    fn kind(&self, value: &Value<'js>) -> String {
        if value.is_object() {
            match ffi::class_of(self.ctx, value) {
                Class::Array => "an array".to_owned(),
                Class::Function => "a function".to_owned(),
                _ => "an object".to_owned(),
            }
        } else {
            format!("a {}", value.type_name())
        }
    }

    fn charge(&mut self, bytes: usize, steps: &[Step]) -> Result<(), ArgError<'js>> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > MAX_BYTES {
            return Err(ArgError::Bad(format!(
                "the arguments are larger than {} (at `{}`)",
                super::human_bytes(MAX_BYTES),
                path(steps)
            )));
        }
        Ok(())
    }

    /// `None` for `undefined` (omitted in objects, `null` in arrays).
    fn walk(
        &mut self,
        value: &Value<'js>,
        steps: &mut Vec<Step>,
    ) -> Result<Option<Json>, ArgError<'js>> {
        let ctx = self.ctx;
        if value.is_undefined() {
            return Ok(None);
        }
        self.charge(8, steps)?;
        if value.is_null() {
            return Ok(Some(Json::Null));
        }
        if let Some(b) = value.as_bool() {
            return Ok(Some(Json::Bool(b)));
        }
        if let Some(i) = value.as_int() {
            return Ok(Some(Json::Number(i.into())));
        }
        if let Some(n) = value.as_float() {
            if !n.is_finite() {
                let what = if n.is_nan() { "NaN" } else { "an infinity" };
                return Err(self.bad(steps, &format!("is {what}, which JSON cannot carry")));
            }
            return Ok(Some(super::render::number(n)));
        }
        if let Some(s) = value.as_string() {
            let s = s.to_string().unwrap_or_default();
            self.charge(s.len(), steps)?;
            return Ok(Some(Json::String(s)));
        }
        if value.is_big_int() {
            return Err(self.bad(steps, "is a BigInt"));
        }
        if value.is_symbol() {
            return Err(self.bad(steps, "is a symbol"));
        }
        if !value.is_object() {
            return Err(self.bad(steps, &format!("is a {}", value.type_name())));
        }
        let identity = ffi::identity(value);
        if let Some(&(_, at)) = self.ancestors.iter().find(|(id, _)| *id == identity) {
            let target = if at == 0 {
                "the arguments themselves".to_owned()
            } else {
                format!("`{}`", path(&steps[..at]))
            };
            return Err(self.bad(steps, &format!("refers back to {target} (a cycle)")));
        }
        if steps.len() >= MAX_DEPTH {
            return Err(self.bad(steps, &format!("nests deeper than {MAX_DEPTH} levels")));
        }
        let problem = match ffi::class_of(ctx, value) {
            Class::Function => Some("is a function".to_owned()),
            Class::Proxy => Some("is a Proxy".to_owned()),
            Class::Promise => Some("is a Promise (a missing `await`?)".to_owned()),
            Class::Map => Some("is a Map (convert it, e.g. with Object.fromEntries)".to_owned()),
            Class::Set => Some("is a Set (convert it, e.g. with Array.from)".to_owned()),
            Class::Error => Some("is an Error object".to_owned()),
            Class::ArrayBuffer => Some("is an ArrayBuffer".to_owned()),
            Class::TypedArray(_) => {
                Some("is a typed array (convert it with Array.from)".to_owned())
            }
            Class::Date => {
                let iso = self.shared.originals(ctx).and_then(|(to_iso, _, _)| {
                    to_iso.call::<_, String>((This(value.clone()),)).ok()
                });
                return match iso {
                    Some(iso) => Ok(Some(Json::String(iso))),
                    None => {
                        let _ = ctx.catch();
                        Err(self.bad(steps, "is an invalid Date"))
                    }
                };
            }
            Class::Array | Class::Plain => None,
        };
        if let Some(problem) = problem {
            return Err(self.bad(steps, &problem));
        }
        self.ancestors.push((identity, steps.len()));
        let result = if ffi::class_of(ctx, value) == Class::Array {
            self.array(value, steps)
        } else {
            self.object(value, steps)
        };
        self.ancestors.pop();
        result.map(Some)
    }

    fn array(&mut self, value: &Value<'js>, steps: &mut Vec<Step>) -> Result<Json, ArgError<'js>> {
        let len = ffi::own_u32(self.ctx, value, "length").unwrap_or(0);
        let mut items = Vec::new();
        for index in 0..len {
            self.charge(1, steps)?;
            steps.push(Step::Index(index));
            let prop = ffi::own_index(self.ctx, value, index).map_err(|_| self.stopped())?;
            let item = match prop {
                Some(prop) => self.read(value, prop, steps)?,
                None => Value::new_undefined(self.ctx.clone()),
            };
            items.push(self.walk(&item, steps)?.unwrap_or(Json::Null));
            steps.pop();
        }
        Ok(Json::Array(items))
    }

    fn object(&mut self, value: &Value<'js>, steps: &mut Vec<Step>) -> Result<Json, ArgError<'js>> {
        let props = ffi::own_enumerable(self.ctx, value).map_err(|_| self.stopped())?;
        let mut object = Map::new();
        for (key, prop) in props {
            self.charge(key.len() + 4, steps)?;
            steps.push(Step::Key(key));
            let item = self.read(value, prop, steps)?;
            let walked = self.walk(&item, steps)?;
            let Some(Step::Key(key)) = steps.pop() else {
                continue;
            };
            if let Some(walked) = walked {
                object.insert(key, walked);
            }
        }
        Ok(Json::Object(object))
    }

    fn read(
        &mut self,
        holder: &Value<'js>,
        prop: Prop<'js>,
        steps: &[Step],
    ) -> Result<Value<'js>, ArgError<'js>> {
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
                    return Err(ArgError::Stopped(thrown));
                }
                let why = super::describe_short(self.ctx, &thrown);
                Err(ArgError::Bad(format!(
                    "argument `{}`: its getter threw {why}",
                    path(steps)
                )))
            }
        }
    }

    /// Reading failed inside the engine (out of memory, an interrupt): end the call with it.
    fn stopped(&self) -> ArgError<'js> {
        ArgError::Stopped(self.ctx.catch())
    }
}
