//! JSON Schema to inline TypeScript types: no interfaces, no type aliases, so a tool's whole
//! signature reads in one place.
//!
//! Covered: `type` (and lists of types), objects with required and optional properties,
//! `additionalProperties`, arrays and tuples (`prefixItems`, or `items` as a list), `enum` and
//! `const`, `anyOf`/`oneOf` (unions), `allOf` (intersections), `nullable`, local `$ref`
//! (`#/$defs/…`, `#/definitions/…`, `#`, percent-encoded or not), boolean schemas. A `$ref` is expanded where it
//! stands; a recursive one, or a schema too large or too deep, becomes `unknown` with a warning.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::{
    names::is_property_name,
    text::{doc_comment, string_literal},
};

/// How many schema nodes one tool may expand into, so that `$ref`s that fan out cannot make
/// the output explode.
const BUDGET: usize = 4000;

/// How deeply schemas may nest.
const MAX_DEPTH: usize = 32;

/// How a rendered type binds, to know when it needs parentheses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Union,
    Intersection,
    Atom,
}

/// Renders the schemas of one tool; `root` is what `$ref`s point into.
pub(crate) struct Render<'a> {
    root: &'a Value,
    /// Spaces of indent for multi-line objects (with property docs), or `None` for one line.
    indent: Option<usize>,
    expanding: Vec<String>,
    budget: usize,
    /// What could not be typed, in the order met.
    pub(crate) warnings: Vec<String>,
}

impl<'a> Render<'a> {
    pub(crate) fn new(root: &'a Value, multiline: bool) -> Self {
        Render {
            root,
            indent: multiline.then_some(0),
            expanding: Vec::new(),
            budget: BUDGET,
            warnings: Vec::new(),
        }
    }

    /// The type of `schema`.
    pub(crate) fn render(&mut self, schema: &Value) -> String {
        self.ty(schema, 0).0
    }

    fn warn(&mut self, message: String) {
        if !self.warnings.contains(&message) {
            self.warnings.push(message);
        }
    }

    fn ty(&mut self, schema: &Value, depth: usize) -> (String, Prec) {
        let unknown = || ("unknown".to_owned(), Prec::Atom);
        if self.budget == 0 {
            self.warn("the schema is too large to type in full; the rest is unknown".to_owned());
            return unknown();
        }
        self.budget -= 1;
        if depth > MAX_DEPTH {
            self.warn(format!(
                "the schema nests deeper than {MAX_DEPTH}; the rest is unknown"
            ));
            return unknown();
        }
        let object = match schema {
            Value::Bool(true) => return unknown(),
            Value::Bool(false) => return ("never".to_owned(), Prec::Atom),
            Value::Object(object) => object,
            _ => {
                self.warn(
                    "a schema that is not an object or a boolean is typed unknown".to_owned(),
                );
                return unknown();
            }
        };
        let (text, prec) = self.untagged(object, depth);
        if object.get("nullable") == Some(&Value::Bool(true)) && text != "unknown" {
            return (
                format!("{} | null", wrap(&text, prec, Prec::Union)),
                Prec::Union,
            );
        }
        (text, prec)
    }

    fn untagged(&mut self, object: &Map<String, Value>, depth: usize) -> (String, Prec) {
        if let Some(reference) = object.get("$ref") {
            return self.reference(reference, depth);
        }
        if let Some(value) = object.get("const") {
            return literal(value);
        }
        if let Some(values) = object.get("enum").and_then(Value::as_array) {
            let members: Vec<(String, Prec)> = values.iter().map(literal).collect();
            return join(members, " | ", Prec::Union, "never");
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = object.get(key).and_then(Value::as_array) {
                let members = members.iter().map(|m| self.ty(m, depth + 1)).collect();
                return join(members, " | ", Prec::Union, "never");
            }
        }
        if let Some(members) = object.get("allOf").and_then(Value::as_array) {
            let members = members.iter().map(|m| self.ty(m, depth + 1)).collect();
            return join(members, " & ", Prec::Intersection, "unknown");
        }
        match object.get("type") {
            Some(Value::String(name)) => self.typed(name, object, depth),
            Some(Value::Array(names)) => {
                let members = names
                    .iter()
                    .map(|name| match name.as_str() {
                        Some(name) => self.typed(name, object, depth),
                        None => ("unknown".to_owned(), Prec::Atom),
                    })
                    .collect();
                join(members, " | ", Prec::Union, "never")
            }
            _ if object.contains_key("properties") => self.typed("object", object, depth),
            _ if object.contains_key("items") || object.contains_key("prefixItems") => {
                self.typed("array", object, depth)
            }
            _ => ("unknown".to_owned(), Prec::Atom),
        }
    }

    fn typed(&mut self, name: &str, object: &Map<String, Value>, depth: usize) -> (String, Prec) {
        let atom = |text: &str| (text.to_owned(), Prec::Atom);
        match name {
            "string" => atom("string"),
            "number" | "integer" => atom("number"),
            "boolean" => atom("boolean"),
            "null" => atom("null"),
            "array" => (self.array(object, depth), Prec::Atom),
            "object" => (self.object(object, depth), Prec::Atom),
            other => {
                self.warn(format!(
                    "unknown JSON Schema type {}; typed unknown",
                    string_literal(other)
                ));
                atom("unknown")
            }
        }
    }

    fn array(&mut self, object: &Map<String, Value>, depth: usize) -> String {
        let tuple = object
            .get("prefixItems")
            .or_else(|| object.get("items").filter(|items| items.is_array()))
            .and_then(Value::as_array);
        if let Some(members) = tuple {
            let members: Vec<String> = members.iter().map(|m| self.ty(m, depth + 1).0).collect();
            return format!("[{}]", members.join(", "));
        }
        match object.get("items") {
            Some(items) => {
                let (item, prec) = self.ty(items, depth + 1);
                if prec == Prec::Atom {
                    format!("{item}[]")
                } else {
                    format!("Array<{item}>")
                }
            }
            None => "unknown[]".to_owned(),
        }
    }

