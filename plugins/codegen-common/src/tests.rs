#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::{
    names::{assign, clean, pascal},
    plan::plan,
    render::{DeclNames, Style},
    schema::convert,
    text::{Comment, comment_line, json_text, string_literal},
    types::{Role, Ty},
};

#[test]
fn valid_identifiers_keep_their_names() {
    assert_eq!(
        assign(&["listRepos", "list_repos", "$x", "_"]),
        ["listRepos", "list_repos", "$x", "_"]
    );
}

#[test]
fn invalid_names_are_cleaned() {
    assert_eq!(clean("list-repos"), "list_repos");
    assert_eq!(clean("a.b c"), "a_b_c");
    assert_eq!(clean("123start"), "_123start");
    assert_eq!(clean("class"), "class_");
    assert_eq!(clean("await"), "await_");
    assert_eq!(clean("then"), "then_");
    assert_eq!(clean("index"), "index_");
    assert_eq!(clean("callTool"), "callTool_");
    assert_eq!(clean(""), "_");
    assert_eq!(clean("café"), "caf_");
    assert_eq!(clean("a\u{202e}b"), "a_b");
}

#[test]
fn collisions_are_told_apart_whatever_the_order() {
    let names = ["get.user", "get_user", "get-user", "get user", "get_user_2"];
    let ids = assign(&names);
    // `get_user` and `get_user_2` are valid and keep their names; the rest, in sorted order
    // ("get user" < "get-user" < "get.user"), take the next free suffix.
    assert_eq!(
        ids,
        [
            "get_user_5",
            "get_user",
            "get_user_4",
            "get_user_3",
            "get_user_2"
        ]
    );
    let mut reversed = names;
    reversed.reverse();
    let mut again = assign(&reversed);
    again.reverse();
    assert_eq!(again, ids);
}

#[test]
fn pascal_case_never_starts_with_a_digit() {
    assert_eq!(pascal("list_repos"), "ListRepos");
    assert_eq!(pascal("listRepos"), "ListRepos");
    assert_eq!(pascal("_2fa"), "_2fa");
    assert_eq!(pascal("$"), "Type");
}

#[test]
fn string_literals_are_ascii_json() {
    let nasty = "a\"b\\c\nd\u{2028}e\u{202e}f\u{0}g😀</script>${x}`";
    let literal = string_literal(nasty);
    assert!(literal.is_ascii(), "{literal}");
    assert_eq!(serde_json::from_str::<String>(&literal).unwrap(), nasty);
    assert!(
        literal.contains("\\u2028")
            && literal.contains("\\u202e")
            && literal.contains("\\ud83d\\ude00")
    );
}

#[test]
fn comment_text_cannot_close_the_comment() {
    assert_eq!(comment_line("a */ b"), "a *\\/ b");
    assert_eq!(comment_line("**/"), "**\\/");
    assert_eq!(
        comment_line("x\u{202e}y\u{0}z\u{1b}"),
        "x\\u202ey\\u0000z\\u001b"
    );
    let mut comment = Comment::new();
    comment.text("first\r\nsecond\u{2028}*/third\u{2029}\n\n\nlast*");
    let mut out = String::new();
    comment.write(&mut out, 2);
    assert_eq!(
        out,
        "  /**\n   * first\n   * second\n   * *\\/third\n   *\n   * last*\n   */\n"
    );
}

#[test]
fn json_text_is_sorted_ascii_and_capped() {
    assert_eq!(
        json_text(&json!({"b": 1, "a": "é"}), 100),
        "{\"a\": \"\\u00e9\", \"b\": 1}"
    );
    let long = json_text(&json!(["x".repeat(500)]), 50);
    assert_eq!(long.chars().count(), 50);
    assert!(long.ends_with('…'));
}

fn render(schema: Value) -> String {
    let converted = convert(Role::Args, &schema).unwrap();
    let names = DeclNames {
        roots: ["A".into(), "R".into()],
        defs: [vec!["D0".into(), "D1".into()], vec![]],
    };
    Style {
        names: &names,
        generic_arrays: false,
        block: None,
    }
    .render(&converted.ty)
}

