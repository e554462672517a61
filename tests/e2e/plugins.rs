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
    // Its limits, and (having none per server) no call it judges.
    assert_eq!(
        policy.limits(&json!({})).unwrap(),
        json!({"timeout-ms": 1000, "judged-calls": {"servers": []}})
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
        assert!(matches!(error, PluginError::Untrusted { .. }), "{error:?}");
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

/// A copy of the bundled `limits` policy in a fresh folder of its own, set up by `prepare`
/// (a chmod or chown of the file or the folder), under a name only `[[plugins.load]]` finds.
#[cfg(unix)]
fn untrusted_copy(
    label: &str,
    prepare: impl FnOnce(&std::path::Path),
) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(label);
    let copy = dir.path().join("librunbyte_policy_copied.so");
    std::fs::copy(library("librunbyte_policy_limits"), &copy).unwrap();
    prepare(&copy);
    (dir, copy)
}

#[cfg(unix)]
fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
fn chown(path: &std::path::Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

/// Each way others could have changed a plugin gives `Untrusted` with the reason; the same file
/// made private again loads. (The tests run as root, which may chown to a made-up user.)
#[cfg(unix)]
#[test]
fn plugins_others_could_change_are_refused_with_the_reason() {
    type Prepare = Box<dyn Fn(&std::path::Path)>;
    let cases: [(&str, Prepare, &str); 5] = [
        (
            "trust-file-0666",
            Box::new(|file| chmod(file, 0o666)),
            "the file is writable by everyone (mode 0666)",
        ),
        (
            "trust-dir-0777",
            Box::new(|file| chmod(file.parent().unwrap(), 0o777)),
            "is writable by everyone (mode 0777)",
        ),
        (
            "trust-file-group",
            Box::new(|file| {
                chown(file, 0, 12345);
                chmod(file, 0o664);
            }),
            "the file is writable by group 12345 (mode 0664)",
        ),
        (
            "trust-file-owner",
            Box::new(|file| chown(file, 12345, 12345)),
            "the file is owned by user 12345",
        ),
        (
            "trust-dir-owner",
            Box::new(|file| chown(file.parent().unwrap(), 12345, 12345)),
            "is owned by user 12345",
        ),
    ];
    for (label, prepare, reason) in cases {
        let (dir, copy) = untrusted_copy(label, prepare);
        let error = plugin::read_descriptor(&copy).err().unwrap();
        assert!(
            matches!(error, PluginError::Untrusted { .. }),
            "{label}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("refusing to load {}: ", copy.display()))
                && message.contains(reason),
            "{label}: {message}"
        );
        if label.starts_with("trust-dir") {
            assert!(
                message.contains(&format!("its folder {}", dir.path().display())),
                "{label}: {message}"
            );
        }
        // Refused in `[[plugins.load]]`, it does not hide the bundled plugin of that name.
        let search = search_with(std::slice::from_ref(&copy));
        if let Err(error) = plugin::open_policy(&search, "limits", &json!({})) {
            panic!("{label}: the bundled limits no longer loads: {error}");
        }
        // Made private again, the copy loads.
        chown(&copy, 0, 0);
        chown(dir.path(), 0, 0);
        chmod(&copy, 0o755);
        chmod(dir.path(), 0o755);
        let info = plugin::read_descriptor(&copy).unwrap();
        assert_eq!(info.name, "limits");
    }
    host_still_works();
}

/// The library loaded is the file that was checked. A thread keeps swapping two files in at
/// each path: a private policy plugin and a world-writable transport plugin. Whatever the
/// timing, reading the descriptor either refuses the path or loads the private policy: never
/// the transport, which a check of one file followed by a load of the path would let through
/// when the swap falls between them.
#[cfg(target_os = "linux")]
#[test]
fn the_checked_file_is_the_loaded_file() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let dir = TempDir::new("trust-swap");
    let good = dir.path().join("good.so");
    let bad = dir.path().join("bad.so");
    std::fs::copy(library("librunbyte_policy_limits"), &good).unwrap();
    std::fs::copy(library("librunbyte_transport_stdio"), &bad).unwrap();
    chmod(&bad, 0o666);
    const PATHS: usize = 1000;
    // The path being swapped; none (`usize::MAX`) until the first one exists.
    let current = std::sync::Arc::new(AtomicUsize::new(usize::MAX));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let swapper = {
        let (dir, current, done) = (dir.path().to_owned(), current.clone(), done.clone());
        let (good, bad) = (good.clone(), bad.clone());
        std::thread::spawn(move || {
            let mut flip = false;
            while !done.load(Ordering::Relaxed) {
                let n = current.load(Ordering::Relaxed);
                if n == usize::MAX {
                    std::thread::yield_now();
                    continue;
                }
                let staged = dir.join("staged.so");
                let _ = std::fs::remove_file(&staged);
                std::fs::hard_link(if flip { &bad } else { &good }, &staged).unwrap();
                std::fs::rename(&staged, dir.join(format!("lib{n}.so"))).unwrap();
                flip = !flip;
            }
        })
    };
    let (mut loaded, mut refused) = (0, 0);
    for n in 0..PATHS {
        let path = dir.path().join(format!("lib{n}.so"));
        std::fs::hard_link(&good, &path).unwrap();
        current.store(n, Ordering::Relaxed);
        match plugin::read_descriptor(&path) {
            Ok(info) => {
                assert_eq!(
                    info.kind,
                    Some(PluginKind::Policy),
                    "{}: loaded the world-writable file after checking the private one",
                    path.display()
                );
                loaded += 1;
            }
            Err(PluginError::Untrusted { .. }) => refused += 1,
            Err(other) => panic!("{other}"),
        }
    }
    done.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(loaded > 0, "loaded {loaded}, refused {refused}");
}

