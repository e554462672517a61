//! `runbyte setup CLIENT` against sample configuration files of each client (two servers each,
//! in the client's real format), and `runbyte doctor` on a good and a broken machine. The real
//! binary, with HOME, XDG_CONFIG_HOME, XDG_STATE_HOME and APPDATA pointing into a temporary
//! folder.

use std::{path::Path, process::Command};

use runbyte_tests::{Output, TempDir, build_dir, runbyte, test_server};
use serde_json::{Value, json};

/// Runs `runbyte` in `dir` as if `dir/home` were the user's home, with `env` set too.
fn run_home(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = dir.join("home");
    let mut command = Command::new(runbyte());
    command
        .args(args)
        .current_dir(dir)
        .env_remove("RUNBYTE_CONFIG")
        .env_remove("RUNBYTE_LAUNCH")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("RUNBYTE_LOG", "warn")
        .env("HOME", &home)
        .env("USERPROFILE", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("APPDATA", home.join("AppData/Roaming"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_DATA_HOME", dir.join("data"));
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A client's sample file: its text, and the servers `--move-servers` must leave in it.
struct Sample {
    client: &'static str,
    file: &'static str,
    key: &'static str,
    text: String,
    stays: &'static [&'static str],
}

/// A port nothing listens on: the moved HTTP servers are read, and fail to connect.
const NOWHERE: &str = "http://127.0.0.1:9/mcp";

fn samples() -> Vec<Sample> {
    let server = test_server().display().to_string();
    let server = serde_json::to_string(&server).unwrap();
    vec![
        Sample {
            client: "claude-desktop",
            file: "claude_desktop_config.json",
            key: "mcpServers",
            // Claude Desktop reaches remote servers through mcp-remote.
            text: format!(
                r#"{{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {{
    "local": {{
      "command": {server},
      "args": [],
      "env": {{ "GREETING": "price: ${{5}}" }}
    }},
    "remote": {{
      "command": "npx",
      "args": ["-y", "mcp-remote", "{NOWHERE}", "--header", "Authorization: Bearer abc"]
    }}
  }}
}}
"#
            ),
            stays: &[],
        },
        Sample {
            client: "claude-code",
            file: ".claude.json",
            key: "mcpServers",
            text: format!(
                r#"{{
  "numStartups": 12,
  "projects": {{
    "/home/ada/src": {{
      "mcpServers": {{}},
      "allowedTools": []
    }}
  }},
  "mcpServers": {{
    "local": {{
      "type": "stdio",
      "command": {server},
      "args": [],
      "env": {{ "HOME_TOO": "${{HOME}}" }}
    }},
    "remote": {{
      "type": "http",
      "url": "{NOWHERE}",
      "headers": {{ "Authorization": "Bearer abc" }}
    }}
  }},
  "userID": "0123abcd"
}}
"#
            ),
            stays: &[],
        },
        Sample {
            client: "cursor",
            file: "mcp.json",
            key: "mcpServers",
            text: format!(
                "{{\n  \"mcpServers\": {{\n    \"local\": {{\n      \"command\": {server},\n      \"args\": []\n    }},\n    \"remote\": {{\n      \"url\": \"{NOWHERE}\",\n      \"headers\": {{ \"Authorization\": \"Bearer ${{env:HOME}}\" }}\n    }}\n  }}\n}}\n"
            ),
            stays: &[],
        },
        Sample {
            client: "vscode",
            file: "mcp.json",
            key: "servers",
            // JSONC: comments, and a server that asks VS Code for its key (it stays).
            text: format!(
                r#"{{
  // Servers for Copilot's agent mode.
  "servers": {{
    "local": {{
      "type": "stdio",
      "command": {server},
      "args": []
    }},
    /* a remote one */
    "remote": {{
      "type": "http",
      "url": "{NOWHERE}"
    }},
    "asks": {{
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@acme/mcp"],
      "env": {{ "ACME_KEY": "${{input:acme-key}}" }}
    }}
  }},
  "inputs": [
    {{ "type": "promptString", "id": "acme-key", "description": "Acme key", "password": true }}
  ]
}}
"#
            ),
            stays: &["asks"],
        },
        Sample {
            client: "windsurf",
            file: "mcp_config.json",
            key: "mcpServers",
            text: format!(
                "{{\n  \"mcpServers\": {{\n    \"local\": {{\n      \"command\": {server},\n      \"args\": [],\n      \"disabled\": false,\n      \"env\": {{}}\n    }},\n    \"remote\": {{\n      \"serverUrl\": \"{NOWHERE}\"\n    }}\n  }}\n}}\n"
            ),
            stays: &[],
        },
    ]
}

