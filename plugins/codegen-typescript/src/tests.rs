#![allow(clippy::unwrap_used)]

#[path = "../../codegen-common/testing/invariants.rs"]
mod invariants;

use runbyte_plugin_api::codegen::Codegen;

use super::TypeScript;

fn generate(request: &str) -> Result<String, String> {
    TypeScript.generate(request)
}

#[test]
fn every_fixture_keeps_the_invariants_and_matches_its_snapshot() {
    for fixture in invariants::fixtures() {
        let response = invariants::check_fixture(&fixture, true, &generate);
        insta::assert_snapshot!(fixture.name.clone(), invariants::snapshot_text(&response));
    }
}

#[test]
fn the_invariants_notice_broken_output() {
    invariants::mutations_are_caught(true, &generate);
}

#[test]
fn the_plugin_takes_no_configuration() {
    assert!(TypeScript::open("{}").is_ok());
    let error = TypeScript::open(r#"{"strict": true}"#).err().unwrap();
    assert!(error.contains("\"strict\""), "{error}");
}

#[test]
fn a_malformed_request_fails_the_call_by_what_is_wrong() {
    let error = generate(r#"{"kind": "server", "server": "s", "tools": []}"#).unwrap_err();
    assert!(error.contains("folder"), "{error}");
}

#[test]
fn every_server_fixture_runs_in_node_and_calls_the_original_names() {
    let mut ran = 0;
    for fixture in invariants::fixtures()
        .iter()
        .filter(|f| f.request["kind"] == "server")
    {
        if !invariants::runs_in_node(fixture, true, &generate) {
            eprintln!("no `node` on PATH: the generated modules were not run");
            return;
        }
        ran += 1;
    }
    assert!(ran >= 8, "only {ran} fixtures ran");
}

#[test]
fn a_long_enum_is_typed_by_its_kinds_and_listed_in_the_doc() {
    let values: Vec<String> = (0..1000).map(|i| format!("value{i}")).collect();
    let request = serde_json::json!({"kind": "server", "server": "s", "folder": "s", "tools": [
        {"name": "pick", "inputSchema": {"type": "object", "properties": {"v": {"enum": values}}}}
    ]});
    let response: serde_json::Value =
        serde_json::from_str(&generate(&request.to_string()).unwrap()).unwrap();
    let module = response["files"][1]["content"].as_str().unwrap();
    assert!(module.contains("v?: string;"), "{module}");
    assert!(
        module.contains("@enum 1000 values: \"value0\", \"value1\""),
        "{module}"
    );
}

#[test]
fn a_tool_whose_types_are_too_large_is_written_untyped() {
    let properties: serde_json::Map<String, serde_json::Value> = (0..12_000)
        .map(|i| {
            let schema = serde_json::json!({"type": "string", "description": "x".repeat(40)});
            (format!("property{i}"), schema)
        })
        .collect();
    let request = serde_json::json!({"kind": "server", "server": "s", "folder": "s", "tools": [
        {"name": "huge", "inputSchema": {"type": "object", "properties": properties}},
        {"name": "small", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}
    ]});
    let fixture = invariants::Fixture {
        name: "huge".into(),
        request,
        hostile: false,
    };
    let response = invariants::check_fixture(&fixture, true, &generate);
    let warnings = response["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains("\"huge\": its types would make a module of")
    );
    assert_eq!(
        response["tools"][0]["signature"],
        "huge(args?: Record<string, unknown>): Promise<unknown>"
    );
    assert_eq!(
        response["tools"][1]["signature"],
        "small(args?: { a?: string }): Promise<unknown>"
    );
}

/// The workspace builds serde_json with `preserve_order`, so parsed requests keep their key
/// order and the shuffled-keys check above can catch output that depends on it.
#[test]
fn parsed_json_keeps_key_order_so_the_shuffle_check_bites() {
    assert!(invariants::keys_keep_their_order());
}

#[test]
fn every_response_names_the_extension_of_its_modules() {
    for request in [
        r#"{"kind": "root", "servers": [{"name": "a", "folder": "a"}]}"#,
        r#"{"kind": "server", "server": "a", "folder": "a", "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}"#,
    ] {
        let response: serde_json::Value =
            serde_json::from_str(&generate(request).unwrap()).unwrap();
        assert_eq!(response["extension"], "ts", "{request}");
        for file in response["files"].as_array().unwrap() {
            assert!(file["path"].as_str().unwrap().ends_with(".ts"), "{file}");
        }
    }
}
