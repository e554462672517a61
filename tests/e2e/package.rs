//! `scripts/package`: the archive, the PyPI wheel, the npm packages and the Claude Desktop
//! extension, made once from the debug build folder; each is installed or unpacked the way a
//! user does it (pip into a fresh virtualenv, npm into an empty prefix offline, mcpb unpack) and
//! started the way a client's configuration says (a command and its arguments), and a real MCP
//! client (the Python SDK) runs a program through it against the built-in demo server.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use runbyte_tests::{TempDir, build_dir, repo_root, result_json, test_dep};

/// What `scripts/package all` made, in a folder of the test run.
struct Packages {
    archive: PathBuf,
    wheel: PathBuf,
    npm_main: PathBuf,
    npm_platform: PathBuf,
    mcpb: PathBuf,
}

/// The mcpb CLI scripts/test-deps installs (pinned), or `None` (skipped) without it.
fn mcpb_cli() -> Option<PathBuf> {
    test_dep("node_modules/@anthropic-ai/mcpb/dist/cli/cli.js")
}

/// Runs `command` to its end, killed past `bound` (a hang catcher, far above the usual time).
fn bounded(command: &mut Command, bound: Duration) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let (out, err) = (read(Box::new(out)), read(Box::new(err)));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `scripts/package all --from target/debug`, once for every test here.
fn packages() -> Option<&'static Packages> {
    static PACKAGES: OnceLock<Option<Packages>> = OnceLock::new();
    PACKAGES
        .get_or_init(|| {
            let cli = mcpb_cli()?;
            let out = build_dir().parent().unwrap().join("package-test");
            let _ = std::fs::remove_dir_all(&out);
            let made = bounded(
                Command::new(repo_root().join("scripts/package"))
                    .args(["all", "--from"])
                    .arg(build_dir())
                    .arg("--out")
                    .arg(&out)
                    .env("MCPB", cli),
                Duration::from_secs(600),
            );
            assert!(
                made.status.success(),
                "scripts/package all: {}",
                said(&made)
            );
            let listed = String::from_utf8_lossy(&made.stdout).into_owned();
            let find = |test: &dyn Fn(&str) -> bool| {
                let line = listed
                    .lines()
                    .find(|line| test(line))
                    .unwrap_or_else(|| panic!("not made: {listed}"));
                PathBuf::from(line)
            };
            Some(Packages {
                archive: find(&|line| line.ends_with(".tar.gz")),
                wheel: find(&|line| line.ends_with(".whl")),
                npm_main: find(&|line| line.ends_with("/runbyte-0.1.0.tgz")),
                npm_platform: find(&|line| {
                    line.contains("/runbyte-linux-") && line.ends_with(".tgz")
                }),
                mcpb: find(&|line| line.ends_with(".mcpb")),
            })
        })
        .as_ref()
}