/// JSON with `//` line comments and `/* */` comments on lines of their own, as the VS Code
/// sample has them, read strictly once they are dropped.
fn read_json(text: &str) -> Value {
    let stripped: String = text
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            !line.starts_with("//") && !line.starts_with("/*")
        })
        .map(|line| format!("{line}\n"))
        .collect();
    serde_json::from_str(&stripped).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

/// Everything but the servers key.
fn others(document: &Value, key: &str) -> Value {
    let mut document = document.clone();
    document.as_object_mut().unwrap().remove(key);
    document
}

#[test]
fn setup_moves_each_clients_servers_behind_runbyte_and_undo_restores_every_byte() {
    for sample in samples() {
        let dir = TempDir::new(&format!("setup-{}", sample.client));
        let file = dir.write(sample.file, &sample.text);
        #[cfg(unix)]
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap();
        let toml = dir.path().join("conf/runbyte.toml");
        let (file_arg, toml_arg) = (file.to_str().unwrap(), toml.to_str().unwrap());
        let args = [
            "setup",
            sample.client,
            "--config-file",
            file_arg,
            "--runbyte-config",
            toml_arg,
            "--move-servers",
        ];
        let launch: &[(&str, &str)] = if sample.client == "claude-desktop" {
            &[("RUNBYTE_LAUNCH", "npx -y runbyte")]
        } else {
            &[]
        };
        let label = sample.client;

        // --dry-run: a diff of both files, nothing changed.
        let mut dry: Vec<&str> = args.to_vec();
        dry.push("--dry-run");
        let shown = run_home(dir.path(), &dry, launch);
        assert_eq!(shown.code, Some(0), "{label}: {shown:?}");
        assert!(
            shown.stdout.contains(&format!("+++ {file_arg}"))
                && shown.stdout.contains(&format!("+++ {toml_arg}"))
                && shown.stdout.contains("+    \"runbyte\": {")
                && shown.stdout.contains("+[servers.local]")
                && shown.stdout.contains("dry run: nothing was changed"),
            "{label}: {}",
            shown.stdout
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), sample.text);
        assert!(!toml.exists(), "{label}: the dry run wrote runbyte.toml");

        // The real run.
        let done = run_home(dir.path(), &args, launch);
        assert_eq!(done.code, Some(0), "{label}: {done:?}");
        assert!(
            done.stdout.contains("moved 2 server(s)"),
            "{label}: {}",
            done.stdout
        );
        let after = std::fs::read_to_string(&file).unwrap();
        let document = read_json(&after);
        let before = read_json(&sample.text);
        assert_eq!(
            others(&document, sample.key),
            others(&before, sample.key),
            "{label}: the other keys changed:\n{after}"
        );
        let servers = document[sample.key].as_object().unwrap();
        let mut names: Vec<&str> = servers.keys().map(String::as_str).collect();
        names.sort();
        let mut expected: Vec<&str> = sample.stays.iter().copied().chain(["runbyte"]).collect();
        expected.sort();
        assert_eq!(names, expected, "{label}:\n{after}");
        for stays in sample.stays {
            assert_eq!(servers[*stays], before[sample.key][*stays], "{label}");
        }
        let (command, mut args_expected) = match sample.client {
            "claude-desktop" => ("npx".to_owned(), vec![json!("-y"), json!("runbyte")]),
            _ => (
                runbyte().canonicalize().unwrap().display().to_string(),
                vec![],
            ),
        };
        args_expected.extend([json!("serve"), json!("--config"), json!(toml_arg)]);
        let mut entry = json!({ "command": command, "args": args_expected });
        if matches!(sample.client, "claude-code" | "vscode") {
            entry = json!({ "type": "stdio", "command": command, "args": entry["args"] });
        }
        assert_eq!(servers["runbyte"], entry, "{label}:\n{after}");
        if sample.client == "vscode" {
            assert!(
                after.contains("// Servers for Copilot's agent mode."),
                "{label}: the comment was lost:\n{after}"
            );
            assert!(
                done.stdout.contains("left `asks`"),
                "{label}: {}",
                done.stdout
            );
        } else {
            // The others were strict JSON and stay so.
            serde_json::from_str::<Value>(&after).unwrap();
        }
        #[cfg(unix)]
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&file).unwrap().permissions()
            ) & 0o777,
            0o640,
            "{label}: the client's file lost its mode"
        );

        // The servers are in runbyte.toml, as Runbyte reads them.
        let config = runbyte_core::config::Config::load(&toml).unwrap();
        let local = &config.servers["local"];
        assert_eq!(
            local.command.as_deref(),
            Some(test_server().to_str().unwrap()),
            "{label}"
        );
        let remote = &config.servers["remote"];
        assert_eq!(remote.url.as_deref(), Some(NOWHERE), "{label}");
        match sample.client {
            "claude-desktop" => {
                // Claude Desktop fills nothing in: `${5}` stays literal text.
                assert_eq!(local.env["GREETING"], "price: ${5}", "{label}");
                assert_eq!(remote.headers["Authorization"], "Bearer abc", "{label}");
            }
            "claude-code" => {
                // `${HOME}` is Runbyte's as it was Claude Code's: expanded as the file loads.
                assert_eq!(
                    local.env["HOME_TOO"],
                    std::env::var("HOME").unwrap(),
                    "{label}"
                );
                assert_eq!(remote.transport.as_deref(), Some("http"), "{label}");
            }
            "cursor" => {
                // Cursor's `${env:HOME}` became Runbyte's `${HOME}`.
                let bearer = format!("Bearer {}", std::env::var("HOME").unwrap());
                assert_eq!(remote.headers["Authorization"], bearer, "{label}");
            }
            _ => {}
        }
        // `runbyte check` loads it and starts what it can: the moved stdio server starts, the
        // HTTP one is tried (nothing listens there).
        let checked = run_home(dir.path(), &["check", "--config", toml_arg], &[]);
        assert!(
            checked.stdout.contains(&format!("config   {toml_arg}  OK")),
            "{label}: {checked:?}"
        );
        assert!(
            checked
                .stdout
                .lines()
                .any(|line| line.starts_with("server   local") && line.contains(" OK ")),
            "{label}: {}",
            checked.stdout
        );
        assert!(
            checked
                .stdout
                .lines()
                .any(|line| line.starts_with("server   remote") && line.contains("FAILED")),
            "{label}: {}",
            checked.stdout
        );

        // A second run changes nothing and says so.
        let toml_text = std::fs::read(&toml).unwrap();
        let again = run_home(dir.path(), &args, launch);
        assert_eq!(again.code, Some(0), "{label}: {again:?}");
        assert!(
            again.stdout.contains("nothing to change"),
            "{label}: {}",
            again.stdout
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), after, "{label}");
        assert_eq!(std::fs::read(&toml).unwrap(), toml_text, "{label}");

        // --undo restores the client's file byte for byte and removes the runbyte.toml setup
        // created.
        let undone = run_home(dir.path(), &["setup", "--undo", sample.client], &[]);
        assert_eq!(undone.code, Some(0), "{label}: {undone:?}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            sample.text.as_bytes(),
            "{label}"
        );
        assert!(!toml.exists(), "{label}: {}", undone.stdout);
        assert!(
            !toml.parent().unwrap().exists(),
            "{label}: the folder setup made for runbyte.toml is left: {}",
            undone.stdout
        );
        // Nothing is left to undo.
        let nothing = run_home(dir.path(), &["setup", "--undo", sample.client], &[]);
        assert_ne!(nothing.code, Some(0), "{label}: {nothing:?}");
        assert!(
            nothing.stderr.contains("no `runbyte setup`"),
            "{label}: {nothing:?}"
        );
    }
}

