//! Files that hold secrets (a bearer token, a signing key): read only when no one else may.

use std::path::Path;

/// The text of the file at `path`, read through the descriptor whose mode was checked; the
/// outer error is the file's absence or unreadability, the inner one a mode that lets others in
/// (`what` names the file in that message: "token file").
pub fn read_private(path: &Path, what: &str) -> std::io::Result<Result<String, String>> {
    let mut file = std::fs::File::open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Ok(Err(format!(
                "the {what} {} is open to other users (mode {mode:04o}); make it private with \
                 `chmod 600 {}`, and replace what it holds if others may have read it",
                path.display(),
                path.display()
            )));
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text)?;
    Ok(Ok(text))
}

/// Writes `bytes` to `path` so that no one else may read it (mode 0600) and no reader sees half
/// of it: through a temporary file beside it, renamed over it. Creates the folder.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the file has no folder"))?;
    std::fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&temporary)?;
    out.write_all(bytes)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}