/// The Python SDK client (`tests/python/client.py`) in `command` mode: it spawns `command` as
/// a client configuration would (no cwd set: the client's own, `dir`), with only the
/// environment the SDK passes by default (`HOME` a fresh folder, `PATH`) and `env`; `program`
/// instead of the default one. Its report.
fn client(
    dir: &Path,
    home: &Path,
    env: &[(&str, &str)],
    program: Option<&Path>,
    command: &[&str],
) -> serde_json::Value {
    let python = test_dep("venv/bin/python").unwrap();
    let mut args = vec![
        repo_root()
            .join("tests/python/client.py")
            .display()
            .to_string(),
    ];
    if let Some(program) = program {
        args.extend(["--program".to_owned(), program.display().to_string()]);
    }
    for (name, value) in env {
        args.push("--env".to_owned());
        args.push(format!("{name}={value}"));
    }
    args.push("command".to_owned());
    args.extend(command.iter().map(|arg| (*arg).to_owned()));
    let output = bounded(
        Command::new(python)
            .args(&args)
            .current_dir(dir)
            .env("HOME", home)
            .env_remove("RUNBYTE_CONFIG"),
        Duration::from_secs(120),
    );
    assert!(
        output.status.success(),
        "the Python client failed: {}",
        said(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The default program's answer: the demo server's weather and issues, from a real execution.
fn assert_ran_the_program(report: &serde_json::Value) {
    let result = report["result"].as_str().unwrap();
    assert_eq!(report["result_is_error"], false, "{result}");
    assert_eq!(
        result_json(result),
        serde_json::json!({"conditions": "cloudy", "issues": 8}),
        "{result}"
    );
    assert!(
        report["listing"].as_str().unwrap().contains("demo/"),
        "{report}"
    );
}

fn sha256_matches(file: &Path) {
    let checked = bounded(
        Command::new("sha256sum")
            .arg("--check")
            .arg(file.with_file_name(format!(
                "{}.sha256",
                file.file_name().unwrap().to_string_lossy()
            )))
            .current_dir(file.parent().unwrap()),
        Duration::from_secs(60),
    );
    assert!(checked.status.success(), "{}", said(&checked));
}

#[test]
fn the_archive_unpacked_anywhere_checks_and_lists_its_plugins() {
    let Some(made) = packages() else { return };
    sha256_matches(&made.archive);
    let dir = TempDir::new("package-archive");
    let unpacked = bounded(
        Command::new("tar")
            .arg("-xzf")
            .arg(&made.archive)
            .arg("-C")
            .arg(dir.path()),
        Duration::from_secs(120),
    );
    assert!(unpacked.status.success(), "{}", said(&unpacked));
    let name = made.archive.file_name().unwrap().to_string_lossy();
    let root = dir.path().join(name.trim_end_matches(".tar.gz"));
    for file in [
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "README.md",
        "share/bash-completion/completions/runbyte",
        "share/zsh/site-functions/_runbyte",
        "share/fish/vendor_completions.d/runbyte.fish",
    ] {
        assert!(root.join(file).is_file(), "{file} missing from {name}");
    }
    let home = TempDir::new("package-archive-home");
    let run = |args: &[&str]| {
        bounded(
            Command::new(root.join("bin/runbyte"))
                .args(args)
                .current_dir(home.path())
                .env("HOME", home.path())
                .env_remove("XDG_DATA_HOME")
                .env_remove("RUNBYTE_CONFIG"),
            Duration::from_secs(60),
        )
    };
    let checked = run(&["check"]);
    assert!(checked.status.success(), "{}", said(&checked));
    assert!(said(&checked).contains("all OK"), "{}", said(&checked));
    let listed = run(&["plugins"]);
    assert!(listed.status.success(), "{}", said(&listed));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let plugins = root.join("lib/runbyte");
    let mut found: Vec<_> = std::fs::read_dir(&plugins)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            "librunbyte_codegen_jsdoc.so",
            "librunbyte_codegen_typescript.so",
            "librunbyte_policy_limits.so",
            "librunbyte_transport_http.so",
            "librunbyte_transport_sse.so",
            "librunbyte_transport_stdio.so",
        ]
    );
    for plugin in &found {
        let path = plugins.join(plugin).display().to_string();
        assert!(listed.contains(&path), "{path} not loaded: {listed}");
    }
}

#[test]
fn the_wheel_installed_with_pip_in_a_fresh_venv_serves_a_client() {
    let Some(made) = packages() else { return };
    sha256_matches(&made.wheel);
    let home = TempDir::new("package-wheel-home");
    let venv = home.path().join("venv");
    let created = bounded(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        Duration::from_secs(120),
    );
    assert!(created.status.success(), "{}", said(&created));
    let installed = bounded(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--no-index",
                "--disable-pip-version-check",
            ])
            .arg(&made.wheel)
            .env("HOME", home.path()),
        Duration::from_secs(300),
    );
    assert!(installed.status.success(), "{}", said(&installed));
    // The prefix's layout: bin/runbyte, lib/runbyte/<plugins>, share/ completions.
    assert!(
        venv.join("lib/runbyte/librunbyte_transport_stdio.so")
            .is_file()
    );
    assert!(
        venv.join("share/bash-completion/completions/runbyte")
            .is_file()
    );
    let runbyte = venv.join("bin/runbyte").display().to_string();
    let report = client(home.path(), home.path(), &[], None, &[&runbyte, "serve"]);
    assert_ran_the_program(&report);
}

