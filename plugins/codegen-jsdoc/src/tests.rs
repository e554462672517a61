#![allow(clippy::unwrap_used)]

#[path = "../../codegen-common/testing/invariants.rs"]
mod invariants;

use runbyte_plugin_api::codegen::Codegen;

use super::JsDoc;

fn generate(request: &str) -> Result<String, String> {
    JsDoc.generate(request)
}

#[test]
fn every_fixture_keeps_the_invariants_and_matches_its_snapshot() {
    for fixture in invariants::fixtures() {
        let response = invariants::check_fixture(&fixture, false, &generate);
        insta::assert_snapshot!(fixture.name.clone(), invariants::snapshot_text(&response));
    }
}

#[test]
fn the_invariants_notice_broken_output() {
    invariants::mutations_are_caught(false, &generate);
}

#[test]
fn the_plugin_takes_no_configuration() {
    assert!(JsDoc::open("{}").is_ok());
    let error = JsDoc::open(r#"{"strict": true}"#).err().unwrap();
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
        if !invariants::runs_in_node(fixture, false, &generate) {
            eprintln!("no `node` on PATH: the generated modules were not run");
            return;
        }
        ran += 1;
    }
    assert!(ran >= 8, "only {ran} fixtures ran");
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
        assert_eq!(response["extension"], "js", "{request}");
        for file in response["files"].as_array().unwrap() {
            assert!(file["path"].as_str().unwrap().ends_with(".js"), "{file}");
        }
    }
}
