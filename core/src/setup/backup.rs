//! What `runbyte setup` changed, kept so that `runbyte setup --undo` can put it back: one folder
//! per run under `$XDG_STATE_HOME/runbyte/setup/` (private), holding each changed file's earlier
//! bytes and a manifest naming the files, their modes, and a digest of what setup wrote.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::write_atomic;
use crate::os_paths::Client;

/// The manifest's name in a run's folder; renamed to [`UNDONE`] once undone.
const MANIFEST: &str = "manifest.json";
const UNDONE: &str = "manifest.undone.json";

/// One run of `runbyte setup`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The format's version.
    pub version: u32,
    /// The client set up (`claude-code`).
    pub client: String,
    /// When, in UTC (`20261202T010203Z`).
    pub stamp: String,
    /// The files it changed, in the order written.
    pub files: Vec<FileRecord>,
    /// The folders it made for them, outermost first (undo removes them when empty).
    #[serde(default)]
    pub created_dirs: Vec<PathBuf>,
}

/// One file setup changed.
#[derive(Debug, Serialize, Deserialize)]
pub struct FileRecord {
    /// Its path (a symbolic link's target).
    pub path: PathBuf,
    /// Its earlier bytes' file in the run's folder; `None` when setup created it.
    pub backup: Option<String>,
    /// Its earlier mode (Unix permission bits).
    pub mode: Option<u32>,
    /// SHA-256 of what setup wrote, to tell whether someone changed it since.
    pub written_sha256: String,
}

/// A file to change: its path, its current bytes (`None`: it does not exist) and its new ones.
pub struct Change {
    pub path: PathBuf,
    pub before: Option<Vec<u8>>,
    pub after: Vec<u8>,
    pub mode: Option<u32>,
}

/// The folder of every run's backup.
pub fn root() -> Result<PathBuf, String> {
    crate::dirs::user_folder(crate::dirs::Base::State, "setup").ok_or_else(|| {
        "cannot keep a backup: neither XDG_STATE_HOME nor HOME is set; nothing was changed"
            .to_owned()
    })
}

pub fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Keeps the earlier bytes of every file in `changes` in a new folder of [`root`], with its
/// manifest; the folder's path.
pub fn save(client: Client, stamp: &str, changes: &[Change]) -> Result<PathBuf, String> {
    let root = root()?;
    crate::config::private_dir(&root)
        .map_err(|e| format!("cannot make the backup folder {}: {e}", root.display()))?;
    let mut folder = root.join(format!("{stamp}-{}", client.id()));
    let mut attempt = 1;
    // Two runs in one second get two folders, ordered by name.
    #[cfg(unix)]
    let builder = {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
    };
    #[cfg(not(unix))]
    let builder = std::fs::DirBuilder::new();
    while let Err(error) = builder.create(&folder) {
        if error.kind() != std::io::ErrorKind::AlreadyExists || attempt > 99 {
            return Err(format!("cannot make {}: {error}", folder.display()));
        }
        attempt += 1;
        folder = root.join(format!("{stamp}.{attempt:02}-{}", client.id()));
    }
    let mut files = Vec::new();
    for (index, change) in changes.iter().enumerate() {
        let backup = match &change.before {
            Some(bytes) => {
                let name = format!(
                    "{}-{}",
                    index + 1,
                    change
                        .path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                );
                crate::config::write_private(&folder.join(&name), bytes)
                    .map_err(|e| format!("cannot back up {}: {e}", change.path.display()))?;
                Some(name)
            }
            None => None,
        };
        files.push(FileRecord {
            path: change.path.clone(),
            backup,
            mode: change.mode,
            written_sha256: sha256(&change.after),
        });
    }
    // The folders the writes will make: each missing ancestor of each file.
    let mut created_dirs = Vec::new();
    for change in changes {
        let mut missing: Vec<PathBuf> = change
            .path
            .ancestors()
            .skip(1)
            .take_while(|dir| !dir.exists())
            .map(Path::to_owned)
            .collect();
        missing.reverse();
        for dir in missing {
            if !created_dirs.contains(&dir) {
                created_dirs.push(dir);
            }
        }
    }
    let manifest = Manifest {
        version: 1,
        client: client.id().to_owned(),
        stamp: stamp.to_owned(),
        files,
        created_dirs,
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?;
    crate::config::write_private(&folder.join(MANIFEST), &text)
        .map_err(|e| format!("cannot write the backup's manifest: {e}"))?;
    Ok(folder)
}

/// The latest run not yet undone (of `client`, when given): its folder and manifest.
pub fn latest(client: Option<Client>) -> Result<Option<(PathBuf, Manifest)>, String> {
    let root = root()?;
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(None);
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.join(MANIFEST).is_file())
        .collect();
    folders.sort();
    for folder in folders.into_iter().rev() {
        let manifest_path = folder.join(MANIFEST);
        let text = match crate::config::read_private(&manifest_path, "setup backup manifest") {
            Ok(Ok(text)) => text,
            Ok(Err(message)) => return Err(message),
            Err(error) => return Err(format!("cannot read {}: {error}", manifest_path.display())),
        };
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a setup manifest: {e}", manifest_path.display()))?;
        if client.is_none_or(|client| client.id() == manifest.client) {
            return Ok(Some((folder, manifest)));
        }
    }
    Ok(None)
}

