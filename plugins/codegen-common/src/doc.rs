//! What a schema says about a value beyond its type, for doc comments.

use serde_json::Value;

use crate::types::{Doc, MAX_LITERALS};

/// Keywords shown in doc comments, in the order they are shown.
const FACTS: &[&str] = &[
    "format",
    "contentMediaType",
    "contentEncoding",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "readOnly",
    "writeOnly",
    "default",
];

/// The longest schema title or description kept, in characters.
pub const MAX_TEXT: usize = 4_000;

/// The doc of one schema node.
pub fn doc(schema: &Value) -> Doc {
    let Value::Object(map) = schema else {
        return Doc::default();
    };
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(|s| crate::text::cap(s, MAX_TEXT))
    };
    let mut doc = Doc {
        title: text("title"),
        description: text("description"),
        facts: Vec::new(),
        deprecated: map.get("deprecated") == Some(&Value::Bool(true)),
    };
    if doc.title == doc.description {
        doc.title = None;
    }
    for &key in FACTS {
        match map.get(key) {
            None | Some(Value::Bool(false))
                if matches!(key, "uniqueItems" | "readOnly" | "writeOnly") => {}
            None => {}
            Some(Value::String(text)) if key != "default" => doc.facts.push((key, text.clone())),
            Some(value) => doc.facts.push((key, crate::text::json_text(value, 120))),
        }
    }
    if let Some(Value::Array(values)) = map.get("enum")
        && values.len() > MAX_LITERALS
    {
        let first: Vec<String> = values
            .iter()
            .take(10)
            .map(|v| crate::text::json_text(v, 40))
            .collect();
        doc.facts.push((
            "enum",
            format!("{} values: {}, …", values.len(), first.join(", ")),
        ));
    }
    if let Some(Value::Array(examples)) = map.get("examples") {
        for example in examples.iter().take(3) {
            doc.facts
                .push(("example", crate::text::json_text(example, 120)));
        }
    }
    doc
}
