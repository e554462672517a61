//! The tools that modes add: odd names, many tools, hostile metadata, complex schemas.
//! They have no behaviour of their own; a call answers with their name and arguments.

use rmcp::model::Tool;
use serde_json::json;

use super::{no_arguments, schema};

pub(super) fn odd_name_tool(name: &str) -> Tool {
    Tool::new(
        name.to_owned(),
        format!("A tool whose name, {name:?}, is not a plain identifier."),
        schema(json!({"type": "object", "properties": {"value": {"type": "string"}}})),
    )
}

/// Five shapes that real servers' tools take, cycled through by number.
pub(super) fn many_tool(i: usize) -> Tool {
    let name = format!("tool_{i:04}");
    let (description, input) = match i % 5 {
        0 => (
            "Searches records by a free-text query.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Free-text query."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                    "filters": {
                        "type": "object",
                        "properties": {
                            "language": {"type": "string", "enum": ["en", "de", "fr", "ja"]},
                            "archived": {"type": "boolean"}
                        }
                    }
                },
                "required": ["query"]
            }),
        ),
        1 => (
            "Creates a task with a title, tags and a priority.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "priority": {"type": "string", "enum": ["low", "medium", "high"]},
                    "due": {"type": "string", "format": "date-time"}
                },
                "required": ["title"]
            }),
        ),
        2 => (
            "Fetches one record by its id.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "pattern": "^[a-z0-9-]+$"}},
                "required": ["id"]
            }),
        ),
        3 => (
            "Updates a record with a partial patch.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "patch": {"type": "object", "additionalProperties": true},
                    "dryRun": {"type": "boolean", "default": false}
                },
                "required": ["id", "patch"]
            }),
        ),
        _ => (
            "Reports the service status.",
            json!({"type": "object", "properties": {}}),
        ),
    };
    Tool::new(
        name,
        format!("Synthetic tool {i}. {description}"),
        schema(input),
    )
}

pub(super) fn hostile_tools() -> Vec<Tool> {
    let evil_text = "Ends a comment */ then /* opens one; `backticks` ${process.exit(1)} \
                     </script> \u{0000}\u{0007}\u{001b}[31m \u{202e}reversed\u{202c} \
                     line\u{2028}separator \\ \"quotes\" 'single'";
    vec![
        Tool::new(
            "evil_description",
            evil_text,
            schema(json!({
                "type": "object",
                "description": evil_text,
                "properties": {
                    "first-name": {"type": "string", "description": "*/ alert(1) /*"},
                    "with space": {"type": "string"},
                    "2nd": {"type": "integer"},
                    "class": {"type": "string"},
                    "__proto__": {"type": "object"},
                    "constructor": {"type": "string"},
                    "a\"quote": {"type": "string"},
                    "tick`": {"type": "string", "default": "${x}`"},
                    "mode": {"type": "string", "enum": ["a\"b", "`c`", "${d}", "*/"]}
                },
                "required": ["first-name"]
            })),
        )
        .with_title("Evil */ title ${x}"),
        Tool::new(
            "constructor",
            "A tool named like an Object.prototype member.",
            no_arguments(),
        ),
        Tool::new("__proto__", "A tool named __proto__.", no_arguments()),
        Tool::new("toString", "A tool named toString.", no_arguments()),
        Tool::new("", "A tool with an empty name.", no_arguments()),
        Tool::new_with_raw("no_description", None, no_arguments()),
        Tool::new(
            "long_description",
            "A very long description. ".repeat(400),
            no_arguments(),
        ),
    ]
}

pub(super) fn complex_schema_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "schema_nested",
            "Nested objects, arrays of objects and tuples.",
            schema(json!({
                "type": "object",
                "properties": {
                    "user": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "address": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                                "required": ["city"]
                            }
                        },
                        "required": ["name"]
                    },
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}
                        }
                    },
                    "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                              "minItems": 2, "maxItems": 2},
                    "legacyTuple": {"type": "array", "items": [{"type": "string"}, {"type": "boolean"}]},
                    "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
                },
                "required": ["user"]
            })),
        ),
        Tool::new(
            "schema_unions",
            "enum, const, anyOf, oneOf, type arrays and nullable.",
            schema(json!({
                "type": "object",
                "properties": {
                    "color": {"enum": ["red", "green", 3, null, true]},
                    "kind": {"const": "fixed"},
                    "idOrName": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "shape": {"oneOf": [
                        {"type": "object", "properties": {"circle": {"type": "number"}}, "required": ["circle"]},
                        {"type": "object", "properties": {"square": {"type": "number"}}, "required": ["square"]}
                    ]},
                    "maybe": {"type": ["string", "null"]},
                    "old": {"type": "string", "nullable": true}
                }
            })),
        ),
        Tool::new(
            "schema_allof",
            "allOf merging two object schemas.",
            schema(json!({
                "type": "object",
                "properties": {
                    "entity": {"allOf": [
                        {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                        {"type": "object", "properties": {"createdAt": {"type": "string", "format": "date-time"}}}
                    ]}
                }
            })),
        ),
        Tool::new(
            "schema_refs",
            "$defs and $ref, including a recursive tree.",
            schema(json!({
                "type": "object",
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {
                            "label": {"type": "string"},
                            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                        },
                        "required": ["label"]
                    },
                    "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}
                },
                "properties": {
                    "tree": {"$ref": "#/$defs/node"},
                    "origin": {"$ref": "#/$defs/point"}
                },
                "required": ["tree"]
            })),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "definitions": {"count": {"type": "integer"}},
            "properties": {"nodes": {"$ref": "#/definitions/count"}}
        }))),
        Tool::new(
            "schema_maps",
            "additionalProperties and boolean schemas.",
            schema(json!({
                "type": "object",
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "anything": true,
                    "nothing": false,
                    "strict": {"type": "object", "properties": {"a": {"type": "string"}},
                               "additionalProperties": false}
                },
                "additionalProperties": {"type": "number"}
            })),
        ),
        Tool::new(
            "schema_formats",
            "Formats and bounds that belong in doc comments.",
            schema(json!({
                "type": "object",
                "properties": {
                    "when": {"type": "string", "format": "date-time"},
                    "email": {"type": "string", "format": "email"},
                    "site": {"type": "string", "format": "uri"},
                    "id": {"type": "string", "format": "uuid"},
                    "age": {"type": "integer", "minimum": 0, "maximum": 150},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$"}
                }
            })),
        ),
        Tool::new(
            "schema_unconvertible",
            "A schema that cannot be converted: a dangling $ref and an unknown type.",
            schema(json!({
                "type": "object",
                "properties": {
                    "lost": {"$ref": "#/$defs/missing"},
                    "weird": {"type": "wat"},
                    "bad": {"items": 5}
                }
            })),
        ),
    ]
}
