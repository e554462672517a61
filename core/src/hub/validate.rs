//! Checking a call's arguments against the tool's `inputSchema` before it is sent, so that a
//! mistake comes back naming the field instead of as whatever the server makes of it.
//!
//! This covers the keywords tool schemas use: `type`, `properties`, `required`,
//! `additionalProperties`, `items`/`prefixItems`, `enum`, `const`, numeric and length bounds,
//! `anyOf`/`oneOf`/`allOf`, `nullable` and local `$ref`s. Keywords it does not know (`pattern`,
//! `format`, ...) are left to the server; it never refuses what it cannot judge.
//!
//! # What stops it
//!
//! The schema comes from a downstream server and the arguments from the agent, so neither may
//! make the check run long. Each bound, and what happens when it is reached:
//!
//! | bound | value | when reached |
//! | --- | --- | --- |
//! | work: visits of a schema node against a value node (every `$ref` resolution, every branch of `allOf`/`anyOf`/`oneOf`, every property, item, `required` name and `enum` option, one per KiB of a string whose length is counted) | [`BUDGET`] | [`Verdict::Unjudged`]: the Hub sends the call unvalidated and logs one warning per (server, tool) |
//! | work done on the async thread | [`INLINE_BUDGET`] | [`judge`] starts again on a blocking thread with [`BUDGET`] |
//! | nesting (a guard for the native stack) | `MAX_DEPTH`, 64 | that part is taken as valid, as before the budget existed |
//! | a `$ref` cycle that makes no progress in the value (`A = allOf[A, ...]`) | checked once | the inner occurrence is taken as valid; the outer one judges the rest |
//!
//! A pair (schema reached through a `$ref`, value) is checked once and its answer kept, so that
//! many `$ref`s to one definition over one value cost one check each; the budget still bounds
//! what the cache cannot (wide unions of distinct branches, deep values). Messages render at
//! most a few hundred characters of the value, the path and the allowed forms, whatever their
//! size.

use std::{collections::HashMap, fmt, io, sync::Arc};

use serde_json::{Map, Value};

/// The most work one check may do, in visits (see the module doc). Validating an array of
/// 10,000 records of five fields, each behind a `$ref`, takes about 150,000 visits; six times
/// that leaves room for unions, and spending it all takes about 20 ms in a release build, on a
/// blocking thread. A schema that needs more is one this validator should not judge.
pub const BUDGET: u64 = 1_000_000;

/// The work done on the async thread before [`judge`] moves a check to a blocking thread.
/// Nearly every real call fits (a call with a few hundred fields takes a few hundred visits),
/// and spending it takes well under a millisecond in a release build, so a tokio worker is never
/// held for longer than that.
pub const INLINE_BUDGET: u64 = 4_096;

/// Deeper than this, a part of the value is taken as valid: a guard for the native stack.
const MAX_DEPTH: usize = 64;

/// The most answers kept for (`$ref` target, value) pairs; past it, answers are not kept.
const MAX_MEMO: usize = 65_536;

/// Values and schema keys longer than this are named by their kind in messages.
const SHOWN: usize = 40;

/// How many allowed values an `enum` message lists.
const LISTED: usize = 20;

/// What [`check`] made of the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// They satisfy the schema (as far as the keywords it knows go).
    Valid,
    /// The first violation found, as a sentence naming the field.
    Invalid(String),
    /// The work budget ran out before a verdict: the arguments were not judged.
    Unjudged,
}

/// Checks `args` against `schema` within [`BUDGET`].
pub fn check(schema: &Map<String, Value>, args: &Value) -> Verdict {
    check_within(schema, args, BUDGET)
}

/// Checks `args` against `schema`; [`Verdict::Unjudged`] once `budget` visits are spent.
pub fn check_within(schema: &Map<String, Value>, args: &Value, budget: u64) -> Verdict {
    run(schema, args, budget).0
}

/// Checks the arguments for an async caller: inline within [`INLINE_BUDGET`], and when that is
/// not enough, again on a blocking thread within [`BUDGET`]. The arguments come back with the
/// verdict. A check moved off the async thread runs to its end even if the caller gives up.
pub async fn judge(schema: &Arc<Map<String, Value>>, args: Value) -> (Verdict, Value) {
    let verdict = check_within(schema, &args, INLINE_BUDGET);
    if verdict != Verdict::Unjudged {
        return (verdict, args);
    }
    let schema = Arc::clone(schema);
    let shared = Arc::new(args);
    let task = {
        let shared = Arc::clone(&shared);
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| check(&schema, &shared)))
    };
    // The task only fails if the checker panicked; then the arguments are not judged.
    let verdict = task.await.unwrap_or(Verdict::Unjudged);
    let args = Arc::try_unwrap(shared).unwrap_or_else(|shared| (*shared).clone());
    (verdict, args)
}