#[test]
fn a_name_already_in_runbyte_toml_stops_setup_and_an_edit_since_setup_stops_undo() {
    let dir = TempDir::new("setup-collision");
    let sample = &samples()[2];
    let file = dir.write("mcp.json", &sample.text);
    let toml = dir.write(
        "runbyte.toml",
        "# mine\n[servers.remote]\nurl = \"https://elsewhere.example/mcp\"\n",
    );
    let toml_text = std::fs::read_to_string(&toml).unwrap();
    let (file_arg, toml_arg) = (file.to_str().unwrap(), toml.to_str().unwrap());
    let args = [
        "setup",
        "cursor",
        "--config-file",
        file_arg,
        "--runbyte-config",
        toml_arg,
    ];
    let mut moving = args.to_vec();
    moving.push("--move-servers");
    let refused = run_home(dir.path(), &moving, &[]);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains("server `remote`")
            && refused.stderr.contains(file_arg)
            && refused.stderr.contains(toml_arg)
            && refused.stderr.contains("nothing was changed"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), sample.text);
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), toml_text);

    // Without --move-servers only the entry is added; the comment and table of runbyte.toml
    // are untouched (it is not written at all). The global --config names the runbyte.toml
    // as --runbyte-config does.
    let added = run_home(
        dir.path(),
        &[
            "--config",
            toml_arg,
            "setup",
            "cursor",
            "--config-file",
            file_arg,
        ],
        &[],
    );
    assert_eq!(added.code, Some(0), "{added:?}");
    assert!(added.stdout.contains("2 other server(s)"), "{added:?}");
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), toml_text);
    let document = read_json(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(document["mcpServers"].as_object().unwrap().len(), 3);
    assert_eq!(
        document["mcpServers"]["runbyte"]["args"],
        json!(["serve", "--config", toml_arg])
    );
    let again = run_home(dir.path(), &args, &[]);
    assert!(again.stdout.contains("nothing to change"), "{again:?}");

    // The client changes the file since: undo refuses, then --force restores.
    let changed = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"local\"", "\"local2\"");
    std::fs::write(&file, &changed).unwrap();
    let refused = run_home(dir.path(), &["setup", "--undo"], &[]);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains("changed since") && refused.stderr.contains(file_arg),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), changed);
    let forced = run_home(dir.path(), &["setup", "--undo", "--force"], &[]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), sample.text);
}

