//! Saved skills: a program saved with `save_skill` in one session is listed, read and found
//! like a tool, and imported and run by a program of a new session (a new `runbyte` process);
//! `runbyte skills` lists and deletes them.

use runbyte_tests::{
    Served, TempDir, call, client, config_with, conformance_scenario, result_json, run,
};
use serde_json::json;

const SKILL: &str = "import { get_weather } from './servers/demo';\n\n\
export default async function (args: { city: string }) {\n\
  const weather = await get_weather({ location: { city: args.city } });\n\
  return { city: args.city, conditions: weather.conditions };\n\
}\n";

#[tokio::test]
async fn a_saved_skill_is_listed_found_and_run_by_a_later_session() {
    let dir = TempDir::new("skills");
    dir.write(
        "runbyte.toml",
        &config_with("[server]\nskills-dir = \"my-skills\"\n"),
    );
    let first = client(&dir).await;
    let save = json!({
        "name": "weather-summary",
        "description": "The conditions in a city, in one line.",
        "code": SKILL,
        "args": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    });
    let (saved, error) = call(&first, "save_skill", save.clone()).await;
    assert!(!error, "{saved}");
    assert!(
        saved.contains("import weatherSummary from './skills/weather-summary'"),
        "{saved}"
    );
    // Saving again replaces only when asked to; a bad name says why.
    let (again, error) = call(&first, "save_skill", save.clone()).await;
    assert!(error && again.contains("overwrite: true"), "{again}");
    let mut renamed = save.clone();
    renamed["name"] = json!("Weather Summary");
    let (refused, error) = call(&first, "save_skill", renamed).await;
    assert!(error && refused.contains("not a skill name"), "{refused}");

    // Listed, read and searched like a tool.
    let (root, _) = call(&first, "list_directory", json!({"path": "/"})).await;
    assert!(root.contains("skills/"), "{root}");
    let (listed, _) = call(
        &first,
        "list_directory",
        json!({"path": "/skills", "withDescriptions": true}),
    )
    .await;
    assert!(
        listed.contains("weather-summary.ts  The conditions in a city"),
        "{listed}"
    );
    let (module, error) = call(
        &first,
        "read_file",
        json!({"path": "/skills/weather-summary.ts"}),
    )
    .await;
    assert!(!error, "{module}");
    assert!(
        module.contains(
            "export default function weatherSummary(args: { city: string; }): Promise<unknown>"
        ) && module.contains("const weather = await get_weather"),
        "{module}"
    );
    let (found, _) = call(
        &first,
        "search_tools",
        json!({"query": "city conditions summary"}),
    )
    .await;
    assert!(
        found.starts_with("skill weather-summary:")
            && found.contains("import weatherSummary from './skills/weather-summary';"),
        "{found}"
    );
    first.cancel().await.unwrap();

    // A new session, a new process: the skill is there, and a program runs it.
    let second = client(&dir).await;
    let (answer, error) = call(
        &second,
        "execute_code",
        json!({"code": "import weatherSummary from './skills/weather-summary';\n\
                        export default await weatherSummary({ city: 'Paris' });"}),
    )
    .await;
    assert!(!error, "{answer}");
    let value = result_json(&answer);
    assert_eq!(value["city"], "Paris", "{answer}");
    assert!(value["conditions"].is_string(), "{answer}");
    // Its call to the demo server counts as the program's (same limits, policies, summary).
    assert!(answer.contains("1 tool call"), "{answer}");
    second.cancel().await.unwrap();

    // Clients of the skills extension (SEP-2640) list and get it, and read its files: the
    // conformance suite's skills scenarios pass over streamable HTTP.
    let served = Served::with_config(
        "skills-http",
        "http",
        &config_with(&format!(
            "[server]\nskills-dir = {:?}\n",
            dir.path().join("my-skills").display().to_string()
        )),
    );
    for scenario in ["sep-2640-skills-enumeration", "sep-2640-skills-manifest"] {
        conformance_scenario(&served.url("/mcp"), scenario);
    }
    drop(served);

    // The files are plain and readable; the CLI lists and deletes.
    let manifest =
        std::fs::read_to_string(dir.path().join("my-skills/weather-summary/SKILL.md")).unwrap();
    assert!(
        manifest.starts_with("---\nname: weather-summary\ndescription: \"The conditions"),
        "{manifest}"
    );
    let listed = run(dir.path(), &["skills"]);
    assert!(
        listed.code == Some(0)
            && listed
                .stdout
                .contains("weather-summary  function weatherSummary"),
        "{listed:?}"
    );
    let deleted = run(dir.path(), &["skills", "delete", "weather-summary"]);
    assert_eq!(deleted.code, Some(0), "{deleted:?}");
    let listed = run(dir.path(), &["skills"]);
    assert!(listed.stdout.contains("no skills"), "{listed:?}");
}