/// The verdict and the visits it took.
fn run(schema: &Map<String, Value>, args: &Value, budget: u64) -> (Verdict, u64) {
    let mut checker = Checker {
        root: schema,
        depth: 0,
        visits: 0,
        budget,
        memo: HashMap::new(),
        active: HashMap::new(),
        open: Vec::new(),
        next_id: 0,
        assumed: SETTLED,
        quiet: 0,
    };
    let outcome = checker
        .spend(1)
        .and_then(|()| checker.check_object(schema, args, &Path::Root));
    let verdict = match outcome {
        Ok(()) => Verdict::Valid,
        Err(Fail::Invalid(message)) => Verdict::Invalid(message.unwrap_or_default()),
        Err(Fail::Spent) => Verdict::Unjudged,
    };
    (verdict, checker.visits)
}

enum Fail {
    /// The message, or `None` where no one will read it (see `Checker::quiet`).
    Invalid(Option<String>),
    Spent,
}

type Outcome = Result<(), Fail>;

/// A (schema, value) pair by address: both live as long as the check.
type Pair = (usize, usize);

struct Checker<'a> {
    root: &'a Map<String, Value>,
    depth: usize,
    visits: u64,
    budget: u64,
    /// Answers for pairs reached through a `$ref`, each with the check under way it took for
    /// granted ([`SETTLED`] for none); such an answer holds only while that check is open.
    memo: HashMap<Pair, (Result<(), Option<String>>, u64)>,
    /// Pairs reached through a `$ref` whose check is under way, by id.
    active: HashMap<Pair, u64>,
    /// The ids of the checks under way, oldest (and smallest) first.
    open: Vec<u64>,
    next_id: u64,
    /// The oldest check under way whose answer the current one took for granted (a `$ref`
    /// cycle), or [`SETTLED`].
    assumed: u64,
    /// More than zero while checking the forms of an `anyOf`/`oneOf` with several, whose
    /// messages are dropped: rendering them was most of the cost of a wide union.
    quiet: u32,
}

/// An answer that took no check under way for granted.
const SETTLED: u64 = u64::MAX;

/// Where a value sits in the arguments; rendered only when a message names it.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |f: &mut fmt::Formatter<'_>, key: &str| match key.char_indices().nth(SHOWN) {
            Some((end, _)) => write!(f, "{}…", &key[..end]),
            None => f.write_str(key),
        };
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, name) => key(f, name),
            Path::Key(parent, name) => {
                write!(f, "{parent}.")?;
                key(f, name)
            }
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

fn field(path: &Path<'_>) -> String {
    match path {
        Path::Root => "the arguments".to_owned(),
        _ => format!("argument `{path}`"),
    }
}

