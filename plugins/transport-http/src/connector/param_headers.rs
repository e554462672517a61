//! Custom headers from tool parameters (SEP-2243, MCP 2026-07-28).
//!
//! A tool's `inputSchema` may mark a property with `"x-mcp-header": "<Name>"`; a `tools/call`
//! of that tool then mirrors the argument into the header `Mcp-Param-<Name>`. The answer to
//! every `tools/list` is screened on its way to the host: a tool whose annotations break the
//! rules is taken out of the list (with a warning), and each valid tool's designations are
//! remembered for the connection, so that its calls can carry the headers.
//!
//! The rules kept here: the name is a non-empty RFC 9110 token, unique (ignoring case) within
//! the whole tool; the property's `type` is `string`, `integer` or `boolean`; and the annotation
//! sits on a property reached from `inputSchema` through `properties` keys only, at any depth
//! (`inputSchema.properties.a.properties.b` designates the argument `arguments.a.b`), nowhere
//! else in the schema (not under `items`, `anyOf`, `$defs`, `additionalProperties`, …).

use std::collections::HashMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use runbyte_http_common::lock;
use runbyte_plugin_api::{LogLevel, log};
use serde_json::Value;

use super::{Shared, header_value};

/// The schema keyword that designates a header.
const ANNOTATION: &str = "x-mcp-header";
/// What every designated header's name starts with.
const HEADER_PREFIX: &str = "mcp-param-";
/// The JSON Schema types a designated property may have.
const PRIMITIVE_TYPES: [&str; 3] = ["string", "integer", "boolean"];
/// The largest integer a header may carry exactly (JavaScript's safe range).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// One designated property of a tool: the argument (its path of property names from
/// `arguments`) and the header (`Mcp-Param-<Name>`, lowercased) it goes into.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Designation {
    pub(super) path: Vec<String>,
    pub(super) header: String,
}

/// Each tool's designations, by tool name. Tools without any are not kept.
pub(super) type Designations = HashMap<String, Vec<Designation>>;

impl Shared {
    /// Screens the answer to a `tools/list`: drops the tools whose `x-mcp-header` annotations
    /// are invalid (one warning each) and remembers the designations of the others.
    pub(super) fn screen_tools(&self, answer: &mut Value) {
        let Some(tools) = answer
            .pointer_mut("/result/tools")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        let mut found = Vec::new();
        tools.retain(|tool| {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            match designations(tool) {
                Ok(designated) => {
                    found.push((name.to_owned(), designated));
                    true
                }
                Err(why) => {
                    log(
                        LogLevel::Warn,
                        &format!(
                            "server `{}`: tool `{name}` left out of tools/list: {why}",
                            self.name
                        ),
                    );
                    found.push((name.to_owned(), Vec::new()));
                    false
                }
            }
        });
        let mut known = lock(&self.designations);
        for (name, designated) in found {
            if designated.is_empty() {
                known.remove(&name);
            } else {
                known.insert(name, designated);
            }
        }
    }

    /// The `Mcp-Param-*` headers of a `tools/call` request: one per designated argument of the
    /// tool that is present and not null (nor absent or null anywhere along its path).
    pub(super) fn param_headers(&self, request: &Value) -> HeaderMap {
        let Some(tool) = request.pointer("/params/name").and_then(Value::as_str) else {
            return HeaderMap::new();
        };
        let Some(arguments) = request.pointer("/params/arguments") else {
            return HeaderMap::new();
        };
        let known = lock(&self.designations);
        headers_for(known.get(tool).map_or(&[], Vec::as_slice), arguments)
    }
}

/// The headers `designated` fill from a call's `arguments`: one per argument that is present
/// and not null, its path included (`{"a": null}` fills no header for `a.b`).
fn headers_for(designated: &[Designation], arguments: &Value) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for designation in designated {
        let value = designation
            .path
            .iter()
            .try_fold(arguments, |value, name| value.get(name))
            .and_then(argument_text)
            .and_then(|text| HeaderValue::from_str(&text).ok());
        let name = HeaderName::from_bytes(designation.header.as_bytes()).ok();
        if let (Some(name), Some(value)) = (name, value) {
            headers.insert(name, value);
        }
    }
    headers
}

