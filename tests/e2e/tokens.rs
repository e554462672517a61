//! Token accounting end to end: an execution's summary counts, in o200k_base, the tokens its
//! answer costs and those of the tool results it read (the demo server's `echo`, whose text is
//! known), the session adds them up, and `runbyte stats` reads the totals back from the audit
//! log.

use runbyte_core::tokens;
use runbyte_tests::{TempDir, call, call_full, client, config_with, run};
use serde_json::json;

/// `(returned, consumed, session returned, session consumed)` from a summary line.
fn figures(text: &str) -> (u64, u64, u64, u64) {
    let (_, tail) = text
        .rsplit_once("o200k_base tokens: ")
        .unwrap_or_else(|| panic!("no token summary in {text}"));
    let numbers: Vec<u64> = tail
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse().unwrap())
        .collect();
    // `200` of o200k_base is before the cut; the rest are six figures: returned, in tool
    // results and saved, for the execution and for the session.
    assert_eq!(numbers.len(), 6, "{tail}");
    assert_eq!(numbers[2], numbers[1].saturating_sub(numbers[0]), "{tail}");
    assert_eq!(numbers[5], numbers[4].saturating_sub(numbers[3]), "{tail}");
    (numbers[0], numbers[1], numbers[3], numbers[4])
}

#[tokio::test]
async fn the_summary_counts_tokens_and_runbyte_stats_adds_them_up() {
    let dir = TempDir::new("tokens");
    dir.write(
        "runbyte.toml",
        &config_with("[server]\naudit-log = \"audit.jsonl\"\nsummary = \"full\"\n"),
    );
    let messages = [
        "The quick brown fox jumps over the lazy dog.".to_owned(),
        "Ünïcödé ✓ text — with dashes, 12345 and {\"json\": [1, 2]}".to_owned(),
        "a longer message that a program reads and drops; ".repeat(60),
    ];
    let in_results: u64 = messages.iter().map(|m| tokens::count(m).tokens).sum();
    let program = format!(
        r#"
        import {{ echo }} from './servers/demo';
        const messages = {};
        let read = 0;
        for (const message of messages) {{
          read += (await echo({{ message }})).length;
        }}
        export default messages.length;
        "#,
        serde_json::to_string(&messages).unwrap()
    );

    let client = client(&dir).await;
    let (first, error) = call(&client, "execute_code", json!({ "code": program })).await;
    assert!(!error, "{first}");
    let (returned, consumed, session_returned, session_consumed) = figures(&first);
    assert_eq!(consumed, in_results, "{first}");
    // The answer is `3` and its console is empty: one token.
    assert_eq!(returned, tokens::count("3").tokens, "{first}");
    assert!(consumed >= returned);
    assert_eq!((session_returned, session_consumed), (returned, consumed));

    let (second, error) = call(&client, "execute_code", json!({ "code": program })).await;
    assert!(!error, "{second}");
    let (_, _, session_returned, session_consumed) = figures(&second);
    assert_eq!(
        (session_returned, session_consumed),
        (2 * returned, 2 * consumed)
    );
    client.cancel().await.unwrap();

    let stats = run(dir.path(), &["stats"]);
    assert_eq!(stats.code, Some(0), "{stats:?}");
    for line in [
        "executions: 2 (0 failed)".to_owned(),
        "tool calls: 6 (0 failed)".to_owned(),
        "tokens (o200k_base), over 2 counted executions:".to_owned(),
        format!("returned to the model: {}", 2 * returned),
        format!("in the tool results programs read: {}", 2 * consumed),
        format!("saved: {}", 2 * (consumed - returned)),
    ] {
        assert!(
            stats.stdout.contains(&line),
            "{line:?} not in\n{}",
            stats.stdout
        );
    }
    let demo = stats
        .stdout
        .lines()
        .find(|line| line.starts_with("demo "))
        .unwrap_or_else(|| panic!("no demo line in\n{}", stats.stdout));
    let columns: Vec<&str> = demo.split_whitespace().collect();
    assert_eq!(columns, ["demo", "6", "0", &(2 * consumed).to_string()]);

    let missing = run(dir.path(), &["stats", "--audit", "nowhere.jsonl"]);
    assert_ne!(missing.code, Some(0));
    assert!(
        missing.stderr.contains("nowhere.jsonl"),
        "{}",
        missing.stderr
    );
}

/// The default (lean) answer says only the calls made, and those that failed; its time and its
/// tokens are in `_meta` (`runbyte/execution`), where a client or a harness reads them, and
/// the same program under `summary = "full"` costs the model more tokens for each answer.
#[tokio::test]
async fn the_lean_answer_keeps_its_account_in_meta_and_costs_fewer_tokens() {
    let program = r#"
        import { echo } from './servers/demo';
        const a = await echo({ message: 'one' });
        export default a.length;
    "#;
    let mut answers = Vec::new();
    for summary in ["lean", "full"] {
        let dir = TempDir::new("tokens-lean");
        dir.write(
            "runbyte.toml",
            &config_with(&format!("[server]\nsummary = \"{summary}\"\n")),
        );
        let client = client(&dir).await;
        let result = call_full(&client, "execute_code", json!({ "code": program })).await;
        client.cancel().await.unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let text = result.content[0].as_text().unwrap().text.clone();
        let account = result
            .meta
            .as_ref()
            .and_then(|meta| meta.0.get("runbyte/execution"))
            .unwrap_or_else(|| panic!("no runbyte/execution in the _meta of {result:?}"))
            .clone();
        assert_eq!(account["toolCalls"], 1, "{account}");
        assert_eq!(account["failedCalls"], 0, "{account}");
        assert!(account["durationMs"].is_u64(), "{account}");
        assert_eq!(account["tokens"]["encoding"], "o200k_base", "{account}");
        assert_eq!(
            account["tokens"]["execution"]["inToolResults"]["tokens"],
            tokens::count("one").tokens,
            "{account}"
        );
        answers.push(text);
    }
    let (lean, full) = (&answers[0], &answers[1]);
    assert_eq!(lean, "3\n--- 1 tool call ---");
    assert!(
        full.starts_with("3\n--- ") && full.contains(" ms · 1 tool call · 0 failed · "),
        "{full}"
    );
    let (lean_tokens, full_tokens) = (tokens::count(lean).tokens, tokens::count(full).tokens);
    assert!(lean_tokens < full_tokens, "{lean_tokens} vs {full_tokens}");
    eprintln!("tokens per answer: lean {lean_tokens}, full {full_tokens}");
}