#[test]
fn schemas_become_types() {
    assert_eq!(render(json!({"type": ["string", "null"]})), "string | null");
    assert_eq!(
        render(json!({"type": "string", "nullable": true})),
        "string | null"
    );
    assert_eq!(
        render(json!({"enum": ["a", 1, null, true]})),
        "\"a\" | 1 | null | true"
    );
    assert_eq!(
        render(json!({"const": {"b": [1], "a": "x"}})),
        "{ a: \"x\"; b: [1] }"
    );
    assert_eq!(
        render(
            json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}})
        ),
        "(string | number)[]"
    );
    assert_eq!(
        render(
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "minItems": 1, "items": {"type": "boolean"}})
        ),
        "[string, number?, ...boolean[]]"
    );
    assert_eq!(
        render(json!({"type": "array", "items": [{"type": "string"}], "additionalItems": false})),
        "[string]"
    );
    assert_eq!(
        render(
            json!({"allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"anyOf": [{"type": "object"}, {"type": "null"}]}]})
        ),
        "{ a: string } & ({} | null)"
    );
    assert_eq!(
        render(
            json!({"type": "object", "properties": {"b": {"type": "string"}, "a-b": {}}, "required": ["b"], "additionalProperties": {"type": "number"}})
        ),
        "{ b: string; \"a-b\"?: unknown; [key: string]: unknown }"
    );
    assert_eq!(
        render(
            json!({"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": {"type": "number"}})
        ),
        "{ b?: string; [key: string]: number | string | undefined }"
    );
    assert_eq!(render(json!(true)), "unknown");
    assert_eq!(render(json!(false)), "never");
    assert_eq!(render(json!({"enum": []})), "never");
    assert_eq!(
        render(json!({"properties": {"next": {"$ref": "#"}}})),
        "{ next?: A }"
    );
    // A root that is only itself means nothing.
    assert_eq!(render(json!({"$ref": "#"})), "unknown");
}

#[test]
fn required_properties_come_first_in_their_order_then_the_rest_sorted() {
    let rendered = render(json!({"type": "object", "properties": {
        "z": {}, "b": {}, "a": {}, "y": {}
    }, "required": ["y", "b", "missing"]}));
    assert_eq!(
        rendered,
        "{ y: unknown; b: unknown; missing: unknown; a?: unknown; z?: unknown }"
    );
}

#[test]
fn refs_become_named_types_and_recursion_is_fine() {
    let schema = json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
        "next": {"$ref": "#/$defs/Node"}, "other": {"$ref": "#/definitions/X"}}}},
        "definitions": {"X": {"type": "string"}}});
    let converted = convert(Role::Args, &schema).unwrap();
    assert_eq!(converted.defs.len(), 2);
    assert_eq!(converted.defs[0].pointer, "/$defs/Node");
    assert_eq!(converted.defs[1].base, "X");
    assert!(matches!(converted.ty, Ty::Ref(_)));
}

