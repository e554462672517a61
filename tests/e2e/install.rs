//! `scripts/install`: the binary, the bundled plugins and completions into a prefix; the
//! installed binary then serves from a folder that holds no source tree and no configuration.

use std::process::Command;

use runbyte_tests::{TempDir, build_dir, repo_root};

#[test]
fn an_installed_runbyte_finds_its_plugins_and_runs_a_program_anywhere() {
    let prefix = TempDir::new("install-prefix");
    let installed = Command::new(repo_root().join("scripts/install"))
        .arg("--from")
        .arg(build_dir())
        .arg(prefix.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&installed.stdout);
    assert!(
        installed.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let runbyte = prefix.path().join("bin/runbyte");
    let plugins = prefix.path().join("lib/runbyte");
    for plugin in [
        "librunbyte_transport_stdio.so",
        "librunbyte_codegen_typescript.so",
        "librunbyte_policy_limits.so",
    ] {
        assert!(plugins.join(plugin).is_file(), "{plugin} missing: {said}");
    }
    let bash = prefix
        .path()
        .join("share/bash-completion/completions/runbyte");
    let completion = std::fs::read_to_string(&bash).unwrap();
    assert!(
        completion.contains("runbyte") && completion.contains("exec"),
        "{completion}"
    );
    assert!(said.contains("mcpServers"), "{said}");

    // A folder with a program and nothing else: the built-in configuration (the demo server,
    // run by the installed binary itself) and the plugins from lib/runbyte.
    let elsewhere = TempDir::new("install-elsewhere");
    elsewhere.write(
        "weather.ts",
        "import { get_weather } from './servers/demo';\n\
         export default await get_weather({ location: { city: 'Paris' } });\n",
    );
    let run = |args: &[&str]| {
        let output = Command::new(&runbyte)
            .args(args)
            .current_dir(elsewhere.path())
            .env_remove("RUNBYTE_CONFIG")
            .env("RUNBYTE_LOG", "warn")
            .env("XDG_DATA_HOME", elsewhere.path())
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, listed, errors) = run(&["plugins"]);
    assert!(ok, "{listed}{errors}");
    assert!(
        listed.contains(
            &plugins
                .join("librunbyte_transport_stdio.so")
                .display()
                .to_string()
        ),
        "{listed}"
    );
    let (ok, out, errors) = run(&["exec", "weather.ts"]);
    assert!(ok && out.contains("cloudy"), "{out}{errors}");
}
