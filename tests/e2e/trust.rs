//! Files that hold secrets: a token file others may read is refused, the audit log is private.

use std::os::unix::fs::PermissionsExt;

use runbyte_tests::{TempDir, config_with, free_port, run, runbyte};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A folder whose `runbyte.toml` names a token file others may read (mode 0644).
fn with_readable_token(label: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(label);
    let token = dir.write("token", "0123456789abcdef0123456789abcdef\n");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    dir.write(
        "runbyte.toml",
        &config_with(&format!(
            "[server]\nauth-token-file = {:?}\n",
            token.display().to_string()
        )),
    );
    (dir, token)
}

#[test]
fn serve_refuses_a_token_file_others_may_read() {
    let (dir, token) = with_readable_token("trust-token");
    let bind = format!("127.0.0.1:{}", free_port());
    // Accepted, the token would have Runbyte serve until killed: give it ten seconds.
    let mut serve = std::process::Command::new(runbyte())
        .args(["serve", "--listen", "http", "--bind", &bind])
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env_remove("RUNBYTE_CONFIG")
        .env("RUNBYTE_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while serve.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = serve.kill();
    let served = serve.wait_with_output().unwrap();
    let served = runbyte_tests::Output {
        code: served.status.code(),
        stdout: String::from_utf8_lossy(&served.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&served.stderr).into_owned(),
    };
    assert_eq!(served.code, Some(1), "{served:?}");
    assert!(
        served.stderr.contains(&format!(
            "the token file {} is open to other users (mode 0644)",
            token.display()
        )) && served
            .stderr
            .contains(&format!("chmod 600 {}", token.display())),
        "{}",
        served.stderr
    );
    // Left as it was: fixing the mode is the operator's call (the token may have been read).
    assert_eq!(mode(&token), 0o644);
}

#[test]
fn the_audit_log_is_created_owner_only() {
    let dir = TempDir::new("trust-audit");
    let log = dir.path().join("audit.jsonl");
    dir.write(
        "runbyte.toml",
        &config_with(&format!(
            "[server]\naudit-log = {:?}\n",
            log.display().to_string()
        )),
    );
    let program = dir.write(
        "p.ts",
        "import { search_issues } from './servers/demo';\nexport default (await search_issues({ query: 'crash' })).issues.length;\n",
    );
    let ran = run(dir.path(), &["exec", program.to_str().unwrap()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("search_issues")
    );
    assert_eq!(mode(&log), 0o600);
}

#[test]
fn check_reports_a_token_file_others_may_read() {
    let (dir, token) = with_readable_token("trust-token-check");
    let checked = run(dir.path(), &["check"]);
    assert_eq!(checked.code, Some(1), "{checked:?}");
    assert!(
        checked.stdout.contains("token    FAILED")
            && checked
                .stdout
                .contains("is open to other users (mode 0644)"),
        "{}",
        checked.stdout
    );
    // The token itself is never printed.
    assert!(
        !checked.stdout.contains("0123456789abcdef"),
        "{}",
        checked.stdout
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let checked = run(dir.path(), &["check"]);
    assert!(checked.stdout.contains("token    "), "{}", checked.stdout);
    assert!(
        !checked.stdout.contains("token    FAILED"),
        "{}",
        checked.stdout
    );
}
