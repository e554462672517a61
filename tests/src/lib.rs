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
        dir.join("runbyte").exists(),
        "{} has no runbyte binary: run `cargo build --workspace` first (scripts/test does)",
        dir.display()
    );
    dir
}

/// The built `runbyte` binary.
pub fn runbyte() -> PathBuf {
    build_dir().join("runbyte")
}

/// A built plugin library by file stem, e.g. `librunbyte_policy_panics`.
pub fn library(stem: &str) -> PathBuf {
    let path = build_dir().join(format!("{stem}{}", std::env::consts::DLL_SUFFIX));
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
        .output()
        .unwrap();
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A configuration file's text that uses the built plugins and the demo server, plus `extra`.
pub fn config_with(extra: &str) -> String {
    format!(
        "[plugins]\ndirs = [{:?}]\n\n[servers.demo]\ncommand = \"${{RUNBYTE_EXE}}\"\nargs = [\"demo-server\"]\n\n{extra}",
        build_dir().display().to_string()
    )
}
