//! `expose = "direct"` and `"both"`: a server's tools in Runbyte's own `tools/list`, called
//! straight through the Hub with the same validation and policies, and kept out of the VFS
//! (direct) or not (both), through a real MCP client over stdio; and `"auto"`, which lists the
//! small catalogues directly, by the weight of their definitions.

use std::time::Duration;

use runbyte_tests::{TempDir, call, client, config_of, config_with, run, test_server_table};
use serde_json::json;

#[tokio::test]
async fn directly_exposed_tools_are_listed_called_and_judged() {
    let dir = TempDir::new("direct");
    let table = test_server_table("t", &[], "expose = \"both\"\ndirect-prefix = \"tt.\"");
    let config = config_with(&format!(
        "{table}\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n"
    ))
    .replace(
        "args = [\"demo-server\"]\n",
        "args = [\"demo-server\"]\nexpose = \"direct\"\n",
    );
    dir.write("runbyte.toml", &config);
    let client = client(&dir).await;

    // Both servers connect in the background: wait until their tools are listed.
    let mut names = Vec::new();
    for _ in 0..100 {
        let tools = client.peer().list_all_tools().await.unwrap();
        names = tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
        if names.iter().any(|n| n == "demo_get_weather") && names.iter().any(|n| n == "tt.echo") {
            let weather = tools.iter().find(|t| t.name == "demo_get_weather").unwrap();
            assert!(
                weather.input_schema.contains_key("properties")
                    && weather
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.read_only_hint == Some(true)),
                "{weather:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        names.iter().any(|n| n == "execute_code") && names.iter().any(|n| n == "tt.echo"),
        "{names:?}"
    );

    // Called straight through, the server's own result.
    let (weather, error) = call(
        &client,
        "demo_get_weather",
        json!({"location": {"city": "Paris"}}),
    )
    .await;
    assert!(!error && weather.contains("cloudy"), "{weather}");
    // The Hub checks the arguments as for a program's call.
    let (invalid, error) = call(&client, "demo_get_weather", json!({"location": "Paris"})).await;
    assert!(error && invalid.contains("must be object"), "{invalid}");
    let (echoed, error) = call(&client, "tt.echo", json!({"message": "hi"})).await;
    assert!(!error && echoed.contains("hi"), "{echoed}");
    // The policies judge it: `readonly` denies a tool not known to be read-only.
    let (denied, error) = call(&client, "tt.slow", json!({"ms": 1})).await;
    assert!(
        error && denied.contains("denied by policy `readonly`"),
        "{denied}"
    );

    // `direct` keeps the server out of the VFS (and programs' calls away from it); `both` not.
    let (root, _) = call(&client, "list_directory", json!({"path": "/servers"})).await;
    assert!(root.contains("t/") && !root.contains("demo/"), "{root}");
    let (refused, _) = call(
        &client,
        "execute_code",
        json!({"code": "import { callTool } from 'runbyte:bridge';\n\
                        export default await callTool('demo', 'get_weather', \
                        { location: { city: 'Paris' } });"}),
    )
    .await;
    assert!(
        refused.contains("server `demo` is exposed to clients directly"),
        "{refused}"
    );
}

/// A directly exposed server's list change reaches Runbyte's own `tools/list`.
#[tokio::test]
async fn a_direct_servers_new_tools_are_listed() {
    let dir = TempDir::new("direct-change");
    let table = test_server_table("t", &[], "expose = \"direct\"\nnew-tools = \"allow\"");
    dir.write("runbyte.toml", &config_with(&table));
    let client = client(&dir).await;
    let listed = |names: &[String], name: &str| names.iter().any(|n| n == name);
    let mut names = Vec::new();
    for _ in 0..100 {
        names = client
            .peer()
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        if listed(&names, "t_change_tools") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        listed(&names, "t_change_tools") && !listed(&names, "t_added_1"),
        "{names:?}"
    );
    let (changed, error) = call(&client, "t_change_tools", json!({})).await;
    assert!(!error, "{changed}");
    let mut grew = false;
    for _ in 0..100 {
        let tools = client.peer().list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name == "t_added_1") {
            grew = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(grew, "t_added_1 never appeared in tools/list");
}

/// A direct call passes the same gate as a program's: the shape of an untyped result is
/// learned (the module's `Result` is typed from it) and its tokens count in the session's
/// totals, which the next execution's summary tells.
#[tokio::test]
async fn a_direct_call_types_the_result_and_counts_its_tokens() {
    let dir = TempDir::new("direct-gate");
    let config = config_with("[server]\nsummary = \"full\"\n").replace(
        "args = [\"demo-server\"]\n",
        "args = [\"demo-server\"]\nexpose = \"both\"\n",
    );
    dir.write("runbyte.toml", &config);
    let client = client(&dir).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let module = "/servers/demo/get_issue.ts";
    loop {
        let (text, _) = call(&client, "read_file", json!({ "path": module })).await;
        if text.contains("declares no output schema") {
            assert!(!text.contains("inferred"), "{text}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (issue, error) = call(&client, "demo_get_issue", json!({"id": 1})).await;
    assert!(!error && issue.contains("title"), "{issue}");

    loop {
        let (text, _) = call(&client, "read_file", json!({ "path": module })).await;
        if text.contains("inferred from 1 call") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never typed:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The program reads no tool result: whatever the session consumed beyond it is the direct
    // call's (counted apart from its answer, so it may show a moment later).
    loop {
        let (summary, error) = call(
            &client,
            "execute_code",
            json!({"code": "export default 1;"}),
        )
        .await;
        assert!(!error, "{summary}");
        let (_, tail) = summary.rsplit_once("o200k_base tokens: ").unwrap();
        let numbers: Vec<u64> = tail
            .split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .map(|part| part.parse().unwrap())
            .collect();
        assert_eq!(numbers[1], 0, "{summary}");
        if numbers[4] > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not counted: {summary}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.cancel().await.unwrap();
}

/// The names in Runbyte's own `tools/list`.
async fn listed(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) -> Vec<String> {
    let tools = client.peer().list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// `expose = "auto"`: the catalogues that fit `direct-budget` together, smallest first, are
/// listed directly and stay in the VFS; one that grows past what is left leaves the list, and
/// `runbyte tools` and `check` say which and why.
#[tokio::test]
async fn auto_lists_what_fits_the_budget_and_drops_a_catalogue_that_grows() {
    let dir = TempDir::new("direct-auto");
    // The test server's 21 tools weigh about 1,350 estimated tokens, 5 generated ones about
    // 350: a budget of 3,000 holds both, until a 9,000-character description joins them.
    let config = config_of(&[
        test_server_table("t", &[], "pin = \"off\""),
        test_server_table("g", &["--mode", "generated-only", "--tools", "5"], ""),
        test_server_table(
            "big",
            &["--mode", "generated-only", "--tools", "100"],
            "expose = \"code\"",
        ),
    ])
    .replacen(
        "\n\n",
        "\n\n[server]\nexpose = \"auto\"\ndirect-budget = 3000\n\n",
        1,
    );
    dir.write("runbyte.toml", &config);

    let tools = run(dir.path(), &["tools"]);
    assert!(
        tools.stdout.contains(
            "exposed: auto: to programs, and to clients directly (its definitions, about"
        ) && tools
            .stdout
            .contains("fit the direct budget of 3000), as `g_<tool>`")
            && tools.stdout.contains("as `t_<tool>`"),
        "{}",
        tools.stdout
    );
    let check = run(dir.path(), &["check"]);
    assert!(
        check
            .stdout
            .matches("exposed: auto: to programs, and to clients directly")
            .count()
            == 2,
        "{}",
        check.stdout
    );

    let client = client(&dir).await;
    let mut names = Vec::new();
    for _ in 0..100 {
        names = listed(&client).await;
        if names.iter().any(|n| n == "g_tool_0002") && names.iter().any(|n| n == "t_echo") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        names.iter().any(|n| n == "g_tool_0002")
            && names.iter().any(|n| n == "t_echo")
            && names.iter().any(|n| n == "execute_code")
            && !names.iter().any(|n| n.starts_with("big_")),
        "{names:?}"
    );
    let (echoed, error) = call(&client, "t_echo", json!({"message": "hi"})).await;
    assert!(!error && echoed.contains("hi"), "{echoed}");

    // t's catalogue grows past what g leaves of the budget: it leaves the list, not the VFS.
    let long = "x".repeat(9000);
    let (changed, error) = call(
        &client,
        "t_change_tools",
        json!({"tool": "echo", "description": long}),
    )
    .await;
    assert!(!error, "{changed}");
    let mut gone = false;
    for _ in 0..100 {
        names = listed(&client).await;
        if !names.iter().any(|n| n == "t_echo") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        gone && names.iter().any(|n| n == "g_tool_0002"),
        "{names:?}"
    );
    let (refused, error) = call(&client, "t_echo", json!({"message": "hi"})).await;
    assert!(
        error
            && refused.contains("server `t` is exposed `auto`")
            && refused.contains("./servers/t"),
        "{refused}"
    );
    let (ran, _) = call(
        &client,
        "execute_code",
        json!({"code": "import { echo } from './servers/t';\n\
                        import { tool_0002 } from './servers/g';\n\
                        const e = await echo({ message: 'from code' });\n\
                        const g = await tool_0002({ id: 'rec-7' });\n\
                        export default JSON.stringify([e, g]);"}),
    )
    .await;
    assert!(ran.contains("from code") && ran.contains("rec-7"), "{ran}");
}

/// `expose = "auto"` when every server is `auto`, their definitions fit the direct budget plus
/// Runbyte's own surface: clients see the server's tools alone (no code-mode tools, no code-mode
/// instructions; the only server's under their own names), Runbyte's own tools stay callable;
/// a catalogue that grows past it brings code mode back, and clients are told.
#[tokio::test]
async fn auto_lists_a_small_catalogue_alone_until_it_grows() {
    let dir = TempDir::new("direct-alone");
    // The test server's 21 tools weigh about 1,350 estimated tokens: over a direct budget of
    // 1,000, within it plus Runbyte's own surface (about 500).
    let config = config_of(&[test_server_table("t", &[], "pin = \"off\"")]).replacen(
        "\n\n",
        "\n\n[server]\nexpose = \"auto\"\ndirect-budget = 1000\n\n",
        1,
    );
    dir.write("runbyte.toml", &config);

    let tools = run(dir.path(), &["tools"]);
    assert!(
        tools
            .stdout
            .contains("to clients directly without Runbyte's own tools")
            && tools.stdout.contains("as `<tool>`"),
        "{}",
        tools.stdout
    );

    let client = client(&dir).await;
    // The handshake waited for the server: its instructions already match the listing.
    let info = client.peer().peer_info().unwrap();
    assert!(info.instructions.is_none(), "{:?}", info.instructions);
    let names = listed(&client).await;
    assert!(
        names.iter().any(|n| n == "echo") && !names.iter().any(|n| n == "execute_code"),
        "{names:?}"
    );
    let (echoed, error) = call(&client, "echo", json!({"message": "hi"})).await;
    assert!(!error && echoed.contains("hi"), "{echoed}");
    // Unlisted, Runbyte's own tools still answer.
    let (ran, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { echo } from './servers/t';\n\
                        export default await echo({ message: 'from code' });"}),
    )
    .await;
    assert!(!error && ran.contains("from code"), "{ran}");

    // The catalogue grows past both budgets: code mode is back, and the direct tools leave.
    let long = "x".repeat(9000);
    let (changed, error) = call(
        &client,
        "change_tools",
        json!({"tool": "echo", "description": long}),
    )
    .await;
    assert!(!error, "{changed}");
    let mut names = Vec::new();
    for _ in 0..100 {
        names = listed(&client).await;
        if names.iter().any(|n| n == "execute_code") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        names.iter().any(|n| n == "execute_code") && !names.iter().any(|n| n == "echo"),
        "{names:?}"
    );
}
