//! The validator as it was before the work budget, kept as the oracle that the budgeted one
//! must agree with on schemas without `$ref` cycles.

use serde_json::{Map, Value};

/// The first violation found, as a sentence naming the field.
pub(super) fn check(schema: &Map<String, Value>, args: &Value) -> Result<(), String> {
    let mut checker = Checker {
        root: schema,
        depth: 0,
    };
    checker.check_object(schema, args, "")
}

struct Checker<'a> {
    root: &'a Map<String, Value>,
    depth: usize,
}

const MAX_DEPTH: usize = 64;

fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = value.to_string();
    if text.len() <= 40 {
        format!("{kind} ({text})")
    } else {
        kind.to_owned()
    }
}

fn field(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("argument `{path}`")
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
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

    fn check(&mut self, schema: &'a Value, value: &Value, path: &str) -> Result<(), String> {
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err(format!("{} is not allowed", field(path))),
            Value::Object(schema) => schema,
            _ => return Ok(()),
        };
        if self.depth > MAX_DEPTH {
            return Ok(());
        }
        self.depth += 1;
        let result = self.check_object(schema, value, path);
        self.depth -= 1;
        result
    }

    fn check_object(
        &mut self,
        schema: &'a Map<String, Value>,
        value: &Value,
        path: &str,
    ) -> Result<(), String> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str)
            && let Some(target) = self.resolve(reference)
        {
            self.check(target, value, path)?;
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
                return Err(format!(
                    "{} must be {expected}, got {}",
                    field(path),
                    describe(value)
                ));
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            let listed: Vec<String> = options.iter().map(Value::to_string).collect();
            return Err(format!(
                "{} must be one of {}, got {}",
                field(path),
                listed.join(", "),
                describe(value)
            ));
        }
        if let Some(constant) = schema.get("const")
            && constant != value
        {
            return Err(format!(
                "{} must be {constant}, got {}",
                field(path),
                describe(value)
            ));
        }
        match value {
            Value::Object(object) => self.check_properties(schema, object, path)?,
            Value::Array(items) => self.check_items(schema, items, path)?,
            Value::String(text) => {
                let length = text.chars().count() as u64;
                if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                    && length < min
                {
                    return Err(format!(
                        "{} must be at least {min} characters long",
                        field(path)
                    ));
                }
                if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                    && length > max
                {
                    return Err(format!(
                        "{} must be at most {max} characters long",
                        field(path)
                    ));
                }
            }
            Value::Number(number) => {
                let n = number.as_f64().unwrap_or_default();
                let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
                if let Some(min) = bound("minimum")
                    && n < min
                {
                    return Err(format!(
                        "{} must be at least {min}, got {number}",
                        field(path)
                    ));
                }
                if let Some(max) = bound("maximum")
                    && n > max
                {
                    return Err(format!(
                        "{} must be at most {max}, got {number}",
                        field(path)
                    ));
                }
                if let Some(min) = bound("exclusiveMinimum")
                    && n <= min
                {
                    return Err(format!(
                        "{} must be more than {min}, got {number}",
                        field(path)
                    ));
                }
                if let Some(max) = bound("exclusiveMaximum")
                    && n >= max
                {
                    return Err(format!(
                        "{} must be less than {max}, got {number}",
                        field(path)
                    ));
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
            if let Some(options) = schema.get(key).and_then(Value::as_array) {
                let mut first_error = None;
                let matched = options
                    .iter()
                    .any(|option| match self.check(option, value, path) {
                        Ok(()) => true,
                        Err(error) => {
                            first_error.get_or_insert(error);
                            false
                        }
                    });
                if !matched && !options.is_empty() {
                    return Err(match (options.len(), first_error) {
                        (1, Some(error)) => error,
                        _ => format!(
                            "{} matches none of the {} allowed forms",
                            field(path),
                            options.len()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    fn check_properties(
        &mut self,
        schema: &'a Map<String, Value>,
        object: &Map<String, Value>,
        path: &str,
    ) -> Result<(), String> {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(format!("missing required {}", field(&join(path, name))));
                }
            }
        }
        for (key, value) in object {
            let child = join(path, key);
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.check(property, value, &child)?;
                continue;
            }
            match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "unknown {} (expected {})",
                        field(&child),
                        if known.is_empty() {
                            "no arguments".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ));
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
        path: &str,
    ) -> Result<(), String> {
        let count = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && count < min
        {
            return Err(format!(
                "{} must have at least {min} items, got {count}",
                field(path)
            ));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && count > max
        {
            return Err(format!(
                "{} must have at most {max} items, got {count}",
                field(path)
            ));
        }
        let prefix = schema
            .get("prefixItems")
            .and_then(Value::as_array)
            .or_else(|| schema.get("items").and_then(Value::as_array));
        let rest = schema.get("items").filter(|items| !items.is_array());
        for (i, item) in items.iter().enumerate() {
            let child = format!("{path}[{i}]");
            match prefix.and_then(|prefix| prefix.get(i)) {
                Some(item_schema) => self.check(item_schema, item, &child)?,
                None => {
                    if let Some(item_schema) = rest {
                        self.check(item_schema, item, &child)?;
                    }
                }
            }
        }
        Ok(())
    }
}
