#![allow(clippy::unwrap_used)]

use crate::hub::is_app_only;
use serde_json::{Value, json};

use super::*;

fn rule(servers: &[&str], verbatim: &[&str]) -> Uris {
    let verbatim: Vec<String> = verbatim.iter().map(|s| (*s).to_owned()).collect();
    Uris::of(servers.iter().map(|s| (*s).to_owned()), &verbatim)
}

/// The (server, URI, named) of each target, for comparing.
fn back(uris: &Uris, uri: &str) -> Vec<(String, String, bool)> {
    uris.targets(uri)
        .into_iter()
        .map(|t| (t.server, t.uri.into_owned(), t.named))
        .collect()
}

fn target(server: &str, uri: &str, named: bool) -> (String, String, bool) {
    (server.to_owned(), uri.to_owned(), named)
}

#[test]
fn a_ui_resource_keeps_its_scheme_with_the_server_in_the_authority() {
    let uris = rule(&["weather", "my server:1%"], &[]);
    // The SEP's own example.
    let uri = uris.client_uri("weather", "ui://weather-server/dashboard-template");
    assert_eq!(uri, "ui://weather/weather-server/dashboard-template");
    assert_eq!(
        back(&uris, &uri),
        [target(
            "weather",
            "ui://weather-server/dashboard-template",
            true
        )]
    );
    // A name a URI authority cannot hold is percent-encoded, as in runbyte:// URIs.
    let odd = uris.client_uri("my server:1%", "ui://dash");
    assert_eq!(odd, "ui://my%20server%3A1%25/dash");
    assert_eq!(
        back(&uris, &odd),
        [target("my server:1%", "ui://dash", true)]
    );
    // Other schemes are namespaced as before; a template stays a template.
    assert_eq!(
        uris.client_uri("weather", "file:///{path}"),
        "runbyte://weather/file:///{path}"
    );
    assert_eq!(
        uris.client_uri("weather", "ui://{view}/page"),
        "ui://weather/{view}/page"
    );
    // `ui://` with nothing after it has no rest to keep: it is namespaced, and comes back.
    let bare = uris.client_uri("weather", "ui://");
    assert_eq!(bare, "runbyte://weather/ui://");
    assert_eq!(back(&uris, &bare), [target("weather", "ui://", true)]);
}

#[test]
fn a_verbatim_servers_uris_are_shown_as_they_are() {
    let uris = rule(&["fixture", "other"], &["fixture"]);
    assert!(uris.is_verbatim("fixture") && !uris.is_verbatim("other"));
    assert!(uris.any_verbatim());
    for uri in ["test://static-text", "ui://app/view", "runbyte://other/x"] {
        assert_eq!(uris.client_uri("fixture", uri), uri);
    }
    assert_eq!(
        back(&uris, "test://static-text"),
        [target("fixture", "test://static-text", false)]
    );
    // A URI that names another server may be that server's or, as it is, the verbatim one's:
    // the named reading comes first.
    assert_eq!(
        back(&uris, "runbyte://other/x"),
        [
            target("other", "x", true),
            target("fixture", "runbyte://other/x", false)
        ]
    );
    assert_eq!(
        back(&uris, "ui://other/view"),
        [
            target("other", "ui://view", true),
            target("fixture", "ui://other/view", false)
        ]
    );
    // Naming the verbatim server itself is no named reading: its URIs have no such form.
    assert_eq!(
        back(&uris, "runbyte://fixture/x"),
        [target("fixture", "runbyte://fixture/x", false)]
    );
    assert!(uris.may_be_of("anything://at/all", "fixture"));
    assert!(!uris.may_be_of("anything://at/all", "other"));
}

#[test]
fn two_verbatim_servers_may_both_stand_for_a_uri() {
    let uris = rule(&["a", "b", "c"], &["a", "b"]);
    assert_eq!(
        back(&uris, "test://shared"),
        [
            target("a", "test://shared", false),
            target("b", "test://shared", false)
        ]
    );
}

#[test]
fn uris_of_no_configured_server_stand_for_none() {
    let uris = rule(&["everything"], &[]);
    assert!(!uris.any_verbatim());
    for uri in [
        "test://static/resource/1",
        "ui://",
        "ui://everything",
        "ui://everything/",
        "ui:///dash",
        "ui://%zz/x",
        "ui://%FF/x",
        "ui://nobody/x",
        "runbyte://nobody/x",
        "runbyte://everything/",
        "UI://everything/x",
    ] {
        assert_eq!(back(&uris, uri), [], "{uri}");
    }
}

