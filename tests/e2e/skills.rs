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
    let second = runbyte_tests::client(&dir).await;
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

/// The hostile skills kept in `tests/corpus/skills/` (each once closed the comment that heads
/// `/skills/<name>.ts`, so code in its `args` schema or description ran on import).
fn hostile_corpus() -> Vec<serde_json::Value> {
    let folder = runbyte_tests::repo_root().join("tests/corpus/skills");
    let mut out: Vec<serde_json::Value> = std::fs::read_dir(&folder)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect();
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    assert!(out.len() >= 5, "{}", folder.display());
    out
}

/// Code in a skill's `args` schema (an enum value, a property name) or its description stays
/// in the module's header comment: every hostile skill is saved through a client, and a
/// program that imports them all finds that none of their text ran.
#[tokio::test]
async fn hostile_skill_schemas_run_nothing_when_imported() {
    let dir = TempDir::new("skills-hostile");
    dir.write(
        "runbyte.toml",
        &config_with("[server]\nskills-dir = \"my-skills\"\n"),
    );
    let client = client(&dir).await;
    let corpus = hostile_corpus();
    let mut imports = String::new();
    let mut calls = Vec::new();
    for (n, skill) in corpus.iter().enumerate() {
        let save = json!({
            "name": skill["name"],
            "description": skill["description"],
            "code": "export default async function (args: unknown) { return 'ran'; }\n",
            "args": skill["args"],
        });
        let (saved, error) = call(&client, "save_skill", save).await;
        assert!(!error, "{}: {saved}", skill["name"]);
        imports.push_str(&format!(
            "import s{n} from './skills/{}';\n",
            skill["name"].as_str().unwrap()
        ));
        calls.push(format!("await s{n}({{}})"));
        // The module's header is one comment: the first `*/` ends it, and the program follows.
        let (module, error) = call(
            &client,
            "read_file",
            json!({"path": format!("/skills/{}.ts", skill["name"].as_str().unwrap())}),
        )
        .await;
        assert!(!error, "{module}");
        let end = module.find("*/").unwrap();
        assert!(
            module[end..].starts_with("*/\nexport default async function"),
            "{}: {module}",
            skill["name"]
        );
    }
    let program = format!(
        "{imports}const ran = [{}];\nexport default {{ pwned: globalThis.pwned ?? null, ran }};",
        calls.join(", ")
    );
    let (answer, error) = call(&client, "execute_code", json!({ "code": program })).await;
    assert!(!error, "{answer}");
    let value = result_json(&answer);
    assert_eq!(value["pwned"], json!(null), "{answer}");
    assert_eq!(
        value["ran"].as_array().unwrap().len(),
        corpus.len(),
        "{answer}"
    );
    client.cancel().await.unwrap();

    // `runbyte skills` prints their descriptions and signatures escaped: no escape sequence
    // (an OSC 52 clipboard write, a title change) and no bidi override reaches the terminal.
    let listed = run(dir.path(), &["skills"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(
        !listed
            .stdout
            .chars()
            .any(|c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c)),
        "{:?}",
        listed.stdout
    );
    assert!(listed.stdout.contains("\\u{1b}]52;c;"), "{}", listed.stdout);
}

/// Writes a skill folder by hand (as a person may), `size` bytes of program.
fn write_skill(root: &std::path::Path, name: &str, size: usize) {
    let folder = root.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Written by hand.\n---\n"),
    )
    .unwrap();
    let head = "export default async function () { return 1; }\n";
    let mut code = String::from(head);
    if size > head.len() + 3 {
        code.push_str("// ");
        code.push_str(&"x".repeat(size - head.len() - 3));
    }
    std::fs::write(folder.join("skill.ts"), code).unwrap();
}

/// The skills folder has a budget (256 skills, 64 MiB) that a save past it names; what is held
/// in memory is each skill's name, description and digests, so `resources/list` reads no skill
/// file (one deleted behind Runbyte's back is still listed, and importing it says why it
/// cannot be read).
#[tokio::test]
async fn the_skills_folder_has_a_budget_and_lists_read_no_skill_file() {
    let dir = TempDir::new("skills-budget");
    dir.write(
        "runbyte.toml",
        &config_with("[server]\nskills-dir = \"my-skills\"\n"),
    );
    let root = dir.path().join("my-skills");
    // 64 skills of 1 MiB less a little: 9 KiB under 64 MiB.
    for n in 0..64 {
        write_skill(&root, &format!("big-{n:02}"), 1024 * 1024 - 200);
    }
    write_skill(&root, "small", 100);
    let client = client(&dir).await;
    let save = |name: &str, bytes: usize| {
        json!({
            "name": name,
            "description": "One more.",
            "code": format!("export default async function () {{ return 1; }}\n// {}", "y".repeat(bytes)),
        })
    };
    let (refused, error) = call(&client, "save_skill", save("one-more", 200 * 1024)).await;
    assert!(
        error && refused.contains("pass its budget of 64 MiB") && refused.contains("one-more"),
        "{refused}"
    );
    let (saved, error) = call(&client, "save_skill", save("tiny", 10)).await;
    assert!(!error, "{saved}");

    // The saved skill reaches the list with the notification that says it changed, which may
    // come just after the save's answer: list again until it shows (a hang catcher's bound).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let resources = loop {
        let resources = client.peer().list_all_resources().await.unwrap();
        let skill_files = resources
            .iter()
            .filter(|r| r.uri.starts_with("skill://"))
            .count();
        if skill_files == 66 * 2 || std::time::Instant::now() > deadline {
            break resources;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let skill_files = resources
        .iter()
        .filter(|r| r.uri.starts_with("skill://"))
        .count();
    assert_eq!(skill_files, 66 * 2, "{resources:?}");
    // Deleted behind Runbyte's back: still listed (nothing was read to list it); importing it
    // fails by name.
    std::fs::remove_file(root.join("small/skill.ts")).unwrap();
    let resources = client.peer().list_all_resources().await.unwrap();
    assert!(
        resources.iter().any(|r| r.uri == "skill://small/skill.ts"),
        "{resources:?}"
    );
    let (answer, _) = call(
        &client,
        "execute_code",
        json!({"code": "import small from './skills/small';\nexport default await small({});"}),
    )
    .await;
    assert!(answer.contains("/skills/small.ts"), "{answer}");
    client.cancel().await.unwrap();

    // The count: a folder of 256 skills refuses a new one, naming the bound.
    let dir = TempDir::new("skills-count");
    dir.write(
        "runbyte.toml",
        &config_with("[server]\nskills-dir = \"my-skills\"\n"),
    );
    for n in 0..256 {
        write_skill(&dir.path().join("my-skills"), &format!("s-{n:03}"), 60);
    }
    let second = runbyte_tests::client(&dir).await;
    let (refused, error) = call(&second, "save_skill", save("one-more", 10)).await;
    assert!(
        error && refused.contains("holds 256 skills, the most it may (256)"),
        "{refused}"
    );
    second.cancel().await.unwrap();
}
