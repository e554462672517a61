#![allow(clippy::unwrap_used)]

use super::*;

fn entry(server: &str, name: &str, description: &str, params: &[&str]) -> ToolEntry {
    ToolEntry {
        server: server.to_owned(),
        name: name.to_owned(),
        identifier: name.replace('-', "_"),
        path: format!("/servers/{server}/{}.ts", name.replace('-', "_")),
        signature: format!("{}(args)", name.replace('-', "_")),
        summary: description.to_owned(),
        description: description.to_lowercase(),
        params: params.iter().map(|p| (*p).to_owned()).collect(),
    }
}

fn snapshot() -> Snapshot {
    let mut snapshot = Snapshot::default();
    let tools = vec![
        entry(
            "demo",
            "search_issues",
            "Search the tracker's issues by text.",
            &["query", "state"],
        ),
        entry(
            "demo",
            "get_weather",
            "The current weather for a city.",
            &["location", "units"],
        ),
        entry("demo", "add-numbers", "Add two numbers.", &["a", "b"]),
    ];
    for tool in &tools {
        snapshot
            .files
            .insert(tool.path.clone(), File::new(format!("// {}", tool.name)));
    }
    snapshot.files.insert(
        "/servers/demo/index.ts".into(),
        File::new("export * from './search_issues';"),
    );
    snapshot.files.insert(
        "/servers/index.ts".into(),
        File::new("export * as demo from './demo/index';"),
    );
    snapshot.files.insert(
        "/servers/down/index.ts".into(),
        File::new("// unavailable\nexport {};"),
    );
    snapshot.folders.insert(
        "demo".into(),
        Arc::new(ServerFolder {
            server: "demo".into(),
            folder: "demo".into(),
            status: FolderStatus::Ready,
            tools,
        }),
    );
    snapshot.folders.insert(
        "down".into(),
        Arc::new(ServerFolder {
            server: "down".into(),
            folder: "down".into(),
            status: FolderStatus::Down("exited with status 3".into()),
            tools: Vec::new(),
        }),
    );
    snapshot
}

#[test]
fn paths_normalise_and_nothing_outside_servers_is_reachable() {
    assert_eq!(normalize("servers/demo").unwrap(), "/servers/demo");
    assert_eq!(normalize("./servers/demo/").unwrap(), "/servers/demo");
    assert_eq!(
        normalize("/servers/x/../demo//echo.ts").unwrap(),
        "/servers/demo/echo.ts"
    );
    assert_eq!(normalize("/").unwrap(), "/");
    for outside in ["/etc/passwd", "/servers/../../etc", "../x", "/home"] {
        let error = normalize(outside).unwrap_err();
        assert!(matches!(error, VfsError::Outside { .. }), "{outside}");
        assert!(error.to_string().contains("outside the virtual filesystem"));
    }
}

#[test]
fn listing_shows_folders_files_and_why_a_server_is_down() {
    let snapshot = snapshot();
    let root = snapshot.list("/servers", false).unwrap();
    assert_eq!(
        root,
        "/servers\ndemo/\ndown/  (unavailable: exited with status 3)\nindex.ts\n"
    );
    let demo = snapshot.list("servers/demo", true).unwrap();
    assert!(
        demo.contains("search_issues.ts  Search the tracker's issues by text."),
        "{demo}"
    );
    assert!(
        demo.contains("add_numbers.ts  [tool `add-numbers`] Add two numbers."),
        "{demo}"
    );
    let down = snapshot.list("/servers/down", false).unwrap();
    assert!(
        down.contains("server `down` is unavailable: exited with status 3"),
        "{down}"
    );
    assert_eq!(
        snapshot.list("/", false).unwrap(),
        "/\nservers/\nskills/\nstate/\n"
    );
    // `/skills` is a folder even with no skill saved.
    assert_eq!(snapshot.list("/skills", false).unwrap(), "/skills\n");
}

#[test]
fn a_program_that_imports_a_skill_waits_for_the_servers_the_skill_imports() {
    let mut snapshot = Snapshot::default();
    for (folder, status) in [
        ("slow", FolderStatus::Starting),
        ("other", FolderStatus::Starting),
    ] {
        snapshot.folders.insert(
            folder.to_owned(),
            Arc::new(ServerFolder {
                server: folder.to_owned(),
                folder: folder.to_owned(),
                status,
                tools: Vec::new(),
            }),
        );
    }
    snapshot.files.insert(
        "/skills/uses-slow.ts".to_owned(),
        File::new("import { x } from './servers/slow';\nimport y from './skills/uses-self';\nexport default async function () { return x(); }"),
    );
    snapshot.files.insert(
        "/skills/uses-self.ts".to_owned(),
        File::new("import y from './skills/uses-slow';\nexport default async function () {}"),
    );
    let program = "import f from './skills/uses-slow';\nexport default await f();";
    assert_eq!(snapshot.starting_in(program), vec!["slow".to_owned()]);
    assert!(snapshot.starting_in("export default 1").is_empty());
}

