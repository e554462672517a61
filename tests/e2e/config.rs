//! Configuration errors through the command line: each names the file and the key.

use runbyte_tests::{TempDir, config_with, run};

fn check_fails_with(label: &str, text: &str, expected: &[&str]) {
    let dir = TempDir::new(label);
    let file = dir.write("runbyte.toml", text);
    let checked = run(dir.path(), &["check"]);
    assert_ne!(checked.code, Some(0), "{label}: {checked:?}");
    for part in expected {
        assert!(
            checked.stderr.contains(part),
            "{label}: expected {part:?} in {}",
            checked.stderr
        );
    }
    assert!(
        checked.stderr.contains(&file.display().to_string()),
        "{label}: {}",
        checked.stderr
    );
}

#[test]
fn config_errors_name_the_file_the_line_and_the_key() {
    check_fails_with(
        "unknown-key",
        &config_with("[server]\nlisten = \"stdio\"\nlisen = \"http\"\n"),
        &["`server.lisen`", "unknown field `lisen`"],
    );
    check_fails_with(
        "wrong-type",
        &config_with("[sandbox]\nworkers = \"four\"\n"),
        &["invalid type"],
    );
    check_fails_with(
        "missing-var",
        &config_with("[servers.x]\ncommand = \"${RUNBYTE_E2E_UNSET_VARIABLE}\"\n"),
        &[
            "`servers.x.command`",
            "`RUNBYTE_E2E_UNSET_VARIABLE` is not set",
        ],
    );
    check_fails_with(
        "bad-include",
        &config_with("[servers]\ninclude = \"nowhere.json\"\n"),
        &["`servers.include`", "nowhere.json"],
    );
}

#[test]
fn import_prints_servers_that_load_back() {
    let dir = TempDir::new("import");
    let file = dir.write(
        "claude_desktop_config.json",
        r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}, "remote": {"url": "https://example.com/sse", "type": "sse"}}}"#,
    );
    let imported = run(dir.path(), &["import", file.to_str().unwrap()]);
    assert_eq!(imported.code, Some(0), "{imported:?}");
    assert!(
        imported.stdout.contains("[servers.time]"),
        "{}",
        imported.stdout
    );
    let reread = runbyte_core::config::Config::parse(
        &imported.stdout,
        dir.path().join("x.toml").as_path(),
        dir.path(),
    )
    .unwrap();
    assert_eq!(reread.servers["remote"].transport.as_deref(), Some("sse"));
}

/// A `[sandbox.limits]` value out of range stops `runbyte check`, naming the key and the range
/// (the one range table, plugin-api's `wire::RANGES`, which the host holds policies to as well).
#[test]
fn a_limit_out_of_range_is_refused_with_its_range() {
    for (line, expected) in [
        (
            "stack-kb = 16",
            "`sandbox.limits.stack-kb = 16` is out of range: it must be 64 to 524288 (KiB)",
        ),
        (
            "memory-mb = 0",
            "`sandbox.limits.memory-mb = 0` is out of range: it must be 1 to 65536 (MiB)",
        ),
    ] {
        let dir = TempDir::new("limit-range");
        dir.write(
            "runbyte.toml",
            &config_with(&format!("[sandbox.limits]\n{line}\n")),
        );
        let checked = run(dir.path(), &["check"]);
        assert_ne!(checked.code, Some(0), "{line}: {checked:?}");
        assert!(
            checked.stderr.contains(expected) || checked.stdout.contains(expected),
            "{line}: expected {expected:?} in {checked:?}"
        );
    }
}