/// `npm install <tarballs>` into an empty prefix with nothing cached and no registry: the other
/// platforms' optional packages cannot be had and must not fail the install.
fn npm_install(prefix: &Path, tarballs: &[&Path]) {
    let cache = prefix.join(".npm-cache");
    let installed = bounded(
        Command::new("npm")
            .args(["install", "--offline", "--no-audit", "--no-fund"])
            .arg("--cache")
            .arg(&cache)
            .args(tarballs)
            .current_dir(prefix)
            .env("HOME", prefix),
        Duration::from_secs(300),
    );
    assert!(
        installed.status.success(),
        "npm install: {}",
        said(&installed)
    );
}

#[test]
fn the_npm_packages_installed_offline_serve_a_client_through_npx() {
    let Some(made) = packages() else { return };
    sha256_matches(&made.npm_main);
    sha256_matches(&made.npm_platform);
    let prefix = TempDir::new("package-npm");
    npm_install(prefix.path(), &[&made.npm_main, &made.npm_platform]);
    let platform = prefix.path().join("node_modules/@runbyte/linux-x64");
    assert!(platform.join("bin/runbyte").is_file());
    assert!(
        platform
            .join("lib/runbyte/librunbyte_policy_limits.so")
            .is_file()
    );

    // A project's own install is what `npx runbyte` runs, from the project's folder.
    let report = client(
        prefix.path(),
        prefix.path(),
        &[],
        None,
        &["npx", "runbyte", "serve"],
    );
    assert_ran_the_program(&report);

    // The shim tells the binary how it was launched (`runbyte setup` writes that command): a
    // configuration that needs ${RUNBYTE_LAUNCH} loads through the shim and not without it.
    let config = prefix.write(
        "launch.toml",
        "[servers.demo]\ncommand = \"${RUNBYTE_EXE}\"\nargs = [\"demo-server\"]\n\
         env = { GREETING = \"${RUNBYTE_LAUNCH}\" }\n",
    );
    let check = |command: &mut Command| {
        bounded(
            command
                .arg("check")
                .arg("--config")
                .arg(&config)
                .current_dir(prefix.path())
                .env("HOME", prefix.path())
                .env_remove("RUNBYTE_LAUNCH"),
            Duration::from_secs(120),
        )
    };
    let shimmed = check(Command::new("npx").arg("runbyte"));
    assert!(shimmed.status.success(), "{}", said(&shimmed));
    let direct = check(&mut Command::new(platform.join("bin/runbyte")));
    assert!(!direct.status.success(), "{}", said(&direct));
    assert!(
        said(&direct).contains("RUNBYTE_LAUNCH"),
        "{}",
        said(&direct)
    );
}

#[test]
fn the_npm_shim_names_the_missing_platform_package_and_how_to_get_it() {
    let Some(made) = packages() else { return };
    let prefix = TempDir::new("package-npm-missing");
    npm_install(prefix.path(), &[&made.npm_main]);
    assert!(
        !prefix
            .path()
            .join("node_modules/@runbyte/linux-x64")
            .exists()
    );
    let ran = bounded(
        Command::new("npx")
            .args(["runbyte", "serve"])
            .current_dir(prefix.path())
            .env("HOME", prefix.path()),
        Duration::from_secs(120),
    );
    let message = String::from_utf8_lossy(&ran.stderr).into_owned();
    assert_eq!(ran.status.code(), Some(1), "{message}");
    assert!(
        ran.stdout.is_empty(),
        "stdout is the protocol: {}",
        said(&ran)
    );
    assert!(
        message.starts_with("runbyte: the package @runbyte/linux-x64 ")
            && message.contains("optional dependenc")
            && message.contains("npm install @runbyte/linux-x64@0.1.0"),
        "{message}"
    );
    assert!(
        !message.contains("    at ") && !message.contains("node:internal"),
        "a stack trace: {message}"
    );
}