#[test]
fn reading_names_what_is_wrong() {
    let snapshot = snapshot();
    assert_eq!(
        &*snapshot.read("/servers/demo/search_issues.ts").unwrap(),
        "// search_issues"
    );
    assert!(matches!(
        snapshot.read("/servers/demo").unwrap_err(),
        VfsError::IsFolder { .. }
    ));
    assert!(matches!(
        snapshot.list("/servers/index.ts", false).unwrap_err(),
        VfsError::IsFile { .. }
    ));
    let error = snapshot
        .read("/servers/demo/search_isues.ts")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("did you mean `/servers/demo/search_issues.ts`"),
        "{error}"
    );
    let error = snapshot
        .read("/servers/nothing/x.ts")
        .unwrap_err()
        .to_string();
    assert!(error.contains("does not exist"), "{error}");
}

#[test]
fn search_ranks_names_over_parameters_over_descriptions() {
    let snapshot = snapshot();
    let hits = snapshot.search("weather", 10);
    assert_eq!(hits[0].0.name, "get_weather");
    let hits = snapshot.search("city temperature", 10);
    assert_eq!(hits[0].0.name, "get_weather");
    let hits = snapshot.search("sum numbers", 10);
    assert_eq!(hits[0].0.name, "add-numbers");
    let hits = snapshot.search("issues query", 1);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].0.name, "search_issues");
    assert!(snapshot.search("zzz", 10).is_empty());
}

#[test]
fn words_split_names_the_way_people_write_them() {
    assert_eq!(words("searchIssues"), ["search", "issues"]);
    assert_eq!(words("get_weather-now"), ["get", "weather", "now"]);
    assert_eq!(words("HTTPServer2"), ["httpserver2"]);
}

#[test]
fn a_program_names_the_folders_it_imports() {
    let named = folders_named(
        "import { a } from './servers/github';\nimport * as s from \"/servers/slack/index.ts\";\nconst x = myservers/no;",
    );
    assert!(!named.all);
    assert_eq!(
        named.folders.into_iter().collect::<Vec<_>>(),
        ["github", "slack"]
    );
    assert!(folders_named("import * as all from './servers';").all);
    assert!(folders_named("import * as all from 'servers/index';").all);
    assert!(folders_named("export default 1").folders.is_empty());
}

#[test]
fn a_starting_server_is_shown_starting() {
    let mut snapshot = Snapshot::default();
    snapshot.files.insert(
        "/servers/slow/index.ts".to_owned(),
        File::new("// starting"),
    );
    snapshot.folders.insert(
        "slow".to_owned(),
        Arc::new(ServerFolder {
            server: "slow".to_owned(),
            folder: "slow".to_owned(),
            status: FolderStatus::Starting,
            tools: Vec::new(),
        }),
    );
    assert!(
        snapshot
            .list("/servers", false)
            .unwrap()
            .contains("slow/  (starting)")
    );
    assert!(
        snapshot
            .list("/servers/slow", false)
            .unwrap()
            .contains("is starting")
    );
    assert_eq!(
        snapshot.starting_in("import { x } from './servers/slow'"),
        ["slow"]
    );
    assert!(snapshot.starting_in("export default 1").is_empty());
}

#[test]
fn a_module_is_ready_once_compiled_and_a_missing_one_at_once() {
    use crate::sandbox::ModuleProvider;
    let modules = Modules(Arc::new(snapshot()));
    let path = "/servers/demo/index.ts";
    // Not compiled yet: loading it takes work, so it is not ready.
    assert_eq!(modules.load_ready(path), None);
    let compiled = modules.load(path).unwrap();
    assert!(compiled.contains("search_issues"), "{compiled}");
    assert_eq!(modules.load_ready(path), Some(Some(compiled)));
    // No such module: nothing to compile, so the answer is ready.
    assert_eq!(modules.load_ready("/servers/demo/nothing.ts"), Some(None));
}

#[test]
fn state_lists_names_and_sizes_never_values() {
    let mut snapshot = snapshot();
    snapshot.files.insert(
        "/state/index.ts".into(),
        File::new(crate::kept::module(true)),
    );
    let kept = crate::kept::Kept::default();
    kept.keep(
        "a",
        "issues",
        &serde_json::json!({"secret": "s3cr3t-value"}),
    )
    .unwrap();
    let shelf = Shelf::Kept(kept.list("a"));
    let listed = snapshot.list_state("/state", false, &shelf).unwrap();
    assert_eq!(listed, "/state\nindex.ts\nissues  (25 bytes)\n");
    let read = snapshot.read_state("state/issues", &shelf).unwrap();
    assert!(
        read.contains("25 bytes")
            && read.contains("recall(\"issues\")")
            && !read.contains("s3cr3t"),
        "{read}"
    );
    assert!(
        snapshot
            .read_state("/state/index.ts", &shelf)
            .unwrap()
            .contains("export async function keep")
    );
    let missing = snapshot.read_state("/state/other", &shelf).unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("/state holds: index.ts, issues"),
        "{missing}"
    );
    let empty = snapshot
        .list_state("/state", false, &Shelf::Kept(Vec::new()))
        .unwrap();
    assert!(empty.contains("nothing kept yet"), "{empty}");
    let refused = snapshot
        .list_state("/state/", false, &Shelf::Refused("no session".into()))
        .unwrap();
    assert!(
        refused.contains("cannot keep values: no session"),
        "{refused}"
    );
    assert!(is_state("./state/x") && is_state("/state") && !is_state("/servers"));
}