/// A value's JSON text when it is at most [`SHOWN`] bytes long; serialising stops there.
fn short_text(value: &Value) -> Option<String> {
    struct Bounded(Vec<u8>);
    impl io::Write for Bounded {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if self.0.len() + bytes.len() > SHOWN {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.0.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut text = Bounded(Vec::new());
    serde_json::to_writer(&mut text, value).ok()?;
    String::from_utf8(text.0).ok()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn describe(value: &Value) -> String {
    match short_text(value) {
        Some(text) => format!("{} ({text})", kind(value)),
        None => kind(value).to_owned(),
    }
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

impl<'a> Checker<'a> {
    /// A violation, its message rendered only if someone may read it.
    fn invalid(&self, message: impl FnOnce() -> String) -> Outcome {
        Err(Fail::Invalid((self.quiet == 0).then(message)))
    }

    fn spend(&mut self, visits: u64) -> Outcome {
        self.visits = self.visits.saturating_add(visits);
        if self.visits > self.budget {
            Err(Fail::Spent)
        } else {
            Ok(())
        }
    }

    /// A local reference (`#/$defs/Name`): its first segment is a key of the root, the rest a
    /// JSON pointer inside it. `#` alone (the root itself) is left unchecked: recursion at the
    /// root is rare, and refusing nothing is the safe side.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix("#/")?;
        let (first, rest) = pointer
            .split_once('/')
            .map_or((pointer, ""), |(f, r)| (f, r));
        let first = first.replace("~1", "/").replace("~0", "~");
        let value = self.root.get(&first)?;
        if rest.is_empty() {
            Some(value)
        } else {
            value.pointer(&format!("/{rest}"))
        }
    }

    fn check(&mut self, schema: &'a Value, value: &Value, path: &Path<'_>) -> Outcome {
        self.spend(1)?;
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                return self.invalid(|| format!("{} is not allowed", field(path)));
            }
            Value::Object(schema) => schema,
            _ => return Ok(()),
        };
        if self.depth > MAX_DEPTH {
            // Taken as valid, and kept as such if it is under a `$ref`: leniency, never a
            // refusal, and it spares re-checking what lies past the guard.
            return Ok(());
        }
        self.depth += 1;
        let result = self.check_object(schema, value, path);
        self.depth -= 1;
        result
    }

    /// Checks a `$ref`'s target, once per (target, value) pair.
    fn check_reference(&mut self, target: &'a Value, value: &Value, path: &Path<'_>) -> Outcome {
        let pair = (
            std::ptr::from_ref(target) as usize,
            std::ptr::from_ref(value) as usize,
        );
        if let Some((known, rests_on)) = self.memo.get(&pair)
            && (*rests_on == SETTLED || self.open.binary_search(rests_on).is_ok())
            && (self.quiet > 0 || *known != Err(None))
        {
            self.assumed = self.assumed.min(*rests_on);
            return known.clone().map_err(Fail::Invalid);
        }
        if let Some(&id) = self.active.get(&pair) {
            // The same schema over the same value, further up: the check up there judges
            // everything but this occurrence, so this one holds (refusing nothing unjudged).
            self.assumed = self.assumed.min(id);
            return Ok(());
        }
        self.next_id += 1;
        let id = self.next_id;
        self.active.insert(pair, id);
        self.open.push(id);
        let outer = std::mem::replace(&mut self.assumed, SETTLED);
        let result = self.check(target, value, path);
        self.active.remove(&pair);
        self.open.pop();
        // What this answer took for granted, less what this check itself settled.
        let rests_on = if self.assumed < id {
            self.assumed
        } else {
            SETTLED
        };
        self.assumed = outer.min(rests_on);
        if self.memo.len() < MAX_MEMO || self.memo.contains_key(&pair) {
            match result {
                Ok(()) => {
                    self.memo.insert(pair, (Ok(()), rests_on));
                }
                Err(Fail::Invalid(ref message)) => {
                    self.memo.insert(pair, (Err(message.clone()), rests_on));
                }
                Err(Fail::Spent) => {}
            }
        }
        result
    }

    fn check_object(
        &mut self,
        schema: &'a Map<String, Value>,
        value: &Value,
        path: &Path<'_>,
    ) -> Outcome {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            self.spend(1)?;
            if let Some(target) = self.resolve(reference) {
                self.check_reference(target, value, path)?;
            }
        }
        if value.is_null() && schema.get("nullable") == Some(&Value::Bool(true)) {
            return Ok(());
        }
        if let Some(types) = schema.get("type") {
            let names: Vec<&str> = match types {
                Value::String(name) => vec![name.as_str()],
                Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !names.is_empty() && !names.iter().any(|name| type_matches(name, value)) {
                let expected = names.join(" or ");
                return self.invalid(|| {
                    format!(
                        "{} must be {expected}, got {}",
                        field(path),
                        describe(value)
                    )
                });
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array) {
            self.spend(options.len() as u64)?;
            if !options.contains(value) {
                let mut listed: Vec<String> = options
                    .iter()
                    .take(LISTED)
                    .map(|option| short_text(option).unwrap_or_else(|| kind(option).to_owned()))
                    .collect();
                if options.len() > LISTED {
                    listed.push(format!("… ({} in all)", options.len()));
                }
                return self.invalid(|| {
                    format!(
                        "{} must be one of {}, got {}",
                        field(path),
                        listed.join(", "),
                        describe(value)
                    )
                });
            }
        }
        if let Some(constant) = schema.get("const")
            && constant != value
        {
            return self.invalid(|| {
                format!(
                    "{} must be {}, got {}",
                    field(path),
                    short_text(constant).unwrap_or_else(|| kind(constant).to_owned()),
                    describe(value)
                )
            });
        }
        match value {
            Value::Object(object) => self.check_properties(schema, object, path)?,
            Value::Array(items) => self.check_items(schema, items, path)?,
            Value::String(text) => self.check_length(schema, text, path)?,
            Value::Number(number) => {
                let n = number.as_f64().unwrap_or_default();
                let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
                if let Some(min) = bound("minimum")
                    && n < min
                {
                    return self.invalid(|| {
                        format!("{} must be at least {min}, got {number}", field(path))
                    });
                }
                if let Some(max) = bound("maximum")
                    && n > max
                {
                    return self.invalid(|| {
                        format!("{} must be at most {max}, got {number}", field(path))
                    });
                }
                if let Some(min) = bound("exclusiveMinimum")
                    && n <= min
                {
                    return self.invalid(|| {
                        format!("{} must be more than {min}, got {number}", field(path))
                    });
                }
                if let Some(max) = bound("exclusiveMaximum")
                    && n >= max
                {
                    return self.invalid(|| {
                        format!("{} must be less than {max}, got {number}", field(path))
                    });
                }
            }
            _ => {}
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for part in all {
                self.check(part, value, path)?;
            }
        }
        for key in ["anyOf", "oneOf"] {
            let Some(options) = schema.get(key).and_then(Value::as_array) else {
                continue;
            };
            if options.is_empty() {
                continue;
            }
            // With more than one form, a failing form's message is never shown.
            let quiet = u32::from(options.len() > 1);
            self.quiet += quiet;
            let mut first_error = None;
            let mut matched = Ok(false);
            for option in options {
                match self.check(option, value, path) {
                    Ok(()) => {
                        matched = Ok(true);
                        break;
                    }
                    Err(Fail::Invalid(error)) => {
                        first_error.get_or_insert(error);
                    }
                    Err(Fail::Spent) => {
                        matched = Err(Fail::Spent);
                        break;
                    }
                }
            }
            self.quiet -= quiet;
            let matched = matched?;
            if !matched {
                return match (options.len(), first_error) {
                    (1, Some(error)) => Err(Fail::Invalid(error)),
                    _ => self.invalid(|| {
                        format!(
                            "{} matches none of the {} allowed forms",
                            field(path),
                            options.len()
                        )
                    }),
                };
            }
        }
        Ok(())
    }

    fn check_length(
        &mut self,
        schema: &Map<String, Value>,
        text: &str,
        path: &Path<'_>,
    ) -> Outcome {
        let min = schema.get("minLength").and_then(Value::as_u64);
        let max = schema.get("maxLength").and_then(Value::as_u64);
        if min.is_none() && max.is_none() {
            return Ok(());
        }
        // Counting characters reads the whole string: one visit per KiB.
        self.spend(text.len() as u64 / 1024)?;
        let length = text.chars().count() as u64;
        if let Some(min) = min
            && length < min
        {
            return self
                .invalid(|| format!("{} must be at least {min} characters long", field(path)));
        }
        if let Some(max) = max
            && length > max
        {
            return self
                .invalid(|| format!("{} must be at most {max} characters long", field(path)));
        }
        Ok(())
    }

    fn check_properties(
        &mut self,
        schema: &'a Map<String, Value>,
        object: &Map<String, Value>,
        path: &Path<'_>,
    ) -> Outcome {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            self.spend(required.len() as u64)?;
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return self
                        .invalid(|| format!("missing required {}", field(&Path::Key(path, name))));
                }
            }
        }
        let additional = schema.get("additionalProperties");
        let judges_others = matches!(additional, Some(Value::Bool(false) | Value::Object(_)));
        if properties.is_none() && !judges_others {
            return Ok(());
        }
        for (key, value) in object {
            let child = Path::Key(path, key);
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.check(property, value, &child)?;
                continue;
            }
            self.spend(1)?;
            match additional {
                Some(Value::Bool(false)) => {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    self.spend(known.len() as u64)?;
                    return self.invalid(|| {
                        format!(
                            "unknown {} (expected {})",
                            field(&child),
                            if known.is_empty() {
                                "no arguments".to_owned()
                            } else {
                                known.join(", ")
                            }
                        )
                    });
                }
                Some(extra @ Value::Object(_)) => self.check(extra, value, &child)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn check_items(
        &mut self,
        schema: &'a Map<String, Value>,
        items: &[Value],
        path: &Path<'_>,
    ) -> Outcome {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            return self.invalid(|| {
                format!(
                    "{} must have at least {min} items, got {count}",
                    field(path)
                )
            });
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            return self
                .invalid(|| format!("{} must have at most {max} items, got {count}", field(path)));
        }
        let prefix = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .or_else(|| schema.get("items").and_then(Value::as_array));
        let rest = schema.get("items").filter(|items| !items.is_array());
        for (i, item) in items.iter().enumerate() {
            // Past the prefix with no schema for the rest, nothing more is checked.
            let Some(item_schema) = prefix.and_then(|prefix| prefix.get(i)).or(rest) else {
                break;
            };
            self.check(item_schema, item, &Path::Index(path, i))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