/// A tool's designations, or why its annotations are invalid.
pub(super) fn designations(tool: &Value) -> Result<Vec<Designation>, String> {
    let Some(schema) = tool.get("inputSchema") else {
        return Ok(Vec::new());
    };
    // Annotations anywhere but on a property reached through `properties` alone.
    let mut stray = Vec::new();
    find_annotations(schema, "inputSchema", Level::Top, &mut stray);
    if let Some(path) = stray.first() {
        return Err(format!(
            "`{ANNOTATION}` at {path}: it is allowed only on a property of inputSchema.properties, or of such a property's `properties` (at any depth)"
        ));
    }
    let mut designated = Vec::new();
    collect(schema, &mut Vec::new(), &mut designated)?;
    Ok(designated)
}

/// Adds to `designated` the annotated properties under `schema.properties` (recursively through
/// their own `properties`); `path` is where `schema` sits among the arguments.
fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    designated: &mut Vec<Designation>,
) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (property, sub) in properties.into_iter().flatten() {
        path.push(property.clone());
        if let Some(annotation) = sub.get(ANNOTATION) {
            designated.push(designation(path, sub, annotation, designated)?);
        }
        collect(sub, path, designated)?;
        path.pop();
    }
    Ok(())
}

/// The designation of the property at `path` (its schema `sub`, annotated with `annotation`),
/// or why it is invalid; `earlier` are the tool's designations found so far.
fn designation(
    path: &[String],
    sub: &Value,
    annotation: &Value,
    earlier: &[Designation],
) -> Result<Designation, String> {
    let property = path.join(".");
    let Some(name) = annotation.as_str() else {
        return Err(format!(
            "`{ANNOTATION}` of property `{property}` is not a string"
        ));
    };
    if name.is_empty() {
        return Err(format!("`{ANNOTATION}` of property `{property}` is empty"));
    }
    if !is_token(name) {
        return Err(format!(
            "`{ANNOTATION}` of property `{property}` ({name:?}) is not an HTTP token"
        ));
    }
    let header = format!("{HEADER_PREFIX}{}", name.to_ascii_lowercase());
    if let Some(other) = earlier.iter().find(|other| other.header == header) {
        return Err(format!(
            "properties `{}` and `{property}` both designate the header Mcp-Param-{name} (names are case-insensitive)",
            other.path.join(".")
        ));
    }
    let kind = sub.get("type").and_then(Value::as_str);
    if !kind.is_some_and(|kind| PRIMITIVE_TYPES.contains(&kind)) {
        let kind = sub.get("type").map_or("none".to_owned(), Value::to_string);
        return Err(format!(
            "property `{property}` designates Mcp-Param-{name} but its type is {kind}, not string, integer or boolean"
        ));
    }
    Ok(Designation {
        path: path.to_vec(),
        header,
    })
}

/// Where a schema sits in a tool's `inputSchema`.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// `inputSchema` itself.
    Top,
    /// A schema reached from `inputSchema` through `properties` keys only: where an annotation
    /// may be.
    Property,
    /// Any other subschema.
    Deeper,
}

/// Collects into `found` the paths of the misplaced `x-mcp-header` keywords in `schema` and
/// its subschemas.
fn find_annotations(schema: &Value, path: &str, level: Level, found: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    for (keyword, value) in object {
        match keyword.as_str() {
            ANNOTATION if level != Level::Property => found.push(path.to_owned()),
            // Maps of names to schemas.
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                let inner = if level != Level::Deeper && keyword == "properties" {
                    Level::Property
                } else {
                    Level::Deeper
                };
                for (name, sub) in value.as_object().into_iter().flatten() {
                    find_annotations(sub, &format!("{path}.{keyword}.{name}"), inner, found);
                }
            }
            // Lists of schemas.
            "allOf" | "anyOf" | "oneOf" | "prefixItems" | "items" if value.is_array() => {
                for (at, sub) in value.as_array().into_iter().flatten().enumerate() {
                    find_annotations(
                        sub,
                        &format!("{path}.{keyword}[{at}]"),
                        Level::Deeper,
                        found,
                    );
                }
            }
            // Single schemas.
            "items"
            | "additionalItems"
            | "additionalProperties"
            | "contains"
            | "not"
            | "if"
            | "then"
            | "else"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => {
                find_annotations(value, &format!("{path}.{keyword}"), Level::Deeper, found);
            }
            // Anything else is data (`default`, `enum`, `const`, `examples`) or unknown.
            _ => {}
        }
    }
}

