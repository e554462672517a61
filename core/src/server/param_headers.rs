//! SEP-2243's `Mcp-Param-*` headers of a direct call that came over HTTP: each argument a
//! tool's input schema designates with `x-mcp-header` must be mirrored, as it is in the body,
//! into its header, so that a proxy routing on the header sees what the server acts on. The
//! HTTP listener hands the headers over decoded (see
//! [`runbyte_plugin_api::transport::PARAM_HEADERS_META`]); a call whose headers and body
//! disagree is refused with -32020 (the listener answers it with HTTP 400), before any policy
//! or server sees it.

use serde_json::{Map, Value};

/// How deep in nested object properties designations are looked for.
const MAX_DEPTH: usize = 8;
/// The most designated arguments one tool's schema is checked for.
const MAX_DESIGNATED: usize = 64;

/// One argument a schema designates: its path in the arguments and its header's name (after
/// `Mcp-Param-`, lowercase, as the listener keys them).
#[derive(Debug, PartialEq)]
struct Designated {
    path: Vec<String>,
    header: String,
}

fn designated(schema: &Map<String, Value>) -> Vec<Designated> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found);
    found
}

fn collect(schema: &Map<String, Value>, path: &mut Vec<String>, found: &mut Vec<Designated>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let Some(property) = property.as_object() else {
            continue;
        };
        if found.len() == MAX_DESIGNATED {
            return;
        }
        path.push(name.clone());
        if let Some(header) = property.get("x-mcp-header").and_then(Value::as_str) {
            found.push(Designated {
                path: path.clone(),
                header: header.to_ascii_lowercase(),
            });
        } else if path.len() < MAX_DEPTH {
            collect(property, path, found);
        }
        path.pop();
    }
}

/// An argument's value as its header carries it: strings as they are, numbers and booleans
/// as JSON writes them; `None` for what no header carries (absent, `null`, objects, arrays).
fn as_header(arguments: &Value, path: &[String]) -> Option<String> {
    let value = path
        .iter()
        .try_fold(arguments, |value, key| value.get(key.as_str()))?;
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// Checks a call's headers (`headers`, as the listener passed them) against the arguments
/// `schema` designates; `Err` says which disagrees and how.
pub fn check(
    schema: &Map<String, Value>,
    arguments: &Value,
    headers: &Map<String, Value>,
) -> Result<(), String> {
    for Designated { path, header } in designated(schema) {
        let argument = path.join(".");
        let sent = headers.get(&header).and_then(Value::as_str);
        match (as_header(arguments, &path), sent) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!(
                    "Header mismatch: argument `{argument}` is given but its header \
                     Mcp-Param-{header} is missing"
                ));
            }
            (None, Some(_)) => {
                return Err(format!(
                    "Header mismatch: header Mcp-Param-{header} is given but argument \
                     `{argument}` is not"
                ));
            }
            (Some(body), Some(sent)) if body != sent => {
                return Err(format!(
                    "Header mismatch: header Mcp-Param-{header} differs from argument \
                     `{argument}`"
                ));
            }
            (Some(_), Some(_)) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn designated_arguments_must_match_their_headers() {
        let schema = object(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}
            }},
            "free": {"type": "string"}
        }}));
        let arguments = json!({"region": "Hello", "n": 7, "nested": {"flag": true}, "free": "x"});
        let headers = object(json!({"region": "Hello", "n": "7", "flag": "true", "other": "y"}));
        check(&schema, &arguments, &headers).unwrap();

        let mut differs = headers.clone();
        differs.insert("region".into(), json!("hello"));
        let why = check(&schema, &arguments, &differs).unwrap_err();
        assert!(why.contains("Mcp-Param-region differs"), "{why}");

        let mut missing = headers.clone();
        missing.remove("flag");
        let why = check(&schema, &arguments, &missing).unwrap_err();
        assert!(why.contains("`nested.flag` is given"), "{why}");

        // A header for an argument not given, and `null` (which no header carries).
        let why = check(
            &schema,
            &json!({"n": 7, "nested": {"flag": true}}),
            &headers,
        );
        assert!(why.unwrap_err().contains("`region` is not"));
        let none = object(json!({}));
        check(&schema, &json!({"region": null}), &none).unwrap();
    }

    #[test]
    fn hostile_schemas_are_bounded() {
        let mut schema = json!({"type": "string", "x-mcp-header": "Deep"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"a": schema}});
        }
        assert!(
            designated(&object(schema)).is_empty(),
            "past the depth bound"
        );
        let wide: Map<String, Value> = (0..1000)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"type": "string", "x-mcp-header": format!("H{i}")}),
                )
            })
            .collect();
        let schema = object(json!({"properties": wide}));
        assert_eq!(designated(&schema).len(), MAX_DESIGNATED);
    }
}
