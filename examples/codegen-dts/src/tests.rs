#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use runbyte_plugin_api::codegen::Codegen;
use serde_json::{Value, json};

use crate::Dts;

fn generate(request: &Value) -> Value {
    let out = Dts.generate(&request.to_string()).unwrap();
    serde_json::from_str(&out).unwrap()
}

fn server(tools: Value) -> Value {
    generate(&json!({"kind": "server", "server": "demo", "folder": "demo", "tools": tools}))
}

fn demo_tools() -> Value {
    serde_json::from_str(include_str!("fixtures/demo.json")).unwrap()
}

fn file<'a>(response: &'a Value, path: &str) -> &'a str {
    response["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("no file {path}"))["content"]
        .as_str()
        .unwrap()
}

fn tool_with_name(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}})
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The code of a module with its comments and string literals taken out (each literal becomes
/// `""`), so that what is left can be checked for anything injected. Panics on a comment or a
/// string that does not end, or a raw line break inside a string.
fn code_only(source: &str) -> String {
    let mut out = String::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                loop {
                    let c = chars.next().expect("an unterminated comment");
                    if previous == '*' && c == '/' {
                        break;
                    }
                    previous = c;
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                out.push('\n');
            }
            '"' => {
                loop {
                    match chars.next().expect("an unterminated string") {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' | '\r' | '\u{2028}' | '\u{2029}' => panic!("a line break in a string"),
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// What every generated module must satisfy, whatever the input.
fn check_module(content: &str) {
    for c in content.chars() {
        assert!(
            c == '\n'
                || !(c.is_control()
                    || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')),
            "raw {c:?} in {content}"
        );
    }
    let code = code_only(content);
    assert!(!code.contains('`') && !code.contains("${"), "{code}");
    assert!(code.is_ascii(), "non-ASCII outside comments: {code}");
}

#[test]
fn the_demo_server_gives_one_module_per_tool_and_an_index() {
    let tools = demo_tools();
    let response = server(tools.clone());
    let files = response["files"].as_array().unwrap();
    let entries = response["tools"].as_array().unwrap();
    assert_eq!(files.len(), tools.as_array().unwrap().len() + 1);
    assert_eq!(entries.len(), tools.as_array().unwrap().len());
    assert_eq!(response["warnings"], json!([]));
    for file in files {
        assert!(file["path"].as_str().unwrap().starts_with("demo/"));
        check_module(file["content"].as_str().unwrap());
    }
    // The entries follow the server's order and point at real files.
    for (entry, tool) in entries.iter().zip(tools.as_array().unwrap()) {
        assert_eq!(entry["name"], tool["name"]);
        let ident = entry["identifier"].as_str().unwrap();
        assert!(is_identifier(ident), "{ident}");
        assert_eq!(entry["path"], format!("demo/{ident}.ts"));
        let content = file(&response, entry["path"].as_str().unwrap());
        assert!(content.contains(&format!("export async function {ident}(args")));
        assert!(
            entry["signature"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{ident}(args"))
        );
        assert!(!entry["signature"].as_str().unwrap().contains('\n'));
    }
    assert_eq!(
        file(&response, "demo/add_numbers.ts"),
        r#"import { callTool } from "runbyte:bridge";

/**
 * Add numbers
 *
 * Add two numbers. The name is not a JavaScript identifier on purpose.
 *
 * Hints: read-only, idempotent, closed-world.
 * Calls tool "add-numbers" of server "demo".
 */
export async function add_numbers(args: {
  a: number;
  b: number;
}): Promise<unknown> {
  return callTool("demo", "add-numbers", args);
}
"#
    );
    let entry = entries.iter().find(|e| e["name"] == "add-numbers").unwrap();
    assert_eq!(
        entry["signature"],
        "add_numbers(args: { a: number; b: number }): Promise<unknown>"
    );
    let index = file(&response, "demo/index.ts");
    assert!(
        index.starts_with("export * from \"./add_numbers\";\nexport * from \"./close_issue\";\n"),
        "{index}"
    );
    assert_eq!(index.lines().count(), entries.len());
}

#[test]
fn an_output_schema_types_the_result_with_refs_expanded() {
    let response = server(demo_tools());
    let search = file(&response, "demo/search_issues.ts");
    assert!(
        search.contains("}): Promise<{\n  issues: {\n    author: {"),
        "{search}"
    );
    assert!(
        search.contains("  return (await callTool(\"demo\", \"search_issues\", args)) as never;"),
        "{search}"
    );
    assert!(
        search.contains(
            "  /**\n   * Which issues to include.\n   * @default \"open\"\n   */\n  state?:"
        ),
        "{search}"
    );
    let entry = &response["tools"][0];
    assert_eq!(entry["name"], "search_issues");
    assert!(
        entry["signature"]
            .as_str()
            .unwrap()
            .ends_with("total: number }>"),
        "{entry}"
    );
}

#[test]
fn output_is_deterministic_and_independent_of_key_order() {
    let request =
        json!({"kind": "server", "server": "demo", "folder": "demo", "tools": demo_tools()});
    let first = Dts.generate(&request.to_string()).unwrap();
    assert_eq!(first, Dts.generate(&request.to_string()).unwrap());
    // The same tool written with its keys in two orders.
    let a = r#"{"kind":"server","server":"s","folder":"s","tools":[{"name":"t","inputSchema":{"type":"object","required":["b","a"],"properties":{"b":{"type":"string"},"a":{"type":"number"}}}}]}"#;
    let b = r#"{"tools":[{"inputSchema":{"properties":{"a":{"type":"number"},"b":{"type":"string"}},"required":["a","b"],"type":"object"},"name":"t"}],"folder":"s","server":"s","kind":"server"}"#;
    assert_eq!(Dts.generate(a).unwrap(), Dts.generate(b).unwrap());
}

#[test]
fn hostile_tool_names_become_distinct_valid_identifiers() {
    let names = [
        "list_repos",
        "list-repos",
        "list.repos",
        "list repos",
        "list_repos_2",
        "123start",
        "9",
        "class",
        "await",
        "default",
        "then",
        "index",
        "callTool",
        "eval",
        "constructor",
        "__proto__",
        "$",
        "_",
        "",
        "名前",
        "a\u{202e}b",
        "x\ny",
        "nul\0byte",
        "foo*/bar",
        "\"quoted\"",
        "back\\slash",
        "${inject}",
        "`tick`",
        "line\u{2028}sep",
        "list_repos",
    ];
    let tools: Vec<Value> = names.iter().map(|n| tool_with_name(n)).collect();
    let response = server(json!(tools));
    let entries = response["tools"].as_array().unwrap();
    assert_eq!(entries.len(), names.len());
    let idents: Vec<&str> = entries
        .iter()
        .map(|e| e["identifier"].as_str().unwrap())
        .collect();
    let distinct: BTreeSet<&str> = idents.iter().copied().collect();
    assert_eq!(distinct.len(), idents.len(), "{idents:?}");
    for (entry, name) in entries.iter().zip(names) {
        assert_eq!(entry["name"], name);
        let ident = entry["identifier"].as_str().unwrap();
        assert!(is_identifier(ident), "{ident:?}");
        let content = file(&response, entry["path"].as_str().unwrap());
        check_module(content);
        // The original name is what is sent downstream. The literals are JSON-compatible
        // (`\"`, `\\`, `\uXXXX` only), so JSON can read them back.
        let call = content.split("callTool(").nth(1).unwrap();
        let literals = call.split(", args)").next().unwrap();
        let sent: Vec<String> = serde_json::from_str(&format!("[{literals}]")).unwrap();
        assert_eq!(sent, ["demo", name]);
    }
    // Names that already are identifiers keep them, wherever they stand.
    assert_eq!(idents[0], "list_repos");
    assert_eq!(idents[4], "list_repos_2");
    assert_eq!(
        &idents[1..4],
        ["list_repos_3", "list_repos_4", "list_repos_5"]
    );
    assert_eq!(idents[29], "list_repos_6");
    assert_eq!(&idents[5..7], ["_123start", "_9"]);
    for (name, ident) in [
        ("class", "class_"),
        ("then", "then_"),
        ("index", "index_"),
        ("callTool", "callTool_"),
        ("_", "_"),
        ("", "__2"),
    ] {
        let position = names.iter().position(|n| *n == name).unwrap();
        assert_eq!(idents[position], ident);
    }
    // No tool file can take the place of the index.
    let paths: Vec<&str> = response["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.iter().filter(|p| **p == "demo/index.ts").count(), 1);
    // The tool whose name would close a comment is called by its exact name, escaped.
    let content = file(&response, "demo/foo__bar.ts");
    assert!(
        content.contains(r#"callTool("demo", "foo*/bar", args)"#),
        "{content}"
    );
    let content = file(&response, "demo/a_b.ts");
    assert!(content.contains(r#""a\u202eb""#), "{content}");
}

#[test]
fn hostile_descriptions_stay_inside_their_comments() {
    let hostile = "Ends here */ export const pwned = 1; /* `${process.exit()}` \u{202e}evil\u{202c} \
                   line\u{2028}break\rcr\u{0}nul\u{7}bell </script> \\ \"";
    let tools = json!([{
        "name": "t",
        "title": "Title */ with close",
        "description": hostile,
        "inputSchema": {"type": "object", "properties": {
            "p */ q": {"type": "string", "description": hostile, "default": "*/", "format": "x*/y"},
            "ok": {"type": "string", "enum": ["a\"b", "c\\d", "e\nf", "`${x}`"]},
        }},
    }]);
    let response = server(tools);
    let content = file(&response, "demo/t.ts");
    check_module(content);
    assert!(!content.contains("*/ export const pwned"), "{content}");
    assert!(
        content.contains("Ends here *\\/ export const pwned = 1;"),
        "{content}"
    );
    assert!(content.contains("\\u202eevil\\u202c"), "{content}");
    assert!(
        content.contains(r#"ok?: "a\"b" | "c\\d" | "e\u000af" | "`${x}`";"#),
        "{content}"
    );
    assert!(content.contains(r#""p */ q"?: string;"#), "{content}");
    // The code outside comments and strings is exactly the skeleton.
    let code = code_only(content);
    let skeleton: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        skeleton,
        "import { callTool } from \"\"; export async function t(args: { ok?: \"\" | \"\" | \"\" | \"\"; \"\"?: string; } = {}): Promise<unknown> { return callTool(\"\", \"\", args); }"
    );
}

#[test]
fn schemas_become_inline_types() {
    let cases = [
        (json!({"type": "string"}), "string"),
        (json!({"type": "integer"}), "number"),
        (json!({"type": ["string", "null"]}), "string | null"),
        (json!({"type": "string", "nullable": true}), "string | null"),
        (json!({"const": 3}), "3"),
        (
            json!({"enum": [1, "a", true, null]}),
            "1 | \"a\" | true | null",
        ),
        (json!({"enum": []}), "never"),
        (json!(true), "unknown"),
        (json!(false), "never"),
        (json!({}), "unknown"),
        (json!({"type": "array"}), "unknown[]"),
        (
            json!({"type": "array", "items": {"type": "number"}}),
            "number[]",
        ),
        (
            json!({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "string"}]}}),
            "Array<number | string>",
        ),
        (
            json!({"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}]}),
            "[number, string]",
        ),
        (
            json!({"type": "array", "items": [{"type": "boolean"}]}),
            "[boolean]",
        ),
        (
            json!({"anyOf": [{"type": "string"}, {"allOf": [{"type": "object"}, {"type": "object", "properties": {"a": {"type": "string"}}}]}]}),
            "string | { [key: string]: unknown } & { a?: string }",
        ),
        (
            json!({"allOf": [{"oneOf": [{"const": 1}, {"const": 2}]}, {"type": "number"}]}),
            "(1 | 2) & number",
        ),
        (json!({"type": "object"}), "{ [key: string]: unknown }"),
        (
            json!({"type": "object", "additionalProperties": false}),
            "{ [key: string]: never }",
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "number"}}),
            "{ [key: string]: number }",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": {"type": "string"}}),
            "{ a?: number; [key: string]: unknown }",
        ),
        (
            json!({"type": "object", "properties": {"a-b": {"type": "number"}, "c": {"type": "string"}}, "required": ["c", "zzz"]}),
            "{ \"a-b\"?: number; c: string }",
        ),
        (
            json!({"properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"enum": ["p", "q"]}}}),
            "{ x?: \"p\" | \"q\" }",
        ),
        (
            json!({"properties": {"x": {"$ref": "#/definitions/a~1b"}}, "definitions": {"a/b": {"type": "number", "nullable": true}}}),
            "{ x?: number | null }",
        ),
        (
            json!({"properties": {"x": {"$ref": "#/$defs/a%20b"}}, "$defs": {"a b": {"type": "boolean"}}}),
            "{ x?: boolean }",
        ),
    ];
    for (schema, expected) in cases {
        let mut render = crate::types::Render::new(&schema, false);
        assert_eq!(render.render(&schema), expected, "{schema}");
        assert!(
            render.warnings.is_empty(),
            "{schema}: {:?}",
            render.warnings
        );
    }
}

#[test]
fn what_cannot_be_typed_degrades_with_a_warning_and_spares_the_other_tools() {
    let tools = json!([
        {"name": "no_schema"},
        {"name": "a_string", "inputSchema": {"type": "string"}},
        {"description": "no name"},
        {"name": "missing_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}},
        {"name": "tree", "inputSchema": {"type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}}},
        {"name": "fine", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    ]);
    let response = server(tools);
    let warnings: Vec<&str> = response["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "tool #2 has no name and was left out",
            "tool \"no_schema\": it has no inputSchema; its arguments are untyped",
            "tool \"a_string\": its inputSchema does not describe an object (it reads `string`); its arguments are untyped",
            "tool \"missing_ref\": $ref \"#/$defs/Nope\" is not found in the schema; typed unknown",
            "tool \"tree\": $ref \"#/$defs/Node\" is recursive; typed unknown where it recurs",
        ]
    );
    assert_eq!(response["tools"].as_array().unwrap().len(), 5);
    let signature = |name: &str| {
        response["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()["signature"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        signature("no_schema"),
        "no_schema(args?: { [key: string]: unknown }): Promise<unknown>"
    );
    assert_eq!(
        signature("a_string"),
        "a_string(args?: { [key: string]: unknown }): Promise<unknown>"
    );
    assert_eq!(
        signature("tree"),
        "tree(args?: { root?: { children?: unknown[] } }): Promise<unknown>"
    );
    assert_eq!(
        signature("fine"),
        "fine(args: { id: string }): Promise<unknown>"
    );
    assert!(
        file(&response, "demo/no_schema.ts").contains("(args: { [key: string]: unknown } = {})")
    );
}

#[test]
fn refs_that_fan_out_are_cut_off_by_a_budget() {
    // Each level refers to the next twice: 2^20 nodes if expanded in full.
    let mut defs = serde_json::Map::new();
    for level in 0..20 {
        defs.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": {
                "a": {"$ref": format!("#/$defs/L{}", level + 1)},
                "b": {"$ref": format!("#/$defs/L{}", level + 1)},
            }}),
        );
    }
    defs.insert("L20".into(), json!({"type": "string"}));
    let schema =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "$defs": defs});
    let response = server(json!([{"name": "big", "inputSchema": schema}]));
    let content = file(&response, "demo/big.ts");
    assert!(content.len() < 400_000, "{} bytes", content.len());
    check_module(content);
    let warnings = response["warnings"].to_string();
    assert!(warnings.contains("too large to type in full"), "{warnings}");
}

#[test]
fn the_root_index_exports_each_server_as_a_namespace() {
    let response = generate(&json!({"kind": "root", "servers": [
        {"name": "github", "folder": "github"},
        {"name": "a-b", "folder": "a-b"},
        {"name": "a.b", "folder": "a.b"},
        {"name": "then", "folder": "then"},
        {"name": "2fa", "folder": "2fa"},
        {"name": "evil\"/*", "folder": "evil___"},
    ]}));
    assert_eq!(response["tools"], json!([]));
    assert_eq!(response["files"].as_array().unwrap().len(), 1);
    assert_eq!(response["files"][0]["path"], "index.ts");
    let content = response["files"][0]["content"].as_str().unwrap();
    check_module(content);
    assert_eq!(
        content,
        "export * as _2fa from \"./2fa/index\";\n\
         export * as a_b from \"./a-b/index\";\n\
         export * as a_b_2 from \"./a.b/index\";\n\
         export * as evil___ from \"./evil___/index\";\n\
         export * as github from \"./github/index\";\n\
         export * as then_ from \"./then/index\";\n"
    );
    let empty = generate(&json!({"kind": "root", "servers": []}));
    assert_eq!(empty["files"][0]["content"], "export {};\n");
    let empty = server(json!([]));
    assert_eq!(file(&empty, "demo/index.ts"), "export {};\n");
}

#[test]
fn bad_requests_and_configuration_are_refused_by_name() {
    assert!(Dts::open("{}").is_ok());
    let error = Dts::open(r#"{"style": "x"}"#).unwrap_err();
    assert!(
        error.starts_with("[codegen.dts]") && error.contains("unknown field `style`"),
        "{error}"
    );
    let error = Dts.generate(r#"{"kind": "everything"}"#).unwrap_err();
    assert!(error.contains("unknown variant `everything`"), "{error}");
    let error = Dts
        .generate(r#"{"kind": "server", "server": "s", "tools": []}"#)
        .unwrap_err();
    assert!(error.contains("missing field `folder`"), "{error}");
    for folder in ["", "..", "a/b"] {
        let request = json!({"kind": "server", "server": "s", "folder": folder, "tools": []});
        let error = Dts.generate(&request.to_string()).unwrap_err();
        assert!(error.starts_with("bad folder"), "{error}");
    }
}

#[test]
fn every_response_names_the_extension_of_its_modules() {
    let root = generate(&json!({"kind": "root", "servers": [{"name": "demo", "folder": "demo"}]}));
    assert_eq!(root["extension"], "ts");
    assert_eq!(server(demo_tools())["extension"], "ts");
}