/// The hostile server names and URIs of `tests/corpus/resources/names.json`.
pub(in crate::hub) fn corpus() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/resources/names.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub(in crate::hub) fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn hostile_names_and_uris_round_trip_in_both_forms() {
    let corpus = corpus();
    let servers: Vec<String> = strings(&corpus["servers"])
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    let mut uris_seen = strings(&corpus["uris"]);
    let ui: Vec<String> = uris_seen.iter().map(|u| format!("ui://{u}")).collect();
    uris_seen.extend(ui);
    uris_seen.extend(["ui://a/b/c".to_owned(), "ui://%2F/x".to_owned()]);
    let uris = Uris::of(servers.iter().cloned(), &[]);
    for server in &servers {
        for uri in uris_seen.iter().filter(|u| !u.is_empty()) {
            let shown = uris.client_uri(server, uri);
            assert_eq!(
                back(&uris, &shown),
                [target(server, uri, true)],
                "{server:?} {uri:?} as {shown:?}"
            );
            // Nothing but the encoded name sits in the authority: no `/`, `?`, `#`, `@` or
            // control character can come from the name.
            let authority = shown
                .split_once("://")
                .and_then(|(_, rest)| rest.split_once('/'))
                .map(|(authority, _)| authority)
                .unwrap();
            assert!(
                authority
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.~%".contains(&b)),
                "{authority:?}"
            );
        }
    }
    // Every server's URIs stay apart: no two (server, URI) give one client URI.
    let mut given = std::collections::HashMap::new();
    for server in &servers {
        for uri in uris_seen.iter().filter(|u| !u.is_empty()) {
            let shown = uris.client_uri(server, uri);
            if let Some(before) = given.insert(shown.clone(), (server.clone(), uri.clone())) {
                panic!("{shown:?} stands for {before:?} and ({server:?}, {uri:?})");
            }
        }
    }
}

fn tool(meta: Value) -> Tool {
    let mut tool = Tool::new("t", "", std::sync::Arc::default());
    tool.meta = serde_json::from_value(meta).unwrap();
    tool
}

#[test]
fn a_tools_ui_resource_uri_is_rewritten_and_the_rest_of_its_meta_passes() {
    let uris = rule(&["w", "fx"], &["fx"]);
    let ui = json!({
        "resourceUri": "ui://dash",
        "visibility": ["app"],
        "csp": {"connectDomains": ["https://a.example"]},
        "prefersBorder": true
    });
    let mut shown = tool(json!({"ui": ui, "ui/resourceUri": "ui://dash", "other": 1}));
    uris.in_tool("w", &mut shown);
    let meta = serde_json::to_value(&shown.meta).unwrap();
    let mut expected = ui.clone();
    expected["resourceUri"] = json!("ui://w/dash");
    assert_eq!(
        meta,
        json!({"ui": expected, "ui/resourceUri": "ui://w/dash", "other": 1})
    );
    // A verbatim server's tool is left as it is.
    let mut verbatim = tool(json!({"ui": {"resourceUri": "ui://dash"}}));
    uris.in_tool("fx", &mut verbatim);
    assert_eq!(verbatim.meta.unwrap().0["ui"]["resourceUri"], "ui://dash");
    // Odd shapes are left alone rather than refused.
    for odd in [
        json!({"ui": "x"}),
        json!({"ui": {"resourceUri": 3}}),
        json!({}),
    ] {
        let mut kept = tool(odd.clone());
        uris.in_tool("w", &mut kept);
        assert_eq!(serde_json::to_value(&kept.meta).unwrap(), odd);
    }
    let mut bare = Tool::new("t", "", std::sync::Arc::default());
    uris.in_tool("w", &mut bare);
    assert!(bare.meta.is_none());
}

#[test]
fn only_a_tool_whose_visibility_leaves_out_the_model_is_app_only() {
    assert!(is_app_only(&tool(json!({"ui": {"visibility": ["app"]}}))));
    assert!(is_app_only(&tool(json!({"ui": {"visibility": []}}))));
    for shown in [
        json!({"ui": {"visibility": ["model", "app"]}}),
        json!({"ui": {"visibility": ["model"]}}),
        json!({"ui": {"resourceUri": "ui://x"}}),
        json!({"ui": {"visibility": "app"}}),
        json!({}),
    ] {
        assert!(!is_app_only(&tool(shown.clone())), "{shown}");
    }
}

#[test]
fn embedded_resources_and_links_carry_the_uri_clients_read() {
    let uris = rule(&["w"], &[]);
    let mut result = CallToolResult::success(vec![
        ContentBlock::text("ui://not-a-uri-here"),
        ContentBlock::embedded_text("ui://dash", "<html>"),
        ContentBlock::ResourceLink(rmcp::model::Resource::new("file:///a.md", "a")),
    ]);
    uris.in_result("w", &mut result);
    let content = serde_json::to_value(&result.content).unwrap();
    assert_eq!(content[0]["text"], "ui://not-a-uri-here");
    assert_eq!(content[1]["resource"]["uri"], "ui://w/dash");
    assert_eq!(content[2]["uri"], "runbyte://w/file:///a.md");
}
