#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use super::super::{FolderStatus, ServerFolder, Snapshot, ToolEntry, words};

const SERVERS: [&str; 20] = [
    "github",
    "gitlab",
    "jira",
    "linear",
    "slack",
    "notion",
    "asana",
    "trello",
    "sentry",
    "stripe",
    "zendesk",
    "hubspot",
    "figma",
    "vercel",
    "netlify",
    "heroku",
    "datadog",
    "pagerduty",
    "airtable",
    "discord",
];
const VERBS: [&str; 10] = [
    "create", "get", "list", "update", "delete", "search", "close", "archive", "assign", "export",
];
const NOUNS: [&str; 25] = [
    "issue",
    "pull_request",
    "comment",
    "user",
    "repository",
    "branch",
    "file",
    "label",
    "milestone",
    "project",
    "team",
    "webhook",
    "release",
    "tag",
    "commit",
    "review",
    "workflow",
    "secret",
    "deployment",
    "invoice",
    "customer",
    "ticket",
    "channel",
    "message",
    "page",
];

fn tool(server: &str, name: &str, description: &str, params: &[&str]) -> ToolEntry {
    ToolEntry {
        server: server.to_owned(),
        name: name.to_owned(),
        identifier: name.to_owned(),
        path: format!("/servers/{server}/{name}.ts"),
        signature: format!("{name}(args)"),
        summary: description.to_owned(),
        description: description.to_lowercase(),
        params: params.iter().map(|p| (*p).to_owned()).collect(),
    }
}

/// 20 servers × 250 tools (every verb × noun), with one odd tool among them.
fn catalogue() -> Snapshot {
    let mut snapshot = Snapshot::default();
    for server in SERVERS {
        let mut tools = Vec::new();
        for verb in VERBS {
            for noun in NOUNS {
                let name = format!("{verb}_{noun}");
                let spoken = noun.replace('_', " ");
                let description = format!("{verb} a {spoken} in {server}. Returns the {spoken}.");
                let params: &[&str] = match verb {
                    "create" => &["title", "body", "labels"],
                    "list" | "search" => &["query", "limit", "cursor"],
                    "assign" => &["id", "assigneeLogin"],
                    _ => &["id"],
                };
                tools.push(tool(server, &name, &description, params));
            }
        }
        if server == "heroku" {
            tools.pop();
            tools.push(tool(
                server,
                "rotateSigningKey",
                "Rotates the signing key of a Kubernetes secret, keeping the old one for a day.",
                &["namespace", "secretName"],
            ));
        }
        snapshot.folders.insert(
            server.to_owned(),
            Arc::new(ServerFolder {
                server: server.to_owned(),
                folder: server.to_owned(),
                status: FolderStatus::Ready,
                tools,
            }),
        );
    }
    snapshot
}

fn names<'a>(hits: &[(&'a ToolEntry, u32)]) -> Vec<&'a str> {
    hits.iter().map(|(tool, _)| tool.name.as_str()).collect()
}

#[test]
fn on_five_thousand_tools_the_named_action_ranks_first_on_every_server() {
    let snapshot = catalogue();
    assert_eq!(snapshot.tools().count(), 5000);
    let hits = snapshot.search("create issue", 20);
    assert_eq!(names(&hits), vec!["create_issue"; 20], "{hits:?}");
    // Naming the server picks its tool out of the twenty.
    let hits = snapshot.search("close a jira ticket", 3);
    assert_eq!(
        (hits[0].0.server.as_str(), hits[0].0.name.as_str()),
        ("jira", "close_ticket")
    );
    // A plural finds the singular; a camelCase parameter is found by its words.
    let hits = snapshot.search("pull requests", 5);
    assert!(
        hits.iter().all(|(t, _)| t.name.ends_with("pull_request")),
        "{hits:?}"
    );
    let hits = snapshot.search("assignee login", 5);
    assert!(
        hits.iter().all(|(t, _)| t.name.starts_with("assign_")),
        "{hits:?}"
    );
}

#[test]
fn on_five_thousand_tools_a_rare_word_outweighs_common_ones() {
    let snapshot = catalogue();
    let hits = snapshot.search("rotate kubernetes secret", 5);
    assert_eq!(hits[0].0.name, "rotateSigningKey", "{hits:?}");
    // A word every tool of a server holds (its name) does not drown the action.
    let hits = snapshot.search("delete webhook", 5);
    assert!(
        hits.iter().all(|(t, _)| t.name == "delete_webhook"),
        "{hits:?}"
    );
    assert_eq!(words(&hits[0].0.name), ["delete", "webhook"]);
    assert!(snapshot.search("zzz", 10).is_empty());
    assert!(snapshot.search("", 10).is_empty());
}

#[test]
fn a_limit_caps_the_hits_and_ties_keep_the_catalogue_order() {
    let snapshot = catalogue();
    let hits = snapshot.search("export milestone", 3);
    assert_eq!(hits.len(), 3);
    let servers: Vec<&str> = hits.iter().map(|(t, _)| t.server.as_str()).collect();
    assert_eq!(servers, ["airtable", "asana", "datadog"]);
}