#[test]
fn the_claude_desktop_extension_validates_and_starts_as_its_manifest_says() {
    let Some(made) = packages() else { return };
    let cli = mcpb_cli().unwrap();
    sha256_matches(&made.mcpb);
    let dir = TempDir::new("package-mcpb");
    let bundle = dir.path().join("runbyte");
    let unpacked = bounded(
        Command::new("node")
            .arg(&cli)
            .arg("unpack")
            .arg(&made.mcpb)
            .arg(&bundle),
        Duration::from_secs(120),
    );
    assert!(unpacked.status.success(), "{}", said(&unpacked));
    let validated = bounded(
        Command::new("node")
            .arg(&cli)
            .arg("validate")
            .arg(bundle.join("manifest.json")),
        Duration::from_secs(60),
    );
    assert!(validated.status.success(), "{}", said(&validated));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["server"]["type"], "binary");
    assert_eq!(manifest["user_config"]["config"]["type"], "file");
    assert!(
        bundle
            .join(manifest["server"]["entry_point"].as_str().unwrap())
            .is_file()
    );

    // The launch command as the host computes it: mcpb's own getMcpConfigForManifest
    // substitutes ${__dirname} and the user's settings (none: the defaults; or a config file).
    let library = cli
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("shared/config.js");
    let launch = |user_config: serde_json::Value| -> serde_json::Value {
        let script = "import { readFileSync } from 'fs';\n\
             const [lib, dir, user] = process.argv.slice(1);\n\
             const { getMcpConfigForManifest } = await import(lib);\n\
             const manifest = JSON.parse(readFileSync(dir + '/manifest.json', 'utf8'));\n\
             console.log(JSON.stringify(await getMcpConfigForManifest({ manifest, \
             extensionPath: dir, systemDirs: { HOME: process.env.HOME }, \
             userConfig: JSON.parse(user), pathSeparator: '/' })));";
        let output = bounded(
            Command::new("node")
                .args(["--input-type=module", "-e", script])
                .arg(&library)
                .arg(&bundle)
                .arg(user_config.to_string()),
            Duration::from_secs(60),
        );
        assert!(output.status.success(), "{}", said(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let start = |config: &serde_json::Value, program: Option<&Path>| {
        let mut command = vec![config["command"].as_str().unwrap()];
        command.extend(
            config["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|arg| arg.as_str().unwrap()),
        );
        let env: Vec<(&str, &str)> = config["env"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str().unwrap()))
            .collect();
        client(dir.path(), dir.path(), &env, program, &command)
    };

    // No setting: the built-in configuration and its demo server.
    let default = launch(serde_json::json!({}));
    assert!(
        default["command"]
            .as_str()
            .unwrap()
            .starts_with(&bundle.display().to_string()),
        "{default}"
    );
    assert_ran_the_program(&start(&default, None));

    // The configuration file setting: the demo server under another name, so only that file
    // can have served it.
    let config = dir.write(
        "runbyte.toml",
        "[servers.weather]\ncommand = \"${RUNBYTE_EXE}\"\nargs = [\"demo-server\"]\n",
    );
    let program = dir.write(
        "program.ts",
        "import { get_weather } from './servers/weather';\n\
         export default (await get_weather({ location: { city: 'Paris' } }) as any).conditions;\n",
    );
    let chosen = launch(serde_json::json!({"config": config.display().to_string()}));
    let report = start(&chosen, Some(&program));
    let result = report["result"].as_str().unwrap();
    assert_eq!(result_json(result), "cloudy", "{result}");
}
