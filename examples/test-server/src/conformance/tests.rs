use std::collections::BTreeSet;

use super::{Fixture, capabilities, input_required, tasks, tools};

#[test]
fn a_signed_state_verifies_and_an_altered_one_does_not() {
    let fixture = Fixture::default();
    let state = fixture.sign("multi_round:1");
    assert_eq!(fixture.verify(&state), Some("multi_round:1"));
    assert_eq!(fixture.verify(&format!("{state}-TAMPERED")), None);
    assert_eq!(fixture.verify("multi_round:1"), None);
    // Another process (another key) does not accept it either.
    assert_eq!(Fixture::default().verify(&state), None);
}

#[test]
fn every_fixture_tool_is_listed_once_and_every_listed_one_is_run() {
    let listed: Vec<String> = tools().iter().map(|tool| tool.name.to_string()).collect();
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a name is listed twice: {listed:?}"
    );
    let run: BTreeSet<String> = tools::NAMES
        .iter()
        .chain(tasks::NAMES)
        .map(|name| (*name).to_owned())
        .collect();
    assert_eq!(unique.into_iter().cloned().collect::<BTreeSet<_>>(), run);
    for name in input_required::NAMES {
        assert!(tools::NAMES.contains(name), "{name} is not listed");
    }
}

#[test]
fn the_schema_fixtures_keep_their_keywords() {
    let tools = tools();
    let schema = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .map(|tool| serde_json::Value::Object((*tool.input_schema).clone()))
            .unwrap_or_default()
    };
    let json_schema = schema("json_schema_2020_12_tool");
    for keyword in [
        "$schema",
        "$defs",
        "allOf",
        "if",
        "then",
        "else",
        "additionalProperties",
    ] {
        assert!(json_schema.get(keyword).is_some(), "{keyword} was lost");
    }
    assert_eq!(
        json_schema["$defs"]["address"]["$anchor"],
        serde_json::json!("addressDef")
    );
    assert_eq!(
        schema("test_custom_header")["properties"]["region"]["x-mcp-header"],
        serde_json::json!("Region")
    );
}

#[test]
fn the_capabilities_declare_every_list_change_and_subscriptions() {
    let declared = serde_json::to_value(capabilities()).unwrap_or_default();
    assert_eq!(declared["tools"]["listChanged"], serde_json::json!(true));
    assert_eq!(declared["prompts"]["listChanged"], serde_json::json!(true));
    assert_eq!(
        declared["resources"]["listChanged"],
        serde_json::json!(true)
    );
    assert_eq!(declared["resources"]["subscribe"], serde_json::json!(true));
    assert!(declared.get("logging").is_some());
    assert!(declared.get("completions").is_some());
}