#[cfg(unix)]
#[test]
fn check_reports_plugins_others_could_change() {
    let (dir, copy) = untrusted_copy("check-untrusted", |file| chmod(file, 0o666));
    let (_owned_dir, owned) = untrusted_copy("check-untrusted-owner", |file| chown(file, 12345, 0));
    let loads = format!(
        "[[plugins.load]]\npath = {:?}\n[[plugins.load]]\npath = {:?}\n",
        copy.display().to_string(),
        owned.display().to_string()
    );
    dir.write("runbyte.toml", &config_with(&loads));
    let checked = run(dir.path(), &["check"]);
    assert_ne!(checked.code, Some(0), "{checked:?}");
    assert!(
        checked.stdout.contains(&format!(
            "refusing to load {}: the file is writable by everyone (mode 0666)",
            copy.display()
        )),
        "{}",
        checked.stdout
    );
    assert!(
        checked.stdout.contains(&format!(
            "refusing to load {}: the file is owned by user 12345",
            owned.display()
        )),
        "{}",
        checked.stdout
    );
    assert!(
        checked.stdout.contains("librunbyte_policy_limits.so  OK"),
        "{}",
        checked.stdout
    );
}

/// Finds the `runbyte plugin-host` child of this process hosting `library`.
#[cfg(target_os = "linux")]
fn plugin_host_child(library: &std::path::Path) -> u32 {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces, so split after its `)`.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if parent != Some(me.as_str()) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
        if args.iter().any(|a| a == "plugin-host")
            && args.iter().any(|a| a == &library.display().to_string())
        {
            found.push(pid);
        }
    }
    assert_eq!(found.len(), 1, "plugin-host children: {found:?}");
    found[0]
}

#[cfg(target_os = "linux")]
fn thread_count(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// Many calls at once to an isolated policy run on its child's fixed threads: the child starts
/// no thread per call, and answers each as the same policy in process does.
#[cfg(target_os = "linux")]
#[test]
fn concurrent_calls_to_an_isolated_policy_start_no_thread_each() {
    use std::sync::{
        Barrier,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    };

    let text = format!(
        "[plugins]\ndirs = [{:?}]\nisolate = [\"limits\"]\n",
        build_dir().display().to_string()
    );
    let config =
        runbyte_core::config::Config::parse(&text, std::path::Path::new("test.toml"), &build_dir())
            .unwrap();
    let search = PluginSearch::from_config(&config).with_host_exe(runbyte_tests::runbyte());
    let config = json!({"timeout-ms": 1000});
    let isolated = plugin::open_policy(&search, "limits", &config).unwrap();
    assert!(isolated.is_isolated());
    let local = plugin::open_policy(&search_with(&[]), "limits", &config).unwrap();
    assert!(!local.is_isolated());
    let call = json!({"server": "demo", "tool": "echo", "arguments": {"message": "hi"}});
    let expected = local.check_call(&call).unwrap();
    assert_eq!(isolated.check_call(&call).unwrap(), expected);

    let child = plugin_host_child(&isolated.info().path);
    let before = thread_count(child);
    let peak = AtomicUsize::new(before);
    let done = AtomicBool::new(false);
    const CALLS: usize = 200;
    let start = Barrier::new(CALLS);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(thread_count(child), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let callers: Vec<_> = (0..CALLS)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    isolated.check_call(&call).unwrap()
                })
            })
            .collect();
        for caller in callers {
            assert_eq!(caller.join().unwrap(), expected);
        }
        done.store(true, Ordering::Relaxed);
    });
    let (peak, after) = (peak.into_inner(), thread_count(child));
    assert_eq!(
        (peak, after),
        (before, before),
        "the child had {before} threads before {CALLS} concurrent calls"
    );
    // Still the same child: nothing crashed and restarted meanwhile.
    assert_eq!(plugin_host_child(&isolated.info().path), child);
}

/// The bundled `limits` plugin, loaded as the host loads it, refuses a value out of the one
/// range table (`wire::RANGES`, the host's too) by key and range: 16 KiB of stack was once
/// accepted here and clamped by the host without a word.
#[test]
fn the_limits_plugin_refuses_a_value_out_of_range_by_key_and_range() {
    let search = search_with(&[]);
    let error = plugin::open_policy(&search, "limits", &json!({"stack-kb": 16}))
        .err()
        .expect("16 KiB of stack is refused");
    assert!(
        error.to_string().contains(
            "`sandbox.limits.stack-kb = 16` is out of range: it must be 64 to 524288 (KiB)"
        ),
        "{error}"
    );
    let policy = plugin::open_policy(&search, "limits", &json!({"stack-kb": 64})).unwrap();
    assert_eq!(
        policy.limits(&json!({})).unwrap(),
        json!({"stack-kb": 64, "judged-calls": {"servers": []}})
    );
}