/// Setup at the client's usual place (no --config-file), then doctor on that machine.
#[test]
fn doctor_reports_a_good_machine_ok_and_says_what_to_do_on_a_broken_one() {
    let dir = TempDir::new("doctor");
    let home = dir.path().join("home");
    let cursor = home.join(".cursor/mcp.json");
    std::fs::create_dir_all(cursor.parent().unwrap()).unwrap();
    // A dotfiles manager's link: the file it leads to is edited, the link stays. An older
    // entry that starts Runbyte under another name is pointed out, and left.
    let dotfiles = dir.path().join("dotfiles/mcp.json");
    std::fs::create_dir_all(dotfiles.parent().unwrap()).unwrap();
    let old = format!(
        "\"mcpServers\": {{\n    \"old\": {{ \"command\": {:?}, \"args\": [\"serve\"] }},",
        runbyte().display().to_string()
    );
    let text = samples()[2].text.replace("\"mcpServers\": {", &old);
    std::fs::write(&dotfiles, text).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&dotfiles, &cursor).unwrap();
    #[cfg(not(unix))]
    std::fs::copy(&dotfiles, &cursor).unwrap();
    let user_toml = home.join(".config/runbyte/runbyte.toml");

    let done = run_home(dir.path(), &["setup", "cursor"], &[]);
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(user_toml.is_file(), "{done:?}");
    #[cfg(unix)]
    {
        assert!(std::fs::symlink_metadata(&cursor).unwrap().is_symlink());
        assert!(
            done.stdout
                .contains(&format!("{} starts Runbyte", dotfiles.display())),
            "{done:?}"
        );
        assert!(
            std::fs::read_to_string(&dotfiles)
                .unwrap()
                .contains("\"runbyte\": {"),
            "{done:?}"
        );
    }
    assert!(
        done.stdout.contains("`old` in Cursor starts Runbyte too"),
        "{done:?}"
    );

    // No --config and no ./runbyte.toml: the user's own file, which setup made.
    let doctor = run_home(dir.path(), &["doctor"], &[]);
    assert_eq!(doctor.code, Some(0), "{doctor:?}");
    let said = &doctor.stdout;
    let line = |prefix: &str| {
        said.lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{said}"))
            .to_owned()
    };
    assert!(
        line("binary   OK").contains(env!("CARGO_PKG_VERSION")),
        "{said}"
    );
    assert!(
        line("config   OK").contains(&user_toml.display().to_string())
            && line("config   OK").contains("the user's own"),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("plugin   OK")
            && l.contains("transport stdio")
            && l.contains("(ABI ")),
        "{said}"
    );
    assert!(line("server   OK").contains("demo"), "{said}");
    assert!(
        said.lines().any(|l| l.starts_with("client   OK   Cursor")
            && l.contains("as `runbyte`")
            && l.contains(&user_toml.display().to_string())),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("client   OK   Cursor")
            && l.contains("as `old`")
            && l.contains("the default configuration")),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("client   WARN Cursor")
            && l.contains("bypass Runbyte: local, remote")
            && l.contains("--move-servers")),
        "{said}"
    );
    assert!(
        line("client   --   Claude Desktop").contains("runbyte setup claude-desktop"),
        "{said}"
    );
    assert!(said.lines().any(|l| l.starts_with("all OK")), "{said}");

    // A broken plugin folder and a client whose runbyte.toml is gone.
    let broken = dir.path().join("broken-plugins");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join(format!(
            "{}runbyte_transport_bogus{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        )),
        "not a library",
    )
    .unwrap();
    let config = dir.write(
        "runbyte.toml",
        &format!(
            "[plugins]\ndirs = [{:?}, {:?}, \"missing\"]\n",
            build_dir().display().to_string(),
            broken.display().to_string()
        ),
    );
    std::fs::remove_file(&user_toml).unwrap();
    let doctor = run_home(dir.path(), &["doctor"], &[]);
    assert_eq!(doctor.code, Some(1), "{doctor:?}");
    let said = &doctor.stdout;
    assert!(
        said.lines().any(|l| l.starts_with("config   OK")
            && l.contains(&config.display().to_string())
            && l.contains("this folder's")),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("plugin   FAIL")
            && l.contains("runbyte_transport_bogus")
            && l.contains("remove it from the plugin folder")),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("client   FAIL Cursor")
            && l.contains("does not load")
            && l.contains(&user_toml.display().to_string())),
        "{said}"
    );
    assert!(
        said.lines().any(|l| l.starts_with("plugins  WARN")
            && l.contains(&dir.path().join("missing").display().to_string())
            && l.contains("is not a folder")),
        "{said}"
    );
    assert!(said.contains("problem(s) to fix"), "{said}");

    // A configuration that does not parse: its file and line, and the rest is still checked.
    dir.write("runbyte.toml", "[server]\nlisten = \n");
    let doctor = run_home(dir.path(), &["doctor"], &[]);
    assert_eq!(doctor.code, Some(1), "{doctor:?}");
    assert!(
        doctor
            .stdout
            .lines()
            .any(|l| l.starts_with("config   FAIL")
                && l.contains(&format!("{}:2", config.display()))),
        "{doctor:?}"
    );
    assert!(doctor.stdout.contains("client   "), "{doctor:?}");
}