/// What undoing one file does.
enum Step {
    /// It is as it was before setup already.
    Nothing,
    /// Write these bytes back.
    Restore(Vec<u8>),
    /// Delete it (setup created it).
    Remove,
}

/// Puts back every file of the run in `folder`, byte for byte, and deletes those it created;
/// a file changed since (by the client, or by hand) stops the undo before anything is touched,
/// unless `force`. The lines to print.
pub fn undo(folder: &Path, manifest: &Manifest, force: bool) -> Result<Vec<String>, String> {
    let mut steps = Vec::new();
    let mut changed = Vec::new();
    for record in &manifest.files {
        let current = match std::fs::read(&record.path) {
            Ok(bytes) => Some(bytes),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(format!("cannot read {}: {error}", record.path.display())),
        };
        let before =
            match &record.backup {
                Some(name) => Some(std::fs::read(folder.join(name)).map_err(|e| {
                    format!("the backup {} is gone: {e}", folder.join(name).display())
                })?),
                None => None,
            };
        let step = if current == before {
            Step::Nothing
        } else if current.as_deref().map(sha256).as_deref() == Some(&record.written_sha256) || force
        {
            match before {
                Some(bytes) => Step::Restore(bytes),
                None => Step::Remove,
            }
        } else {
            let kept = record.backup.as_ref().map_or_else(
                || "it did not exist before".to_owned(),
                |name| format!("its earlier content is in {}", folder.join(name).display()),
            );
            changed.push(format!(
                "{} changed since `runbyte setup {}` wrote it ({kept})",
                record.path.display(),
                manifest.client
            ));
            continue;
        };
        steps.push((record, step));
    }
    if !changed.is_empty() {
        return Err(format!(
            "{}; nothing was restored (--force restores anyway)",
            changed.join("; ")
        ));
    }
    let mut lines = Vec::new();
    // The client's file was written last: it goes back first, so that it never names a
    // runbyte.toml that is gone.
    for (record, step) in steps.into_iter().rev() {
        let path = record.path.display();
        match step {
            Step::Nothing => lines.push(format!("{path}: already as before setup")),
            Step::Restore(bytes) => {
                write_atomic(&record.path, &bytes, record.mode)
                    .map_err(|e| format!("cannot restore {path}: {e}"))?;
                lines.push(format!("{path}: restored"));
            }
            Step::Remove => {
                std::fs::remove_file(&record.path)
                    .map_err(|e| format!("cannot remove {path}: {e}"))?;
                lines.push(format!("{path}: removed (setup had created it)"));
            }
        }
    }
    // The folders setup made go too, innermost first, when nothing else came to live in them.
    for dir in manifest.created_dirs.iter().rev() {
        if std::fs::remove_dir(dir).is_ok() {
            lines.push(format!("{}: removed (setup had made it)", dir.display()));
        }
    }
    std::fs::rename(folder.join(MANIFEST), folder.join(UNDONE))
        .map_err(|e| format!("restored, but cannot mark {} undone: {e}", folder.display()))?;
    Ok(lines)
}