    fn object(&mut self, object: &Map<String, Value>, depth: usize) -> String {
        let empty = Map::new();
        let properties = object
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: BTreeSet<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // Sorted explicitly: the output must not depend on how the JSON map keeps its keys.
        let mut keys: Vec<&String> = properties.keys().collect();
        keys.sort();

        let outer = self.indent;
        let inner = outer.map(|n| n + 2);
        let extra = object.get("additionalProperties");
        let index = match (properties.is_empty(), extra) {
            (true, Some(Value::Bool(false))) => Some("never".to_owned()),
            (true, None | Some(Value::Bool(true))) => Some("unknown".to_owned()),
            (true, Some(schema)) => {
                self.indent = inner;
                let ty = self.ty(schema, depth + 1).0;
                self.indent = outer;
                Some(ty)
            }
            (false, None | Some(Value::Bool(_))) => None,
            // Next to named properties, an index signature of another type would clash with
            // them, so extra keys are only said to exist.
            (false, Some(_)) => Some("unknown".to_owned()),
        };

        let mut members: Vec<String> = Vec::new();
        for key in keys {
            let schema = &properties[key.as_str()];
            self.indent = inner;
            let (ty, _) = self.ty(schema, depth + 1);
            self.indent = outer;
            let name = if is_property_name(key) {
                key.clone()
            } else {
                string_literal(key)
            };
            let optional = if required.contains(key.as_str()) {
                ""
            } else {
                "?"
            };
            let doc = match inner {
                Some(indent) => doc_comment(&property_doc(schema), indent),
                None => String::new(),
            };
            members.push(format!("{doc}{}{name}{optional}: {ty};", pad(inner)));
        }
        if let Some(ty) = index {
            members.push(format!("{}[key: string]: {ty};", pad(inner)));
        }
        match inner {
            Some(_) => format!("{{\n{}\n{}}}", members.join("\n"), pad(outer)),
            None => {
                let members: Vec<&str> = members.iter().map(|m| m.trim_end_matches(';')).collect();
                format!("{{ {} }}", members.join("; "))
            }
        }
    }

    fn reference(&mut self, reference: &Value, depth: usize) -> (String, Prec) {
        let Some(pointer) = reference.as_str() else {
            self.warn("a `$ref` that is not a string is typed unknown".to_owned());
            return ("unknown".to_owned(), Prec::Atom);
        };
        let shown = string_literal(pointer);
        let Some(target) = resolve(self.root, pointer) else {
            self.warn(format!(
                "$ref {shown} is not found in the schema; typed unknown"
            ));
            return ("unknown".to_owned(), Prec::Atom);
        };
        if self.expanding.iter().any(|p| p == pointer) {
            self.warn(format!(
                "$ref {shown} is recursive; typed unknown where it recurs"
            ));
            return ("unknown".to_owned(), Prec::Atom);
        }
        self.expanding.push(pointer.to_owned());
        let rendered = self.ty(target, depth + 1);
        self.expanding.pop();
        rendered
    }
}

/// The schema a local `$ref` points at: `#`, or `#/` and a JSON pointer (`~1` is `/`, `~0` is
/// `~`). Remote references are not followed.
fn resolve<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    let path = pointer.strip_prefix('#')?;
    if path.is_empty() {
        return Some(root);
    }
    // A fragment is URI-encoded (`%20` for a space); a pointer written raw works too.
    root.pointer(path)
        .or_else(|| root.pointer(&percent_decode(path)?))
}

/// `text` with its `%XX` escapes decoded, or `None` when that is not valid UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn pad(indent: Option<usize>) -> String {
    " ".repeat(indent.unwrap_or(0))
}

fn wrap(text: &str, prec: Prec, context: Prec) -> String {
    if prec < context {
        format!("({text})")
    } else {
        text.to_owned()
    }
}

fn join(members: Vec<(String, Prec)>, separator: &str, prec: Prec, empty: &str) -> (String, Prec) {
    match members.len() {
        0 => (empty.to_owned(), Prec::Atom),
        1 => members
            .into_iter()
            .next()
            .unwrap_or_else(|| (empty.to_owned(), Prec::Atom)),
        _ => {
            let parts: Vec<String> = members
                .iter()
                .map(|(text, inner)| {
                    // `A | B` inside `&` needs parentheses; `A & B` inside `|` does not.
                    if *inner < prec {
                        format!("({text})")
                    } else {
                        text.clone()
                    }
                })
                .collect();
            (parts.join(separator), prec)
        }
    }
}

/// A JSON value as a TypeScript literal type; objects and arrays have none, so `unknown`.
fn literal(value: &Value) -> (String, Prec) {
    let text = match value {
        Value::String(text) => string_literal(text),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Null => "null".to_owned(),
        Value::Array(_) | Value::Object(_) => "unknown".to_owned(),
    };
    (text, Prec::Atom)
}

/// What a property's doc comment says: its description, then its format and default, one
/// paragraph.
fn property_doc(schema: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(description) = schema.get("description").and_then(Value::as_str) {
        lines.push(description.trim().to_owned());
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        lines.push(format!("@format {format}"));
    }
    if let Some(default) = schema.get("default") {
        lines.push(format!("@default {default}"));
    }
    if schema.get("deprecated") == Some(&Value::Bool(true)) {
        lines.push("@deprecated".to_owned());
    }
    vec![lines.join("\n")]
}
