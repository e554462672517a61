//! `search_tools` over a large catalogue: 20 servers × 250 tools (every verb × noun), the index
//! built once per snapshot and each query answered from it.
//!
//! Run with `cargo bench -p runbyte-core --bench search`. `query_*` is what one `search_tools`
//! costs inside the gateway (target: ≤ 2 ms over 5,000 tools); `build_index` is what a catalogue
//! change costs once.

#![allow(clippy::unwrap_used)]

use runbyte_core::vfs::{FolderStatus, SearchIndex, ServerFolder, Snapshot, ToolEntry};

fn main() {
    divan::main();
}

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

fn catalogue(servers: usize) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for s in 0..servers {
        let server = format!("server{s}");
        let tools = VERBS
            .iter()
            .flat_map(|verb| NOUNS.iter().map(move |noun| (verb, noun)))
            .map(|(verb, noun)| {
                let name = format!("{verb}_{noun}");
                let spoken = noun.replace('_', " ");
                let description = format!(
                    "{verb} a {spoken} in {server}. Returns the {spoken} with its id, its \
                     owner, when it was made and last changed, and a link to it."
                );
                ToolEntry {
                    server: server.clone(),
                    identifier: name.clone(),
                    path: format!("/servers/{server}/{name}.ts"),
                    signature: format!("{name}(args: {{ id: string }}): Promise<unknown>"),
                    summary: description.clone(),
                    description: description.to_lowercase(),
                    params: vec!["id".into(), "query".into(), "pageSize".into()],
                    name,
                }
            })
            .collect();
        snapshot.folders.insert(
            server.clone(),
            ServerFolder {
                server: server.clone(),
                folder: server,
                status: FolderStatus::Ready,
                tools,
            }
            .into(),
        );
    }
    snapshot
}

#[divan::bench]
fn build_index_5000(bencher: divan::Bencher) {
    let snapshot = catalogue(20);
    bencher.bench(|| SearchIndex::build(snapshot.folders.values().flat_map(|f| f.tools.iter())));
}

#[divan::bench(args = ["create issue", "close a ticket in server7", "pull requests", "zzz"])]
fn query_5000(bencher: divan::Bencher, query: &str) {
    let snapshot = catalogue(20);
    snapshot.index();
    bencher.bench(|| snapshot.search(divan::black_box(query), 10).len());
}