/// Whether `name` is an RFC 9110 token (`1*tchar`).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An argument as a header's text: a string as `header_value` sends it, an integer in decimal,
/// a boolean as `true`/`false`. `None` for null and for values no header can carry (objects,
/// arrays, fractions, integers beyond the safe range): the server judges those arguments.
fn argument_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(header_value(text)),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => {
            if let Some(integer) = number.as_i64() {
                return Some(integer.to_string());
            }
            if let Some(integer) = number.as_u64() {
                return Some(integer.to_string());
            }
            // An integral float (`42.0`) is an integer to JSON Schema.
            let float = number.as_f64()?;
            (float.fract() == 0.0 && float.abs() <= MAX_SAFE_INTEGER).then(|| format!("{float:.0}"))
        }
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn tool(properties: Value) -> Value {
        json!({"name": "t", "inputSchema": {"type": "object", "properties": properties}})
    }

    #[test]
    fn valid_designations_are_found() {
        let designated = designations(&tool(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "X-Verbose_1"},
            "note": {"type": "string"},
            "x-mcp-header": {"type": "string"},
            "filter": {"type": "object", "default": {"x-mcp-header": "data"}},
        })))
        .unwrap();
        let headers: Vec<_> = designated.iter().map(|d| d.header.as_str()).collect();
        assert_eq!(
            headers,
            [
                "mcp-param-region",
                "mcp-param-priority",
                "mcp-param-x-verbose_1"
            ]
        );
        assert_eq!(designated[0].path, ["region"]);
        assert!(designations(&json!({"name": "bare"})).unwrap().is_empty());
    }

    #[test]
    fn nested_properties_may_designate_headers_at_any_depth() {
        let designated = designations(&tool(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "a": {"type": "object", "properties": {
                "b": {"type": "string", "x-mcp-header": "B"},
                "c": {"type": "object", "properties": {
                    "d": {"type": "integer", "x-mcp-header": "D"},
                    "e": {"type": "boolean", "x-mcp-header": "E"},
                }},
            }},
        })))
        .unwrap();
        let found: Vec<_> = designated
            .iter()
            .map(|d| (d.path.join("/"), d.header.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("region".to_owned(), "mcp-param-region"),
                ("a/b".to_owned(), "mcp-param-b"),
                ("a/c/d".to_owned(), "mcp-param-d"),
                ("a/c/e".to_owned(), "mcp-param-e"),
            ]
        );
    }

    #[test]
    fn nested_arguments_fill_their_headers() {
        let designated = designations(&tool(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "a": {"type": "object", "properties": {
                "b": {"type": "string", "x-mcp-header": "B"},
                "c": {"type": "object", "properties": {"d": {"type": "integer", "x-mcp-header": "D"}}},
            }},
        })))
        .unwrap();
        let headers = |arguments: Value| {
            let mut found: Vec<_> = headers_for(&designated, &arguments)
                .iter()
                .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
                .collect();
            found.sort();
            found
        };
        assert_eq!(
            headers(json!({"region": "eu", "a": {"b": "x y", "c": {"d": 7}}})),
            ["mcp-param-b=x y", "mcp-param-d=7", "mcp-param-region=eu"]
        );
        // Absent or null anywhere along the path: no header.
        assert_eq!(
            headers(json!({"a": {"b": null, "c": null}})),
            Vec::<String>::new()
        );
        assert_eq!(headers(json!({"a": null})), Vec::<String>::new());
        assert_eq!(
            headers(json!({"a": {"c": {}}, "region": null})),
            Vec::<String>::new()
        );
        // A value where an object should be carries nothing either.
        assert_eq!(
            headers(json!({"a": "flat", "region": "us"})),
            ["mcp-param-region=us"]
        );
    }

    #[test]
    fn invalid_designations_say_why() {
        let cases = [
            (
                json!({"a": {"type": "string", "x-mcp-header": ""}}),
                "empty",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "A B"}}),
                "HTTP token",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "A:B"}}),
                "HTTP token",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "A\tB"}}),
                "HTTP token",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Régión"}}),
                "HTTP token",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": 7}}),
                "not a string",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Dup"},
                       "b": {"type": "integer", "x-mcp-header": "dUP"}}),
                "case-insensitive",
            ),
            (
                json!({"a": {"type": "object", "x-mcp-header": "A"}}),
                "not string, integer or boolean",
            ),
            (
                json!({"a": {"type": "array", "x-mcp-header": "A"}}),
                "not string, integer or boolean",
            ),
            (
                json!({"a": {"type": "null", "x-mcp-header": "A"}}),
                "not string, integer or boolean",
            ),
            (
                json!({"a": {"type": "number", "x-mcp-header": "A"}}),
                "not string, integer or boolean",
            ),
            (json!({"a": {"x-mcp-header": "A"}}), "type is none"),
            (
                json!({"a": {"type": ["string", "null"], "x-mcp-header": "A"}}),
                "not string, integer or boolean",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Dup"},
                       "n": {"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "DUP"}}}}),
                "properties `a` and `n.b` both designate",
            ),
            (
                json!({"n": {"type": "object", "properties": {"b": {"type": "object", "x-mcp-header": "B"}}}}),
                "property `n.b` designates Mcp-Param-B but its type is \"object\"",
            ),
            (
                json!({"n": {"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B C"}}}}),
                "property `n.b` (\"B C\") is not an HTTP token",
            ),
            (
                json!({"a": {"type": "object", "properties": {"b": {"type": "array",
                    "items": {"type": "object", "properties": {"c": {"type": "string", "x-mcp-header": "C"}}}}}}}),
                "inputSchema.properties.a.properties.b.items.properties.c",
            ),
            (
                json!({"a": {"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "B"}}}),
                "inputSchema.properties.a.additionalProperties",
            ),
            (
                json!({"a": {"type": "object", "patternProperties": {"^x": {"type": "string", "x-mcp-header": "B"}}}}),
                "inputSchema.properties.a.patternProperties.^x",
            ),
            (
                json!({"a": {"oneOf": [{"type": "object", "properties": {"b": {"type": "string", "x-mcp-header": "B"}}}]}}),
                "inputSchema.properties.a.oneOf[0].properties.b",
            ),
            (
                json!({"a": {"allOf": [{"type": "string", "x-mcp-header": "B"}]}}),
                "inputSchema.properties.a.allOf[0]",
            ),
            (
                json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "B"}}}),
                "inputSchema.properties.a.items",
            ),
            (
                json!({"a": {"anyOf": [{"type": "string", "x-mcp-header": "B"}]}}),
                "inputSchema.properties.a.anyOf[0]",
            ),
        ];
        for (properties, why) in cases {
            let error = designations(&tool(properties.clone())).unwrap_err();
            assert!(error.contains(why), "{properties}: {error}");
        }
        let top = json!({"name": "t", "inputSchema": {"type": "object", "x-mcp-header": "T"}});
        assert!(designations(&top).unwrap_err().contains("at inputSchema:"));
        let defs = json!({"name": "t", "inputSchema": {"type": "object",
            "$defs": {"r": {"type": "string", "x-mcp-header": "R"}}}});
        assert!(
            designations(&defs)
                .unwrap_err()
                .contains("inputSchema.$defs.r")
        );
    }

    #[test]
    fn arguments_become_header_text() {
        assert_eq!(argument_text(&json!("us-west-1")).unwrap(), "us-west-1");
        assert_eq!(
            argument_text(&json!("us west 1 ")).unwrap(),
            "=?base64?dXMgd2VzdCAxIA==?="
        );
        assert_eq!(argument_text(&json!("")).unwrap(), "");
        assert_eq!(argument_text(&json!(42)).unwrap(), "42");
        assert_eq!(argument_text(&json!(-7)).unwrap(), "-7");
        assert_eq!(argument_text(&json!(42.0)).unwrap(), "42");
        assert_eq!(argument_text(&json!(true)).unwrap(), "true");
        assert_eq!(argument_text(&json!(false)).unwrap(), "false");
        assert_eq!(argument_text(&json!(1.5)), None);
        assert_eq!(argument_text(&json!(1e300)), None);
        assert_eq!(argument_text(&Value::Null), None);
        assert_eq!(argument_text(&json!([1])), None);
        assert_eq!(argument_text(&json!({"a": 1})), None);
    }
}
