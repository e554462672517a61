//! The workspace's own build: `cargo run --release` (the default members), `-p runbyte-core`
//! (maturin, `cargo install`) and `cargo build --workspace` (scripts/install, scripts/test, the
//! benches) must build every shared dependency with the same features, or switching between them
//! rebuilds most of the tree.

use std::{collections::BTreeMap, process::Command};

use runbyte_tests::repo_root;

/// Each package's enabled features, as `cargo tree` resolves them for one selection.
fn features(selection: &[&str]) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(repo_root())
        .args(["tree", "--offline", "--locked", "--prefix", "none"])
        .args(["-e", "normal,build", "-f", "{p}|{f}"])
        .args(selection)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo tree {selection:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some((package, enabled)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        // A package built for the host (a build script's dependency) and for the target may
        // differ; keep every set seen.
        let sets = packages.entry(package.to_owned()).or_default();
        if !sets.iter().any(|set| set == enabled) {
            sets.push(enabled.to_owned());
            sets.sort();
        }
    }
    packages
}

#[test]
fn the_default_members_and_the_workspace_build_one_feature_set() {
    let workspace = features(&["--workspace"]);
    let mut parted = Vec::new();
    for (selection, args) in [
        ("by default", &[][..]),
        ("with -p runbyte-core", &["-p", "runbyte-core"]),
    ] {
        for (package, sets) in features(args) {
            match workspace.get(&package) {
                Some(other) if *other != sets => parted.push(format!(
                    "{package}: {sets:?} {selection}, {other:?} in the workspace"
                )),
                _ => {}
            }
        }
    }
    assert!(
        parted.is_empty(),
        "add the workspace's features of these dependencies to tests/feature-set/Cargo.toml:\n{}",
        parted.join("\n")
    );
}