#[test]
fn alias_cycles_become_unknown() {
    let schema = json!({"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
        "A": {"$ref": "#/$defs/B"}, "B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}});
    let converted = convert(Role::Args, &schema).unwrap();
    assert!(
        converted.defs.iter().all(|d| d.ty == Ty::Unknown),
        "{:?}",
        converted.defs
    );
}

#[test]
fn unresolvable_refs_are_unconvertible() {
    for (reference, why) in [
        ("https://example.com/x.json", "points outside the schema"),
        ("other.json#/a", "points outside the schema"),
        ("#/$defs/Nope", "points at nothing"),
        ("#anchor", "names an anchor"),
    ] {
        let error = convert(
            Role::Args,
            &json!({"properties": {"x": {"$ref": reference}}}),
        )
        .unwrap_err();
        assert!(error.0.contains(why), "{reference}: {}", error.0);
    }
    // The schema's own `$id` is local.
    let schema = json!({"$id": "https://x/s.json", "properties": {"x": {"$ref": "https://x/s.json#/$defs/A"}}, "$defs": {"A": {}}});
    assert!(convert(Role::Args, &schema).is_ok());
}

#[test]
fn deep_schemas_stop_at_the_depth_cap() {
    let mut schema = json!({"type": "string"});
    for _ in 0..60 {
        schema = json!({"type": "object", "properties": {"a": schema}, "required": ["a"]});
    }
    let converted = convert(Role::Args, &schema).unwrap();
    assert_eq!(converted.notes.len(), 1, "{:?}", converted.notes);
    assert!(converted.notes[0].contains("deeper than 32"));
    assert_eq!(render(schema).matches("a: ").count(), 32);
}

#[test]
fn an_unconvertible_tool_does_not_touch_its_neighbours() {
    let tools = json!([
        {"name": "bad", "inputSchema": {"properties": {"x": {"$ref": "https://e.com/x"}}}},
        {"name": "good", "inputSchema": {"properties": {"x": {"type": "string"}}, "required": ["x"]}}
    ]);
    let plan = plan("srv", "srv", tools.as_array().unwrap());
    assert_eq!(plan.warnings.len(), 1);
    assert!(
        plan.warnings[0]
            .starts_with("server \"srv\", tool \"bad\": inputSchema cannot be converted"),
        "{}",
        plan.warnings[0]
    );
    assert_eq!(
        plan.tools[0].signature(),
        "bad(args?: Record<string, unknown>): Promise<unknown>"
    );
    assert_eq!(
        plan.tools[1].signature(),
        "good(args: { x: string }): Promise<unknown>"
    );
}

#[test]
fn type_names_do_not_collide_across_tools() {
    let tools = json!([
        {"name": "getUrl", "inputSchema": {}}, {"name": "get_url", "inputSchema": {}},
        {"name": "FooArgs", "inputSchema": {}},
        {"name": "foo", "inputSchema": {"properties": {"a": {"$ref": "#/$defs/Args"}}, "$defs": {"Args": {}}}}
    ]);
    let plan = plan("s", "s", tools.as_array().unwrap());
    let roots: Vec<[String; 2]> = plan.tools.iter().map(|t| t.names.roots.clone()).collect();
    assert_eq!(roots[0], ["GetUrlArgs", "GetUrlResult"]);
    assert_eq!(roots[1], ["GetUrl_2Args", "GetUrl_2Result"]);
    assert_eq!(roots[2], ["FooArgsArgs", "FooArgsResult"]);
    // `FooArgs` is the function of the tool above, so `foo` takes the next prefix.
    assert_eq!(roots[3], ["Foo_2Args", "Foo_2Result"]);
    assert_eq!(plan.tools[3].names.defs[0], ["Foo_2Args_2"]);
}

#[test]
fn signatures_are_capped() {
    let properties: serde_json::Map<String, Value> = (0..50)
        .map(|i| (format!("property{i}"), json!({"type": "string"})))
        .collect();
    let tools =
        json!([{"name": "wide", "inputSchema": {"type": "object", "properties": properties}}]);
    let plan = plan("s", "s", tools.as_array().unwrap());
    let signature = plan.tools[0].signature();
    assert_eq!(signature.chars().count(), 200);
    assert!(signature.ends_with('…'));
}

#[test]
fn the_configuration_must_be_an_empty_table() {
    assert!(crate::open_config("typescript", "{}").is_ok());
    let error = crate::open_config("typescript", r#"{"indent": 4}"#).unwrap_err();
    assert!(error.contains("\"indent\""), "{error}");
    assert!(crate::open_config("typescript", "[]").is_err());
}

struct Plain;

impl crate::Dialect for Plain {
    const EXTENSION: &'static str = "txt";
    fn tool_module(_: &crate::plan::ServerPlan, tool: &crate::plan::ToolPlan) -> String {
        tool.identifier.clone()
    }
}

#[test]
fn malformed_requests_are_refused_by_what_is_wrong() {
    let error = crate::generate::<Plain>("not json").unwrap_err();
    assert!(
        error.starts_with("the codegen request is malformed"),
        "{error}"
    );
    let error = crate::generate::<Plain>(r#"{"kind": "other"}"#).unwrap_err();
    assert!(error.contains("other"), "{error}");
    let error = crate::generate::<Plain>(
        r#"{"kind": "server", "server": "s", "folder": "../etc", "tools": []}"#,
    )
    .unwrap_err();
    assert!(error.contains("\"../etc\""), "{error}");
    let error = crate::generate::<Plain>(r#"{"kind": "root", "servers": [{"name": "a", "folder": "a"}, {"name": "a", "folder": "b"}]}"#)
        .unwrap_err();
    assert!(error.contains("twice"), "{error}");
}

#[test]
fn an_empty_server_still_has_an_index() {
    let response =
        crate::respond::<Plain>(r#"{"kind": "server", "server": "s", "folder": "s", "tools": []}"#)
            .unwrap();
    assert_eq!(response.files.len(), 1);
    assert_eq!(response.files[0].path, "s/index.txt");
    assert_eq!(response.files[0].content, "export {};\n");
}
