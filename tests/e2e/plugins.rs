//! Plugins through real dlopen: the bundled ones load, and each way a plugin can be wrong gives
//! its own typed error while the host keeps running.

use runbyte_core::plugin::{self, CallError, PluginError, PluginSearch};
use runbyte_plugin_api::PluginKind;
use runbyte_tests::{TempDir, build_dir, config_with, library, run};
use serde_json::json;

fn search_with(paths: &[std::path::PathBuf]) -> PluginSearch {
    let loads: String = paths
        .iter()
        .map(|p| format!("[[plugins.load]]\npath = {:?}\n", p.display().to_string()))
        .collect();
    let text = format!(
        "[plugins]\ndirs = [{:?}]\n{loads}",
        build_dir().display().to_string()
    );
    let config =
        runbyte_core::config::Config::parse(&text, std::path::Path::new("test.toml"), &build_dir())
            .unwrap();
    PluginSearch::from_config(&config)
}

/// After any refusal, the host still loads and calls a good plugin.
fn host_still_works() {
    let policy =
        plugin::open_policy(&search_with(&[]), "limits", &json!({"timeout-ms": 1000})).unwrap();
    assert_eq!(
        policy.limits(&json!({})).unwrap(),
        json!({"timeout-ms": 1000})
    );
}

#[test]
fn every_bundled_plugin_loads_and_reports_its_descriptor() {
    let search = search_with(&[]);
    let bundled = [
        (PluginKind::Transport, "stdio"),
        (PluginKind::Transport, "http"),
        (PluginKind::Transport, "sse"),
        (PluginKind::Codegen, "typescript"),
        (PluginKind::Codegen, "jsdoc"),
        (PluginKind::Policy, "limits"),
    ];
    for (kind, name) in bundled {
        let info = search.find(kind, name).unwrap();
        assert_eq!(info.name, name);
        assert_eq!(info.kind, Some(kind));
        assert_eq!(info.api_version, runbyte_plugin_api::PLUGIN_API_VERSION);
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
        plugin::open_any(&info, &json!({})).unwrap();
    }
    let dir = TempDir::new("plugins-cmd");
    dir.write("runbyte.toml", &config_with(""));
    let listed = run(dir.path(), &["plugins"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    for (kind, name) in bundled {
        let line = listed
            .stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_default();
        assert!(line.starts_with(kind.as_str()), "{name}: {}", listed.stdout);
        assert!(
            line.contains(&PluginSearch::file_name(kind, name)),
            "{line}"
        );
    }
}

#[test]
fn an_incompatible_api_version_is_refused_showing_both_versions() {
    let path = library("libfixture_plugin_wrong_version");
    let error = plugin::open_policy(
        &search_with(std::slice::from_ref(&path)),
        "oldapi",
        &json!({}),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            error,
            PluginError::IncompatibleVersion {
                found: 0,
                expected: 1,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("`oldapi`") && message.contains(&path.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("version 0") && message.contains("version 1"),
        "{message}"
    );
    host_still_works();
}

#[test]
fn a_plugin_of_the_wrong_kind_is_refused() {
    let path = library("libfixture_plugin_wrong_kind");
    let error = plugin::open_transport(&search_with(&[path]), "wrongkind", &json!({}))
        .err()
        .unwrap();
    assert!(
        matches!(&error, PluginError::WrongKind { found, expected: PluginKind::Transport, .. } if found == "policy"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("is a policy plugin, but is configured as a transport plugin"),
        "{error}"
    );
    host_still_works();
}

#[test]
fn a_panic_in_any_entry_point_becomes_an_error_naming_the_plugin() {
    let search = search_with(&[library("libfixture_plugin_panics")]);
    let error = plugin::open_policy(&search, "panics", &json!({"panic-on-open": true}))
        .err()
        .unwrap();
    assert!(matches!(error, PluginError::Panicked { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("plugin `panics` panicked in `open`: deliberate panic in open"),
        "{error}"
    );
    let policy = plugin::open_policy(&search, "panics", &json!({})).unwrap();
    for _ in 0..3 {
        let error = policy.limits(&json!({})).unwrap_err();
        assert!(matches!(error, CallError::Panicked { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("plugin `panics` panicked in `limits`"),
            "{error}"
        );
        let error = policy.check_call(&json!({})).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("panicked in `check_call`: deliberate panic in check_call"),
            "{error}"
        );
    }
    host_still_works();
}

#[test]
fn a_plugins_own_error_and_bad_answers_are_reported_as_such() {
    let search = search_with(&[library("libfixture_plugin_fails")]);
    let error = plugin::open_policy(&search, "fails", &json!({}))
        .err()
        .unwrap();
    assert!(matches!(error, PluginError::Failed { .. }), "{error:?}");
    assert!(
        error.to_string().contains("`fails`")
            && error.to_string().contains("refuses every configuration"),
        "{error}"
    );
    let policy = plugin::open_policy(&search, "fails", &json!({"accept": true})).unwrap();
    let error = policy.limits(&json!({})).unwrap_err();
    assert!(
        matches!(error, CallError::Failed { .. }) && error.to_string().contains("no limits today"),
        "{error}"
    );
    let error = policy.check_call(&json!({})).unwrap_err();
    assert!(
        matches!(error, CallError::BadAnswer { .. }) && error.to_string().contains("invalid JSON"),
        "{error}"
    );
    host_still_works();
}

#[test]
fn files_that_are_not_plugins_are_refused_by_name() {
    let not_plugin = library("libfixture_plugin_not_a_plugin");
    let error = plugin::read_descriptor(&not_plugin).err().unwrap();
    assert!(matches!(error, PluginError::NotAPlugin { .. }), "{error:?}");
    assert!(
        error.to_string().contains("RUNBYTE_PLUGIN_DESCRIPTOR"),
        "{error}"
    );

    let dir = TempDir::new("not-a-library");
    let text = dir.write(
        "librunbyte_policy_text.so",
        "this is a text file, not a library\n",
    );
    let error = plugin::read_descriptor(&text).err().unwrap();
    assert!(
        matches!(error, PluginError::NotALibrary { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("is not a shared library"),
        "{error}"
    );

    let error = plugin::read_descriptor(&dir.path().join("missing.so"))
        .err()
        .unwrap();
    assert!(matches!(error, PluginError::Missing { .. }), "{error:?}");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let writable = dir.path().join("librunbyte_policy_open.so");
        std::fs::copy(library("librunbyte_policy_limits"), &writable).unwrap();
        std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = plugin::read_descriptor(&writable).err().unwrap();
        assert!(
            matches!(error, PluginError::WorldWritable { .. }),
            "{error:?}"
        );
    }
    host_still_works();
}

#[test]
fn a_plugin_not_found_lists_the_places_searched() {
    let error = plugin::open_codegen(&search_with(&[]), "cobol", &json!({}))
        .err()
        .unwrap();
    let message = error.to_string();
    assert!(
        message.contains("codegen plugin `cobol` not found"),
        "{message}"
    );
    assert!(message.contains("librunbyte_codegen_cobol.so"), "{message}");
    assert!(
        message.contains(&build_dir().display().to_string()),
        "{message}"
    );
}

#[test]
fn check_reports_each_bad_plugin_and_exits_non_zero() {
    let dir = TempDir::new("check-bad");
    let cases = [
        (
            "libfixture_plugin_wrong_version",
            "[sandbox]\npolicy = [\"limits\", \"oldapi\"]\n",
            "plugin API version 0",
        ),
        (
            "libfixture_plugin_wrong_kind",
            "[servers.odd]\nurl = \"http://127.0.0.1:1/mcp\"\ntransport = \"wrongkind\"\n",
            "is a policy plugin",
        ),
        (
            "libfixture_plugin_panics",
            "[sandbox]\npolicy = [\"limits\", \"panics\"]\n[sandbox.panics]\npanic-on-open = true\n",
            "panicked in `open`",
        ),
        (
            "libfixture_plugin_fails",
            "[sandbox]\npolicy = [\"limits\", \"fails\"]\n",
            "refuses every configuration",
        ),
        (
            "libfixture_plugin_not_a_plugin",
            "",
            "is not a Runbyte plugin",
        ),
    ];
    for (stem, extra, expected) in cases {
        let load = format!(
            "[[plugins.load]]\npath = {:?}\n",
            library(stem).display().to_string()
        );
        dir.write("runbyte.toml", &config_with(&format!("{load}{extra}")));
        let checked = run(dir.path(), &["check"]);
        assert_ne!(checked.code, Some(0), "{stem}: {checked:?}");
        assert!(
            checked.stdout.contains(expected),
            "{stem}: {}",
            checked.stdout
        );
        // Every other plugin and the demo server are still reported as working.
        assert!(
            checked.stdout.contains("librunbyte_policy_limits.so  OK"),
            "{stem}: {}",
            checked.stdout
        );
        assert!(
            checked.stdout.contains("demo") && checked.stdout.contains("OK  9 tools"),
            "{stem}: {}",
            checked.stdout
        );
    }
}
