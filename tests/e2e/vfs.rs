//! The virtual filesystem through a real MCP client over stdio.

use runbyte_tests::{TempDir, call, client, config_of, config_with, test_server_table};
use serde_json::json;

#[tokio::test]
async fn a_client_lists_reads_and_searches_the_servers() {
    let dir = TempDir::new("vfs-client");
    let tables = [
        test_server_table("test", &["--mode", "odd-names"], ""),
        test_server_table("broken", &["--mode", "crash-on-initialize"], ""),
    ];
    dir.write("runbyte.toml", &config_with(&tables.join("\n")));
    let client = client(&dir).await;

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"list_directory")
            && names.contains(&"read_file")
            && names.contains(&"search_tools"),
        "{names:?}"
    );
    let listed_size = serde_json::to_string(&tools).unwrap().len();
    assert!(listed_size < 3000, "tools/list is {listed_size} bytes");

    let (root, error) = call(&client, "list_directory", json!({"path": "/servers"})).await;
    assert!(!error, "{root}");
    assert!(
        root.contains("demo/") && root.contains("test/") && root.contains("index.ts"),
        "{root}"
    );
    assert!(
        root.contains("broken/  (unavailable: `server/discover` or `initialize` failed: the server exited with status 3"),
        "{root}"
    );

    let (demo, _) = call(
        &client,
        "list_directory",
        json!({"path": "servers/demo", "withDescriptions": true}),
    )
    .await;
    assert!(
        demo.contains("get_weather.ts  The current weather for a city"),
        "{demo}"
    );
    let (weather, error) = call(
        &client,
        "read_file",
        json!({"path": "/servers/demo/get_weather.ts"}),
    )
    .await;
    assert!(
        !error && weather.contains("export async function get_weather("),
        "{weather}"
    );
    assert!(
        weather.contains("callTool(\"demo\", \"get_weather\""),
        "{weather}"
    );

    let (odd, _) = call(
        &client,
        "list_directory",
        json!({"path": "/servers/test", "withDescriptions": true}),
    )
    .await;
    assert!(odd.contains("[tool `with space`]"), "{odd}");
    let (index, error) = call(
        &client,
        "read_file",
        json!({"path": "/servers/test/index.ts"}),
    )
    .await;
    assert!(!error && index.contains("export * from"), "{index}");
    let (broken, _) = call(
        &client,
        "read_file",
        json!({"path": "/servers/broken/index.ts"}),
    )
    .await;
    assert!(
        broken.contains("Server `broken` is unavailable"),
        "{broken}"
    );

    let (hits, error) = call(
        &client,
        "search_tools",
        json!({"query": "weather in a city", "limit": 3}),
    )
    .await;
    assert!(!error, "{hits}");
    assert!(hits.starts_with("demo/get_weather: "), "{hits}");
    assert!(
        hits.contains("import { get_weather } from './servers/demo';"),
        "{hits}"
    );

    let (outside, error) = call(&client, "read_file", json!({"path": "/etc/passwd"})).await;
    assert!(
        error && outside.contains("outside the virtual filesystem"),
        "{outside}"
    );
    let (typo, error) = call(
        &client,
        "read_file",
        json!({"path": "/servers/demo/get_wether.ts"}),
    )
    .await;
    assert!(
        error && typo.contains("did you mean `/servers/demo/get_weather.ts`"),
        "{typo}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_servers_list_changed_regenerates_its_folder() {
    let dir = TempDir::new("vfs-changed");
    dir.write(
        "runbyte.toml",
        &config_with(&test_server_table("test", &[], "new-tools = \"allow\"")),
    );
    let client = client(&dir).await;
    let (before, _) = call(&client, "list_directory", json!({"path": "/servers/test"})).await;
    assert!(!before.contains("added_1.ts"), "{before}");
    let program = "import { change_tools } from './servers/test';\nawait change_tools({});";
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    let mut after = String::new();
    for _ in 0..50 {
        after = call(&client, "list_directory", json!({"path": "/servers/test"}))
            .await
            .0;
        if after.contains("added_1.ts") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(after.contains("added_1.ts"), "{after}");
    let (module, error) = call(
        &client,
        "read_file",
        json!({"path": "/servers/test/added_1.ts"}),
    )
    .await;
    assert!(
        !error && module.contains("callTool(\"test\", \"added_1\""),
        "{module}"
    );
    let program = "import { added_1 } from './servers/test';\nexport default await added_1({ value: 'new' });";
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error && text.contains("\"tool\":\"added_1\""), "{text}");
    client.cancel().await.unwrap();
}

/// `tools` and `exclude-tools`: a hidden tool is absent from `runbyte tools` (listed there as hidden,
/// with why), from the VFS and from search, and a program that calls it is told it is hidden.
#[test]
fn a_servers_tool_filter_hides_tools_everywhere() {
    let dir = TempDir::new("vfs-filter");
    let table = test_server_table(
        "t",
        &[],
        "tools = [\"e*\", \"a?d\", \"change_*\", \"slow\"]\nexclude-tools = [\"change_*\"]",
    );
    dir.write("runbyte.toml", &config_of(&[table]));

    let tools = runbyte_tests::run(dir.path(), &["tools", "t"]);
    assert_eq!(tools.code, Some(0), "{}{}", tools.stdout, tools.stderr);
    let shown: Vec<&str> = tools
        .stdout
        .lines()
        .filter(|line| line.starts_with("  ") && !line.contains("(hidden"))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(shown, ["echo", "add", "slow", "env"], "{}", tools.stdout);
    assert!(
        tools.stdout.contains(
            "change_tools                 (hidden: it matches `exclude-tools` entry \"change_*\")"
        ) && tools.stdout.contains(
            "crash                        (hidden: it matches none of the server's `tools`)"
        ),
        "{}",
        tools.stdout
    );

    let listed = runbyte_tests::run(dir.path(), &["ls", "/servers/t"]);
    assert!(
        listed.stdout.contains("echo.ts") && !listed.stdout.contains("change_tools"),
        "{}",
        listed.stdout
    );
    let searched = runbyte_tests::run(dir.path(), &["search", "change", "tools"]);
    assert!(
        !searched.stdout.contains("change_tools"),
        "{}",
        searched.stdout
    );

    dir.write(
        "hidden.ts",
        "import { callTool } from 'runbyte:bridge';\n\
         export default await callTool('t', 'change_tools', {});",
    );
    let ran = runbyte_tests::run(dir.path(), &["exec", "hidden.ts"]);
    let said = format!("{}{}", ran.stdout, ran.stderr);
    assert!(
        said.contains(
            "server `t` has no tool `change_tools` (it is hidden: it matches \
                       `exclude-tools` entry \"change_*\", in `[servers.t]`)"
        ),
        "{said}"
    );
}
