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

/// The files `scripts/package KIND --from target/debug` made (the lines it printed): each kind
/// once for every test here, in a folder of its own, so the kinds are made side by side.
/// `None` (skipped) when a test dependency it needs is missing.
fn made(kind: &'static str) -> Option<&'static [PathBuf]> {
    static ARCHIVE: OnceLock<Option<Vec<PathBuf>>> = OnceLock::new();
    static WHEEL: OnceLock<Option<Vec<PathBuf>>> = OnceLock::new();
    static NPM: OnceLock<Option<Vec<PathBuf>>> = OnceLock::new();
    static MCPB: OnceLock<Option<Vec<PathBuf>>> = OnceLock::new();
    let cell = match kind {
        "archive" => &ARCHIVE,
        "wheel" => &WHEEL,
        "npm" => &NPM,
        _ => &MCPB,
    };
    cell.get_or_init(|| {
        let mut command = Command::new(repo_root().join("scripts/package"));
        if kind == "mcpb" {
            command.env("MCPB", mcpb_cli()?);
        }
        if kind == "wheel" {
            // maturin builds the binary into the same folder: with the workspace's feature set
            // it compiles nothing.
            command.env("MATURIN", test_dep("venv/bin/maturin")?);
        }
        let out = build_dir()
            .parent()
            .unwrap()
            .join("package-test")
            .join(kind);
        let _ = std::fs::remove_dir_all(&out);
        let made = bounded(
            command
                .args([kind, "--from"])
                .arg(build_dir())
                .arg("--out")
                .arg(&out),
            Duration::from_secs(600),
        );
        assert!(
            made.status.success(),
            "scripts/package {kind}: {}",
            said(&made)
        );
        let files: Vec<PathBuf> = String::from_utf8_lossy(&made.stdout)
            .lines()
            .map(PathBuf::from)
            .collect();
        for file in &files {
            assert!(file.is_file(), "{} was not made", file.display());
            sha256_matches(file);
        }
        Some(files)
    })
    .as_deref()
}

/// The one file of `files` whose name ends with `suffix`.
fn named<'a>(files: &'a [PathBuf], suffix: &str) -> &'a Path {
    let mut found = files
        .iter()
        .filter(|file| file.to_string_lossy().ends_with(suffix));
    let file = found
        .next()
        .unwrap_or_else(|| panic!("no *{suffix} in {files:?}"));
    assert!(
        found.next().is_none(),
        "more than one *{suffix} in {files:?}"
    );
    file
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

/// The `.sha256` beside `file` checks.
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
    let Some(files) = made("archive") else { return };
    let archive = named(files, ".tar.gz");
    let dir = TempDir::new("package-archive");
    let unpacked = bounded(
        Command::new("tar")
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(dir.path()),
        Duration::from_secs(120),
    );
    assert!(unpacked.status.success(), "{}", said(&unpacked));
    let name = archive.file_name().unwrap().to_string_lossy();
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
    let Some(files) = made("wheel") else { return };
    let wheel = named(files, ".whl");
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
            .arg(wheel)
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

#[test]
fn the_wheel_run_by_uvx_serves_a_client() {
    let Some(files) = made("wheel") else { return };
    let uvx = test_dep("venv/bin/uvx").unwrap().display().to_string();
    // What a client configuration says (`uvx runbyte serve`), from the wheel file rather than
    // PyPI; uv's cache, tools and interpreters lie in the fresh HOME.
    let home = TempDir::new("package-uvx-home");
    let wheel = named(files, ".whl").display().to_string();
    let command = [
        uvx.as_str(),
        "--offline",
        "--from",
        &wheel,
        "runbyte",
        "serve",
    ];
    let report = client(home.path(), home.path(), &[], None, &command);
    assert_ran_the_program(&report);
}

#[test]
fn the_wheel_installed_by_pipx_serves_a_client_through_its_link() {
    let Some(files) = made("wheel") else { return };
    let wheel = named(files, ".whl");
    let pipx = test_dep("venv/bin/pipx").unwrap();
    let home = TempDir::new("package-pipx-home");
    let installed = bounded(
        Command::new(pipx)
            .arg("install")
            .arg(wheel)
            .env("HOME", home.path())
            .env("PIP_NO_INDEX", "1")
            // pipx's own defaults under the fresh HOME, as a user's first install has them.
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PIPX_HOME")
            .env_remove("PIPX_BIN_DIR"),
        Duration::from_secs(300),
    );
    assert!(
        installed.status.success(),
        "pipx install: {}",
        said(&installed)
    );
    // pipx links ~/.local/bin/runbyte to its venv's bin/runbyte; the plugins are in the venv.
    let link = home.path().join(".local/bin/runbyte");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{}",
        link.display()
    );
    let link = link.display().to_string();
    let report = client(home.path(), home.path(), &[], None, &[&link, "serve"]);
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
    let Some(files) = made("npm") else { return };
    let main = named(files, "/runbyte-0.1.0.tgz");
    let platform_package = named(files, "/runbyte-linux-x64-0.1.0.tgz");
    let prefix = TempDir::new("package-npm");
    npm_install(prefix.path(), &[main, platform_package]);
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
    let Some(files) = made("npm") else { return };
    let prefix = TempDir::new("package-npm-missing");
    npm_install(prefix.path(), &[named(files, "/runbyte-0.1.0.tgz")]);
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
    let Some(files) = made("mcpb") else { return };
    let cli = mcpb_cli().unwrap();
    let dir = TempDir::new("package-mcpb");
    let bundle = dir.path().join("runbyte");
    let unpacked = bounded(
        Command::new("node")
            .arg(&cli)
            .arg("unpack")
            .arg(named(files, ".mcpb"))
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
